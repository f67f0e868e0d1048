"""``simnode run`` and ``simnode schedule`` end to end (in-process): outputs, overrides,
determinism, and user errors (impossible schedules, deadlocks) as one line and exit 2."""

from __future__ import annotations

import json
import signal
from contextlib import contextmanager

import pytest

from simnode.instr import isa
from simnode.instr.schedule import CoreProgram, KernelSchedule
from simnode.workloads import registry
from simnode.workloads.chiprun import run_schedule

SMALL = ["--set", "m=256", "--set", "n=512", "--set", "k=1024"]


def _json(res) -> dict:
    assert res.code == 0, res.err
    assert res.err == ""
    return json.loads(res.out)


def test_run_prints_a_table(cli, topology_path, gemm_workload_path):
    res = cli("run", topology_path, gemm_workload_path, *SMALL)
    assert res.code == 0 and res.err == ""
    rows = dict(line.split(None, 1) for line in res.out.splitlines() if line.strip())
    assert rows["workload"] == "gemm-bf16-4096x7168x16384"
    assert rows["makespan"].endswith(" us") and rows["achieved"].endswith(" TFLOPS")
    assert "bottleneck" in rows and "roofline" in rows


def test_run_json_has_the_result_fields(cli, topology_path, gemm_workload_path):
    d = _json(cli("run", topology_path, gemm_workload_path, "--json", *SMALL))
    for key in ("makespan_ns", "tflops", "bottleneck", "flops", "roofline_ns", "pipe_busy_frac",
                "l2_GBps", "hbm_GBps", "block_m", "peak_tflops"):
        assert key in d, key
    assert d["kind"] == "gemm" and (d["m"], d["n"], d["k"], d["dtype"]) == (256, 512, 1024, "bf16")
    assert d["flops"] == 2.0 * 256 * 512 * 1024
    assert d["tflops"] == pytest.approx(d["flops"] / d["makespan_ns"] / 1000, abs=1e-3)
    assert d["roofline_ns"] <= d["makespan_ns"]
    assert d["bottleneck"] in {"cube (aic.m)", "AIC MTE2 (GM->L1)", "MTE1 (L1->L0)",
                               "FixPipe (aic.fix)", "L2 bandwidth", "HBM bandwidth"}
    assert set(d["pipe_busy_frac"]) == {"aic.fix", "aic.m", "aic.mte1", "aic.mte2"}
    assert all(0 <= v <= 1 for v in d["pipe_busy_frac"].values())


def test_set_dtype(cli, topology_path, gemm_workload_path):
    d = _json(cli("run", topology_path, gemm_workload_path, "--json", *SMALL, "--set", "dtype=fp8"))
    assert d["dtype"] == "fp8"
    assert d["peak_tflops"] == pytest.approx(865.0752)
    assert 0 < d["tflops"] < 865.0752


def test_set_topology_hbm_bandwidth(cli, topology_path, gemm_workload_path):
    args = ("run", topology_path, gemm_workload_path, "--json", "--set", "m=32", "--set", "k=2048")
    base = _json(cli(*args))
    fast = _json(cli(*args, "--set", "topology.chip.memory.hbm_bandwidth_GBps=5000"))
    # utilization is measured against the overridden bandwidth, the bound uses it too
    assert fast["hbm_util_frac"] == pytest.approx(fast["hbm_GBps"] / 5000, abs=1e-5)
    assert base["hbm_util_frac"] == pytest.approx(base["hbm_GBps"] / 3500, abs=1e-5)
    assert fast["bound_hbm_ns"] == pytest.approx(base["bound_hbm_ns"] * 3500 / 5000, rel=1e-6)
    assert fast["makespan_ns"] <= base["makespan_ns"]


def test_json_runs_are_byte_identical(cli, topology_path, gemm_workload_path):
    a = cli("run", topology_path, gemm_workload_path, "--json", *SMALL, "--set", "dtype=fp4")
    b = cli("run", topology_path, gemm_workload_path, "--json", *SMALL, "--set", "dtype=fp4")
    assert a.code == b.code == 0
    assert a.out == b.out and a.out


def test_seed_without_a_seed_field_is_a_user_error(cli, topology_path, small_gemm):
    res = cli("run", topology_path, small_gemm(), "--json", "--seed", "7")
    assert res.code == 2 and "--seed: seed = 7" in res.err and "'gemm' has none" in res.err


