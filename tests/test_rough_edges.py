"""Issue 19's first list: what a new user hit, each now a one-line error (exit 2) or an
explicit warning, never a traceback, a hang or a silent accept.

- sizes: every kind refuses, before any work, a run that would not fit the 4 GiB a run may
  use (sparse MLA within 5 s, a tile program while it is traced);
- Ctrl-C: one line, exit 130, workers stopped, no partial output left; SIGTERM (to the
  process alone, as `kill PID` sends it, or to its group) the same, exit 143;
- long runs: announced on stderr, ``--progress`` draws the progress line off a terminal;
- the silent accepts: a trace scope matching no thread, a negative --max-per-pipe, an empty
  --param item, --seed beside --set seed=, an absurd batch window;
- result fields: a figure a kind does not compute is absent (also in results.csv), and the
  result records its seed.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import simnode.tile.builder as tile_builder
from simnode.workloads import registry
from simnode.workloads.loader import load_inputs

REPO = Path(__file__).resolve().parents[1]

TOPK_LIMIT = "at most 8,589,934,592 scores"


@pytest.mark.parametrize("workload, sets, needle", [
    ("sparse-mla-prefill.yaml", ["n_q=100000000"], "pipeline blocks (queries x head blocks x ceil(top-k / b_topk) = 1,000,000,000)"),
    ("sparse-mla-decode.yaml", ["batch=10000000"], "= 400,000,000): one run holds its whole schedule in memory"),
    ("sparse-mla-prefill.yaml", ["heads=1048576", "heads_per_core=64"], "= 671,088,640)"),
    ("sparse-mla-prefill.yaml", ["b_topk=16", "topk=65536"], "at most 200,000 pipeline blocks"),
    ("sparse-mla-prefill.yaml", ["b_topk=2048", "topk=4096", "kv_len=8192"], "at most 12,800,000 selected KV rows"),
])
def test_oversized_sparse_mla_is_refused_within_5_s(cli, user_error, repo_root, topology_path,
                                                     workload, sets, needle):
    start_s = time.monotonic()
    res = cli("run", topology_path, repo_root / "workloads" / workload, *[a for s in sets for a in ("--set", s)])
    assert time.monotonic() - start_s < 5
    user_error(res, f"workloads/{workload} (with --set overrides)", needle, nothing_ran=True)


@pytest.mark.parametrize("workload, sets, needle", [
    ("gemm-bf16-4096x7168x16384.yaml", ["m=1000000", "n=1000000"], "tile steps"),
    ("topk-indexer.yaml", ["rows=1000000", "n=1000000"], TOPK_LIMIT),
    ("swiglu.yaml", ["rows=100000000"], "rows = 100000000: expected at most 1,048,576"),
    ("grouped-gemm.yaml", ["tokens=100000000"], "at most 16,777,216 routed tokens"),
    ("grouped-gemm.yaml", ["tokens=2000000"], "tile steps"),
])
def test_every_chip_kind_has_a_size_limit(cli, user_error, repo_root, topology_path, workload, sets, needle):
    start_s = time.monotonic()
    res = cli("run", topology_path, repo_root / "workloads" / workload, *[a for s in sets for a in ("--set", s)])
    assert time.monotonic() - start_s < 30
    user_error(res, needle, nothing_ran=True)


@pytest.mark.parametrize("workload, sets, needle", [
    ("deepep-normal.yaml", ["num_ranks=128", "tokens_per_rank=1048576"], "at most 16,777,216 tokens over all"),
    ("transport-alltoall.yaml", ["messages_per_peer=2000000000"], "messages_per_peer = 2000000000"),
    ("transport-alltoall.yaml", ["num_ranks=2048", "topology.supernode.spine_radix=4096"],
     "num_ranks = 2048: expected at most 1,047,552 communicating (sender, receiver) pairs"),
    ("deepep-normal.yaml", ["num_ranks=4096", "tokens_per_rank=16", "num_experts=4096",
                            "topology.supernode.spine_radix=4096"], "at most 4,192,256 communicating"),
    ("deepep-normal.yaml", ["num_ranks=2048", "tokens_per_rank=16", "num_experts=2048",
                            "send_order=jetty_fifo", "topology.supernode.spine_radix=4096"],
     "at most 1,047,552 communicating"),
])
def test_supernode_kinds_have_size_limits(cli, user_error, repo_root, workload, sets, needle):
    res = cli("run", repo_root / "topologies" / "atlas950-supernode.yaml", repo_root / "workloads" / workload,
              *[a for s in sets for a in ("--set", s)])
    user_error(res, needle, nothing_ran=True)


def test_a_tile_program_too_large_is_refused_while_traced(cli, user_error, topology_path, tmp_path, monkeypatch):
    (tmp_path / "copy.py").write_text(
        "import simnode.tile.lang as T\n\n\n@T.program\ndef copy(rows: int = 4096):\n"
        "    x = T.tensor('x', (rows, 256), 'fp32')\n"
        "    for core in T.Kernel(T.num_vector_cores(), vector=True):\n"
        "        xt = T.alloc_ub((8, 256), 'fp32')\n"
        "        for t in T.Persistent(rows // 8, T.num_vector_cores(), core, num_stages=2):\n"
        "            T.copy(x[t * 8:(t + 1) * 8], xt)\n")
    (tmp_path / "copy.yaml").write_text("kind: tile\nprogram: copy.py\n")
    monkeypatch.setattr(tile_builder, "MAX_RECORDED_OPS", 100)
    user_error(cli("run", topology_path, tmp_path / "copy.yaml"), f"{tmp_path / 'copy.py'}:10:",
               "the program records more than 100 instructions", nothing_ran=True)


# -- Ctrl-C -----------------------------------------------------------------------------------

def _session_processes(sid: int) -> list[str]:
    """Processes still alive in session ``sid`` (a sweep's workers, were they left behind)."""
    left = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[3]) == sid:
                left.append(d)
    return left


