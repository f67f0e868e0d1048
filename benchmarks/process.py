"""Whole-process timing: run a command several times as a user would, report the median.

``measure(argv, runs=3) -> Measurement`` runs ``argv`` (a fresh Python process each time,
imports included) and records each run's wall time, CPU time (user + sys of the whole
process tree) and peak memory; ``Measurement`` gives the median wall time and the largest
peak. Peak memory is that of the whole process tree: ``simnode run`` may fork a part of
the run (DeepEP's combine beside dispatch, ``--jobs``), so the tree's proportional set size
(PSS: a page shared by n processes counts 1/n in each, so the sum counts it once) is
summed over the processes, and the peak is the larger of the largest sum and the largest
single process's max RSS (``os.wait4``). Reading PSS (``smaps_rollup``) walks a process's
page tables, which at EP1024 (~1.8 GB) cost ~4 s of CPU at 10 Hz and slowed the run it
measured; so the tree is sampled every ``SAMPLE_S`` by its resident sizes (``statm``, kept
as counters by the kernel: no walk), and PSS is read only when that sample could set a new
peak (a process's PSS never exceeds its RSS, so a sample whose summed RSS is at most the
peak so far cannot raise it), and, as a read of a larger tree costs more (~40 ms of system
time at EP2048's ~3 GB), no sooner than ``PSS_COST_RATIO`` times the CPU time the last read
took: the reader spends at most ~5% of a core, and only while the tree grows (a small tree
is still read at every sample). A peak shorter than that interval can only be missed by
the rise within it (EP1024: within 2% of the peak that reading PSS at 10 Hz reports).

The speed targets are declared in ``ROWS``, one ``Row`` each; ``bench_targets.py`` measures
them (docs/benchmarks.md has the table and how to read it).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIMNODE = [sys.executable, "-m", "simnode"]
SAMPLE_S = 0.1                    #: how often the process tree's resident size is sampled
PSS_COST_RATIO = 20.0             #: least time between two PSS reads / the last read's CPU time
_PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass(frozen=True)
class Row:
    name: str
    argv: tuple                   #: the command after ``python -m``
    target_s: float               #: median wall time target (2-core machine; inf: time stated only)
    target_MiB: float = 0.0       #: peak memory target (0: none)
    on_demand: bool = False       #: measured only when named (``--only``): a run of minutes


ROWS = {
    "deepep-ep128": Row("deepep-ep128", ("simnode", "run", "topologies/atlas950-supernode.yaml",
                                         "workloads/deepep-normal.yaml", "--set", "num_ranks=128",
                                         "--json"), 2.5),
    # what a user runs: dispatch and combine, the latter forked beside the former
    "deepep-ep1024": Row("deepep-ep1024", ("simnode", "run", "topologies/atlas950-supernode.yaml",
                                           "workloads/deepep-normal.yaml", "--set", "num_ranks=1024",
                                           "--set", "num_experts=1024", "--json"), 60.0, 2048.0),
    "alltoall-ep128": Row("alltoall-ep128", ("simnode", "run", "topologies/atlas950-supernode.yaml",
                                             "workloads/transport-alltoall.yaml", "--set",
                                             "num_ranks=128", "--set", "bytes_per_peer=4736000",
                                             "--set", "topology.supernode.urma_payload_GBps=0",
                                             "--json"), 0.4),
    "gemm": Row("gemm", ("simnode", "run", "topologies/ascend950dt.yaml",
                         "workloads/gemm-bf16-4096x7168x16384.yaml", "--json"), 1.5),
    "sparse-mla-prefill": Row("sparse-mla-prefill", ("simnode", "run", "topologies/ascend950dt.yaml",
                                                     "workloads/sparse-mla-prefill.yaml", "--json"),
                              10.0),
    # 2048 ranks on a Clos of 256-port spines, one expert per rank, 8192 tokens per rank (the
    # deepep kind's 2^24-token limit over 2048 ranks): 4.19 M communicating pairs, each a flow
    # in dispatch and in combine; it must fit the 4 GiB a run may use, its time is stated
    "deepep-ep2048": Row("deepep-ep2048", ("simnode", "run", "topologies/atlas950-supernode.yaml",
                                           "workloads/deepep-normal.yaml", "--set", "num_ranks=2048",
                                           "--set", "num_experts=2048", "--set", "tokens_per_rank=8192",
                                           "--set", "topology.supernode.spine_radix=256", "--json"),
                         float("inf"), 4096.0, on_demand=True),
}

#: the low-latency (decode) kernels: dispatch + combine at EP256, 128 tokens per rank
ROWS["deepep-ll-ep256"] = Row("deepep-ll-ep256", (
    "simnode", "run", "topologies/atlas950-supernode.yaml", "workloads/deepep-ll.yaml",
    "--set", "num_ranks=256", "--json"), 2.0)

#: the MoE layer: its slowest overlap mode, fused, at the layer's full size
for _ep, _target in ((8, 10.0), (128, 60.0)):
    ROWS[f"moe-layer-ep{_ep}"] = Row(f"moe-layer-ep{_ep}", (
        "simnode", "run", "topologies/atlas950-supernode.yaml", "workloads/moe-layer.yaml",
        "--set", f"num_ranks={_ep}", "--set", "overlap=fused", "--json"), _target)
#: the decode MoE layer (issue 33): V4-Flash's, low-latency kernels, at EP128
ROWS["moe-layer-decode-ep128"] = Row("moe-layer-decode-ep128", (
    "simnode", "run", "topologies/atlas950-supernode.yaml", "workloads/moe-layer-decode-v4-flash.yaml",
    "--set", "num_ranks=128", "--json"), 5.0)

#: one decode step: V4-Flash on 16 chips at global batch 256 with MTP3, V4-Pro on 64
ROWS["decode-step-flash16"] = Row("decode-step-flash16", (
    "simnode", "run", "topologies/atlas950-supernode.yaml", "workloads/v4-flash-decode.yaml",
    "--set", "global_batch=256", "--json"), 10.0)
ROWS["decode-step-pro64"] = Row("decode-step-pro64", (
    "simnode", "run", "topologies/atlas950-supernode.yaml", "workloads/v4-pro-decode.yaml",
    "--json"), 60.0)


@dataclass(frozen=True)
class Measurement:
    wall_s: tuple                 #: per run
    peak_MiB: tuple               #: per run

    @property
    def median_s(self) -> float:
        return statistics.median(self.wall_s)

    @property
    def max_MiB(self) -> float:
        return max(self.peak_MiB)


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux /proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(x) for x in f.read().split()]
        except OSError:                       # gone meanwhile
            pass
    return out


def _pss_kib(pid: int) -> int:
    """Proportional set size of one process in KiB (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _rss_kib(pid: int) -> int:
    """Resident set size of one process in KiB (0 if it is gone): ``statm``, which the
    kernel keeps as counters (cheap, unlike ``smaps_rollup``)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE_KIB
    except (OSError, IndexError, ValueError):
        return 0


class TreeSampler(threading.Thread):
    """Samples the summed PSS of a process tree until ``stop()``; ``peak_MiB`` afterwards.
    ``cost_ratio``: least time between PSS reads as a multiple of the last read's CPU time
    (0: at every sample that could set a peak); ``bounded=False``: read PSS at every sample (the former 10 Hz sampler, for
    comparison). ``reads``: how many times the tree's PSS was read."""

    def __init__(self, pid: int, cost_ratio: float = PSS_COST_RATIO, bounded: bool = True):
        super().__init__(daemon=True)
        self.pid, self.peak_kib, self.most = pid, 0, 1
        self.cost_ratio, self.bounded, self.reads = cost_ratio, bounded, 0
        self._done = threading.Event()

    def run(self) -> None:
        next_read = -float("inf")
        while not self._done.wait(SAMPLE_S):
            pids = _tree(self.pid)
            self.most = max(self.most, len(pids))
            if self.bounded:
                # PSS <= RSS per process: a sample that cannot pass the peak is not read
                if sum(_rss_kib(p) for p in pids) <= self.peak_kib:
                    continue
                if time.monotonic() < next_read:
                    continue
            self.reads += 1
            t0, c0 = time.monotonic(), time.thread_time()
            self.peak_kib = max(self.peak_kib, sum(_pss_kib(p) for p in pids))
            next_read = t0 + self.cost_ratio * (time.thread_time() - c0)

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak_kib / 1024


def run_tree(cmd, cwd=ROOT, sampler: str = "bounded") -> dict:
    """Run ``cmd`` (a full argv) as a user would; its wall and CPU time (user + sys of the
    process and every descendant it waited for), peak memory of the tree (see the module
    docstring), the most processes seen at once, and its stdout. ``sampler``: "bounded"
    (the default, see the module docstring), "10hz" (PSS read at every sample) or "none"
    (no sampling: the peak is the largest single process's max RSS)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sampler = TreeSampler(proc.pid, bounded=sampler != "10hz") if sampler != "none" else None
    if sampler is not None:
        sampler.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    pss = sampler.stop() if sampler is not None else 0.0
    err = proc.stderr.read().decode(errors="replace")
    proc.stdout.close()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{err}")
    one = usage.ru_maxrss / 1024                              # Linux reports KiB
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_MiB": max(pss, one),
            "pss_sum_MiB": pss, "max_rss_one_MiB": one,
            "processes": sampler.most if sampler is not None else 0,
            "pss_reads": sampler.reads if sampler is not None else 0,
            "stdout": out.decode()}


def run_once(argv) -> tuple[float, float]:
    """(wall s, peak MiB of the process tree) of one child process running ``python -m argv...``."""
    got = run_tree([sys.executable, "-m", *argv])
    return got["wall_s"], got["peak_MiB"]


def measure(argv, runs: int = 3) -> Measurement:
    got = [run_once(argv) for _ in range(runs)]
    return Measurement(tuple(w for w, _ in got), tuple(m for _, m in got))


def report(row: Row, m: Measurement) -> str:
    ok = m.median_s <= row.target_s and (not row.target_MiB or m.max_MiB <= row.target_MiB)
    target = ("time stated" if row.target_s == float("inf") else f"<= {row.target_s:g} s") + (
        f", <= {row.target_MiB:g} MiB" if row.target_MiB else "")
    runs = ", ".join(f"{w:.2f}" for w in m.wall_s)
    return (f"{row.name:<20} median {m.median_s:7.2f} s  peak {m.max_MiB:7.0f} MiB  "
            f"(runs {runs})  target {target}: {'met' if ok else 'MISSED'}")