def test_schedule_prints_records(cli, topology_path, gemm_workload_path):
    res = cli("schedule", topology_path, gemm_workload_path, *SMALL, "--max-per-pipe", "3")
    assert res.code == 0 and res.err == ""
    lines = res.out.splitlines()
    assert lines[0].startswith("# {'kind': 'gemm', 'm': 256, 'n': 512, 'k': 1024")
    assert lines[1] == "# gemm_256x512x1024_bf16: core 0"
    for pipe in ("aic.mte2", "aic.mte1", "aic.m", "aic.fix"):
        assert any(line.startswith(f"{pipe} (") and line.endswith(" records)") for line in lines), pipe
    assert "  Copy(path='gm_to_l1', size_bytes=" in res.out
    assert "  Mmad(m=" in res.out and "  Fixpipe(m=" in res.out


def test_schedule_core_out_of_range(cli, topology_path, small_gemm):
    res = cli("schedule", topology_path, small_gemm(m=16, n=16, k=64), "--core", "5")
    assert res.code == 2
    assert res.err.strip() == "simnode: error: --core: core = 5: expected 0..0."


@pytest.mark.parametrize("command", ["run", "schedule"])
def test_impossible_schedule_names_buffer_capacity_and_demand(command, cli, topology_path,
                                                              gemm_workload_path):
    # 512 x 512 fp32 accumulators in two halves: 1 MiB against a 256 KiB L0C
    res = cli(command, topology_path, gemm_workload_path, "--set", "m=512", "--set", "n=512",
              "--set", "k=256", "--set", "block_m=512", "--set", "block_n=512")
    assert res.code == 2 and res.out == ""
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"simnode: error: {gemm_workload_path} (with --set overrides): "
        "schedule 'gemm_512x512x256_bf16'")
    assert "L0C of aic overflows" in lines[0]
    assert "demand 1048576 B" in lines[0] and "capacity 262144 B (256 KiB)" in lines[0]
    assert "Traceback" not in res.err


def test_l1_overflow_through_cli(cli, topology_path, gemm_workload_path):
    res = cli("run", topology_path, gemm_workload_path, "--set", "m=256", "--set", "n=256",
              "--set", "k=4096", "--set", "block_m=128", "--set", "block_n=128", "--set", "block_k=2048")
    assert res.code == 2
    assert "L1 of aic overflows: demand 2097152 B" in res.err and "capacity 524288 B" in res.err


def test_usage_errors_exit_2(cli, topology_path):
    assert cli().code == 2
    assert cli("run", topology_path).code == 2
    assert cli("fly").code == 2


# -- deadlock through the CLI: reported, never a hang --------------------------------------

@contextmanager
def _time_limit(seconds: int):
    def expire(_signum, _frame):
        raise TimeoutError(f"no answer within {seconds} s: the run hangs")
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _stuck_run(topology, params, options=None, name="stuck"):
    prog = CoreProgram(0, {("aic", "mte1"): [isa.Copy("l1_to_l0", 4096), isa.SetFlag("mte1", "m", 1)],
                           ("aic", "m"): [isa.WaitFlag("mte1", "m", 1), isa.WaitFlag("mte1", "m", 1)],
                           ("aiv0", "v"): [isa.CrossWait("aic", 2)]})
    run_schedule(topology, KernelSchedule("stuck-probe", [prog]), options)


@pytest.fixture
def stuck_kind(monkeypatch, write_yaml):
    registry.all_kinds()                                   # register the built-in kinds first
    monkeypatch.setitem(registry._KINDS, "stuck_probe",
                        registry.WorkloadKind("stuck_probe", (), _stuck_run, "test-only deadlock"))
    return write_yaml({"kind": "stuck_probe"}, "stuck.yaml")


def test_cli_deadlock_is_reported_not_hung(cli, topology_path, stuck_kind, tmp_path):
    trace = tmp_path / "stuck.json"
    with _time_limit(30):
        res = cli("run", topology_path, stuck_kind, "--trace", trace)
    assert res.code == 2 and res.out == ""
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.err
    msg = lines[0]
    assert msg.startswith(f"simnode: error: {stuck_kind}: 'stuck-probe' deadlocked at t = ")
    assert "2 waiting pipe(s)" in msg
    assert "core00.aic.m waits on flag mte1->m event 1" in msg
    assert "core00.aiv0.v waits on cross-core flag 2 (aic -> aiv0)" in msg
    # the trace of a failed run is still closed and loadable
    assert json.loads(trace.read_text())["displayTimeUnit"] == "ns"


