"""``simnode run`` ends its process without the interpreter's teardown (cli._exit_now): what
it printed and every file it wrote must be whole when the process is gone."""

import gzip
import json
import subprocess
import sys


def test_run_output_and_files_are_whole_after_the_fast_exit(small_gemm, tmp_path, repo_root):
    out_dir, trace = tmp_path / "out", tmp_path / "t.json.gz"
    done = subprocess.run([sys.executable, "-m", "simnode", "run",
                           str(repo_root / "topologies" / "ascend950dt.yaml"), str(small_gemm()),
                           "--json", "--out", str(out_dir), "--trace", str(trace)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["kind"] == "gemm"
    saved = json.loads((out_dir / "result.json").read_text())
    assert abs(saved["makespan_ns"] - printed["makespan_ns"]) < 0.01    # --json rounds
    for f in out_dir.iterdir():                   # config.json, and series.json if any
        json.loads(f.read_text())
    events = json.loads(gzip.decompress(trace.read_bytes()))
    assert events["traceEvents"]


def test_a_closed_reader_is_not_an_error(small_gemm, repo_root, tmp_path):
    # the reader of stdout went away before the flush at exit: exit 0, nothing on stderr
    proc = subprocess.Popen([sys.executable, "-m", "simnode", "run",
                             str(repo_root / "topologies" / "ascend950dt.yaml"), str(small_gemm()),
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err