def _interrupt(args: list, wait_for, timeout_s: float = 180, sig=signal.SIGINT,
               group: bool = True) -> subprocess.CompletedProcess:
    """Start ``simnode ARGS`` in its own session, wait until ``wait_for(popen)`` says its
    work has started (a file it writes, its busy workers), then press
    Ctrl-C the way a terminal does (SIGINT to the whole process group), or send ``sig`` to
    the group or (``group=False``: ``kill PID``) to simnode's own process alone."""
    # a child inherits an ignored SIGINT (a suite started in the background by a shell
    # without job control runs with SIGINT ignored), and Python keeps it ignored: simnode
    # starts as a terminal would start it, with SIGINT at its default
    p = subprocess.Popen([sys.executable, "-m", "simnode", *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=REPO,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + timeout_s
    while not wait_for(p) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)                          # polling the signal, not waiting for CPU
    assert p.poll() is None, "the run ended before it could be interrupted"
    assert time.monotonic() < deadline, f"no sign of work after {timeout_s} s"
    if group:
        os.killpg(p.pid, sig)
    else:
        os.kill(p.pid, sig)
    out, err = p.communicate(timeout=120)
    # the workers end with their parent within moments: poll for their exit; one left behind
    # would still be running its point (seconds of work) when this gives up
    deadline = time.monotonic() + 10
    while _session_processes(p.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _session_processes(p.pid) == [], "workers were left running"
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_ctrl_c_in_run_is_one_line_exit_130_and_leaves_no_partial_trace(tmp_path):
    trace = tmp_path / "t.json"
    res = _interrupt(["run", "topologies/ascend950dt.yaml", "workloads/gemm-bf16-4096x7168x16384.yaml",
                      "--trace", trace, "--out", tmp_path / "out"],
                     lambda _: trace.exists() and trace.stat().st_size > 100_000)
    assert (res.returncode, res.stdout, res.stderr) == (130, "", "simnode: interrupted\n")
    assert not trace.exists() and not (tmp_path / "out").exists()


#: the interrupted sweep's work: ``SWEEP_POINTS`` sparse MLA prefill points (two workers) of
#: ``POINT_QUERIES`` queries, ~12 s of one core each (2x the shipped 4096 queries; the size
#: check allows ~4.9x). The tests interrupt as soon as the workers are busy, so a machine 4x
#: faster still has seconds of work left. ``SIMNODE_INTERRUPT_SCALE`` scales it, to check
#: that the tests pass with 4x less work (0.25: queries / 4) and 4x more (4: points x 4)
INTERRUPT_SCALE = float(os.environ.get("SIMNODE_INTERRUPT_SCALE", "1"))
POINT_QUERIES = int(8192 * min(INTERRUPT_SCALE, 1.0))
SWEEP_POINTS = 2 * max(1, round(INTERRUPT_SCALE))
#: CPU seconds each worker has spent once it is inside its run (past its imports, ~0.5 s)
BUSY_CPU_S = 1.0


def _cpu_s(pid: str) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime + stime


def _workers_busy(popen, workers: int = 2) -> bool:
    """Whether ``workers`` processes of the run's session besides its own have each spent
    ``BUSY_CPU_S`` of CPU: their simulations have started, whatever the machine's speed (the
    ``wait_for`` of a sweep or a calibration; no fixed sleep)."""
    cpu = []
    for pid in _session_processes(popen.pid):
        if int(pid) == popen.pid:
            continue
        try:
            cpu.append(_cpu_s(pid))
        except (OSError, IndexError, ValueError):
            continue
    return sum(c >= BUSY_CPU_S for c in cpu) >= workers


def _sweep_args(tmp_path) -> list:
    return ["sweep", "topologies/ascend950dt.yaml", "workloads/sparse-mla-prefill.yaml",
            "--set", f"n_q={POINT_QUERIES}", "--param", "seed=" + ",".join(map(str, range(SWEEP_POINTS))),
            "--jobs", "2",
            "--out", tmp_path / "sweep"]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_ctrl_c_in_sweep_stops_the_workers(tmp_path):
    res = _interrupt(_sweep_args(tmp_path), _workers_busy)
    assert (res.returncode, res.stdout, res.stderr) == (130, "", "simnode: interrupted\n")
    assert list(tmp_path.iterdir()) == []                                  # no folder, no staging


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("group", [False, True], ids=["kill-pid", "kill-group"])
def test_sigterm_in_sweep_is_one_line_exit_143_and_stops_the_workers(tmp_path, group):
    res = _interrupt(_sweep_args(tmp_path), _workers_busy, sig=signal.SIGTERM, group=group)
    assert (res.returncode, res.stdout, res.stderr) == (143, "", "simnode: terminated\n")
    assert list(tmp_path.iterdir()) == []                                  # no folder, no staging


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigterm_in_calibrate_stops_the_workers_and_writes_no_overlay(tmp_path):
    # kill PID, as a batch system or `timeout` stops a job: the parent alone gets SIGTERM, and
    # its two workers (one per sparse MLA prefill case, at POINT_QUERIES queries; the fit
    # runs them again and again) must not outlive it
    out = tmp_path / "fit.yaml"
    res = _interrupt(["calibrate", "topologies/ascend950dt.yaml", "validation/published.yaml",
                      "--only", "sparse-mla-prefill-kv4096", "--only", "sparse-mla-prefill-kv8192",
                      "--set", f"n_q={POINT_QUERIES}",
                      "--fit", "topology.chip.vector.ops_per_cycle.vf_alu=32:128", "--jobs", "2",
                      "-o", out], _workers_busy, sig=signal.SIGTERM, group=False)
    assert (res.returncode, res.stdout, res.stderr) == (143, "", "simnode: terminated\n")
    assert list(tmp_path.iterdir()) == []


# -- long runs --------------------------------------------------------------------------------

def test_a_run_far_above_its_kinds_reference_is_announced(repo_root, topology_path):
    spec = load_inputs(repo_root / "topologies" / "atlas950-supernode.yaml",
                       repo_root / "workloads" / "deepep-normal.yaml", ["num_ranks=1024", "num_experts=1024"])
    assert spec.cost_note() == (
        "this run is estimated at ~87x the work of DeepEP at EP8 (16384 tokens per rank) (~1.1 s of one "
        "core): expect ~96 s; --progress draws its progress line even off a terminal")
    # 37x the published GEMM's tile steps, but ~30 s: far above, not long, so no note
    gemm = repo_root / "workloads" / "gemm-bf16-4096x7168x16384.yaml"
    assert load_inputs(topology_path, gemm, ["block_m=7"]).cost_note() is None
    assert load_inputs(topology_path, gemm).cost_note() is None


def test_a_deepep_note_expects_the_two_process_wall_time(repo_root):
    spec = load_inputs(repo_root / "topologies" / "atlas950-supernode.yaml",
                       repo_root / "workloads" / "deepep-normal.yaml",
                       ["num_ranks=1024", "num_experts=1024"])
    one, two = spec.cost_note(1), spec.cost_note(2)
    assert "expect ~96 s;" in one and "two processes" not in one
    assert "expect ~67 s in two processes;" in two      # 0.7 of the one-core estimate
    big = load_inputs(repo_root / "topologies" / "atlas950-supernode.yaml",
                      repo_root / "workloads" / "deepep-normal.yaml",
                      ["num_ranks=2048", "num_experts=2048", "tokens_per_rank=8192",
                       "topology.supernode.spine_radix=256"])
    assert "two processes" not in big.cost_note(2)       # EP2048 stays in one process
    assert "expect ~8 minutes;" in big.cost_note(2)


def test_a_deepep_note_counts_only_the_phase_that_runs(repo_root):
    # routing and the plan are paid whatever the phase; combine is ~0.7 of the flows' cost
    def note(phase):
        return load_inputs(repo_root / "topologies" / "atlas950-supernode.yaml",
                           repo_root / "workloads" / "deepep-normal.yaml",
                           ["num_ranks=2048", "num_experts=2048", "tokens_per_rank=8192",
                            "topology.supernode.spine_radix=256", f"phase={phase}"]).cost_note(2)
    assert "expect ~6 minutes;" in note("combine")
    assert "expect ~3 minutes;" in note("dispatch")


def test_the_announcement_is_one_line_on_stderr_before_the_run(cli, small_gemm, topology_path, monkeypatch):
    monkeypatch.setattr(registry, "LONG_RUN_FACTOR", 0.0)
    monkeypatch.setattr(registry, "LONG_RUN_S", 0.0)
    res = cli("run", topology_path, small_gemm(), "--json")
    assert res.code == 0 and json.loads(res.out)["kind"] == "gemm"
    assert res.err.startswith("simnode: note: this run is estimated at ~0x the work of") and res.err.count("\n") == 1
    sweep = cli("sweep", topology_path, small_gemm(), "--param", "m=256,512", "--jobs", "1")
    assert sweep.err.startswith("simnode: note: 2 of 2 points are long; the longest (m=512): this run is")


def test_progress_forces_the_progress_line_off_a_terminal(cli, small_gemm, topology_path):
    quiet = cli("run", topology_path, small_gemm())
    assert quiet.code == 0 and quiet.err == ""
    shown = cli("run", topology_path, small_gemm(), "--progress")
    assert shown.code == 0 and "gemm-small, simulated/bound us [" in shown.err
    assert shown.out == quiet.out
    sweep = cli("sweep", topology_path, small_gemm(), "--param", "m=256,512", "--jobs", "1", "--progress")
    assert sweep.code == 0 and "\rsweep (local) [" in sweep.err and "2/2" in sweep.err


# -- the silent accepts -------------------------------------------------------------------------

def test_a_trace_scope_that_matches_no_thread_is_an_error(cli, user_error, small_gemm, topology_path, tmp_path):
    trace = tmp_path / "t.json"
    res = cli("run", topology_path, small_gemm(), "--trace", trace, "--trace-scope", "cores00.*")
    user_error(res, "--trace-scope: trace-scope = 'cores00.*': expected a pattern matching a thread of this run",
               f"{trace} would hold no spans and was removed")
    assert not trace.exists()
    ok = cli("run", topology_path, small_gemm(), "--trace", trace, "--trace-scope", "core00.*")
    assert ok.code == 0 and ok.err == "" and trace.exists()


def test_a_negative_max_per_pipe_is_a_usage_error(cli, small_gemm, topology_path):
    res = cli("schedule", topology_path, small_gemm(), "--max-per-pipe", "-5")
    assert res.code == 2 and res.out == "" and res.err == (
        "simnode: error: simnode schedule: argument --max-per-pipe: '-5': expected an integer >= 0 "
        "(see `simnode schedule --help`)\n")


def test_an_empty_param_item_is_an_error(cli, user_error, repo_root):
    res = cli("sweep", repo_root / "topologies" / "atlas950-supernode.yaml", repo_root / "workloads" / "deepep-normal.yaml",
              "--param", "num_ranks=8,,16")
    user_error(res, "--param: num_ranks = '8,,16': expected a comma-separated list without empty items "
                    "(item 2 of 3 is empty)", nothing_ran=True)


def test_seed_beside_set_seed_is_an_error(cli, user_error, repo_root):
    res = cli("run", repo_root / "topologies" / "atlas950-supernode.yaml", repo_root / "workloads" / "deepep-normal.yaml",
              "--seed", "2", "--set", "seed=1")
    user_error(res, "--seed: seed = 2: expected either --seed or --set seed=, not both (--set seed=1 is given too, "
                    "and one would silently win)", nothing_ran=True)


def test_an_absurd_batch_window_is_an_error(cli, user_error, repo_root):
    res = cli("run", repo_root / "topologies" / "atlas950-supernode.yaml", repo_root / "workloads" / "deepep-normal.yaml",
              "--set", "batch_window_ns=1e12")
    user_error(res, "batch_window_ns = 1000000000000.0: expected a number <= 100000.0", nothing_ran=True)


# -- result fields ----------------------------------------------------------------------------

NOT_COMPUTED = ("flops", "tflops", "pipe_busy_frac", "l2_bytes", "l2_GBps", "l2_util_frac", "hbm_bytes", "hbm_GBps")


@pytest.mark.parametrize("workload, sets", [("deepep-normal.yaml", ["tokens_per_rank=256"]),
                                            ("transport-alltoall.yaml", ["bytes_per_peer=65536"])])
def test_figures_a_kind_does_not_compute_are_absent(cli, repo_root, tmp_path, workload, sets):
    args = [repo_root / "topologies" / "atlas950-supernode.yaml", repo_root / "workloads" / workload,
            *[a for s in sets for a in ("--set", s)]]
    d = json.loads(cli("run", *args, "--json").out)
    assert not set(NOT_COMPUTED) & set(d) and 0 < d["hbm_util_frac"] < 1
    res = cli("sweep", *args, "--param", "num_ranks=4,8", "--jobs", "1", "--out", tmp_path / "s")
    assert res.code == 0, res.err
    with open(tmp_path / "s" / "results.csv", newline="") as f:
        header = next(csv.reader(f))
    assert not set(NOT_COMPUTED) & set(header) and "hbm_util_frac" in header


def test_json_records_the_seed_it_ran_with(cli, repo_root):
    args = [repo_root / "topologies" / "atlas950-supernode.yaml", repo_root / "workloads" / "deepep-normal.yaml",
            "--set", "tokens_per_rank=256", "--json"]
    assert json.loads(cli("run", *args).out)["seed"] == 0
    assert json.loads(cli("run", *args, "--seed", "3").out)["seed"] == 3