def test_missing_workload_file(cli, topology_path, tmp_path):
    res = cli("run", topology_path, tmp_path / "nope.yaml")
    assert res.code == 2
    assert res.err.strip() == (f"simnode: error: {tmp_path / 'nope.yaml'}: (top level) = "
                               f"'{tmp_path / 'nope.yaml'}': expected an existing YAML file.")


def test_trace_into_missing_folder_is_a_user_error(cli, topology_path, small_gemm, tmp_path):
    target = tmp_path / "no" / "such" / "t.json"
    res = cli("run", topology_path, small_gemm(m=16, n=16, k=64), "--trace", target)
    assert res.code == 2 and res.out == ""
    assert res.err.strip() == (f"simnode: error: --trace: trace = '{target}': expected a file in "
                               f"an existing folder ({target.parent} is not one).")


def test_a_mistyped_set_key_lists_the_kinds_optional_fields_too(cli, topology_path, repo_root,
                                                                 user_error):
    # batch is a decode field the prefill file leaves at its default: still settable, so listed
    res = cli("run", topology_path, repo_root / "workloads" / "sparse-mla-prefill.yaml",
              "--set", "btch=64")
    user_error(res, "btch = 64", "valid keys here:", "batch, ", "topk_extra", "Did you mean 'batch'?",
               nothing_ran=True)


def test_an_impossible_topk_schedule_names_the_workload_file(cli, topology_path, repo_root,
                                                             user_error):
    wl = repo_root / "workloads" / "topk-indexer.yaml"
    user_error(cli("run", topology_path, wl, "--set", "stages=1"),
               f"{wl} (with --set overrides): topk: stages = 1", "expected 2..8", nothing_ran=True)


def test_bottleneck_row_gives_its_busy_share_and_flags_an_unsaturated_run(cli, topology_path, repo_root,
                                                                          gemm_workload_path):
    """A saturated run (a 2048 x 2048 x 4096 GEMM: cube ~96%) prints its share only; a run whose
    busiest resource stays below 80% (one vector core per cube: the single AIV waits on its
    gathers) says that dependencies and latencies set the time."""
    def row(*args):
        res = cli("run", topology_path, *args)
        assert res.code == 0, res.err
        return dict(line.split(None, 1) for line in res.out.splitlines() if line.strip())["bottleneck"]

    saturated = row(gemm_workload_path, "--set", "m=2048", "--set", "n=2048", "--set", "k=4096")
    assert "% busy" in saturated and "dependencies" not in saturated
    sparse = row(repo_root / "workloads" / "sparse-mla-prefill.yaml", "--set", "n_q=128",
                 "--set", "vector_cores_per_cube=1")
    share = float(sparse.split(", ")[1].split("%")[0])
    assert share < 80 and "dependencies and latencies set the time" in sparse
    d = _json(cli("run", topology_path, repo_root / "workloads" / "sparse-mla-prefill.yaml", "--json",
                  "--set", "n_q=128", "--set", "vector_cores_per_cube=1"))
    assert d["bottleneck_util_frac"] == pytest.approx(share / 100, abs=6e-4)
    assert d["bottleneck_util_frac"] == pytest.approx(max(d["pipe_busy_frac"].values()), abs=1e-6)


def test_schedule_into_a_closed_pipe_is_quiet(topology_path, gemm_workload_path):
    """`simnode schedule ... | head -1`: the reader leaves early; no traceback, exit 0."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "simnode.cli", "schedule", str(topology_path),
         str(gemm_workload_path), "--max-per-pipe", "100000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()                 # what `head -1` does after its line
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_a_named_command_builds_only_its_own_parser():
    """``simnode run ...`` registers (and imports) the run command alone; no command, or a name
    that is no command, gets every command, so the usage error lists them all."""
    from simnode.cli import build_parser
    from simnode.commands import command_modules

    def choices(argv):
        sub = next(a for a in build_parser(argv)._actions if a.dest == "command")
        return sorted(sub.choices)
    every = sorted(m.__name__.rsplit(".", 1)[1] for m in command_modules())
    assert choices(["run", "x.yaml"]) == ["run"]
    assert choices(["regress"]) == ["regress"]
    assert choices([]) == choices(["--help"]) == choices(["rnu"]) == choices(["executor"]) == every
    assert len(every) >= 8
