"""The lock-step reduced form (the sparse MLA field ``lockstep_groups``: one representative core
per group, ``simnode.hardware.lockstep``) against the detailed form (``lockstep_groups=0``) on
the sparse MLA prefill, and the experiments that show why the detailed cores drift apart.

    python benchmarks/bench_lockstep_prefill.py [--nq 128 512 4096] [--groups 1 8 16] [--mechanism]

For each n_q: the detailed run (every core) and the reduced runs with ``k`` groups: makespan,
its error, whether L2/HBM bytes and hits/misses match, the spread of the cores' finish times
and the simulation's CPU time (the schedule is built once, outside the timing). With
``--mechanism`` (n_q 512): the same with every KV region in L2 before the start (the detailed
cores then stay in exact lock step and one group reproduces them), the warm detailed run with
the cores' starts spread over 0-500 ns (the offsets grow, and the makespan falls), and core 0's
lag behind the detailed run when it runs in one group, item by item (its first O -> GM copy).
Not a test: nothing is asserted (tests/hardware/test_lockstep.py is).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simnode.hardware import chip as chipmod  # noqa: E402
from simnode.hardware.chip import ChipSim  # noqa: E402
from simnode.kernels.sparse_mla import SparseMlaParams, sparse_mla_schedule  # noqa: E402
from simnode.workloads.loader import load_inputs  # noqa: E402


class _Probe(ChipSim):
    """ChipSim that logs core 0's first O -> GM copy of each item (AIV 0) and can delay each
    core's start by ``offset_ns`` x (a fixed permutation of the cores) / 31."""

    def __init__(self, *a, offset_ns: float = 0.0, **k):
        super().__init__(*a, **k)
        self.offset_ns = offset_ns
        self.item_out: list = []

    def _compile(self, p, *a):
        ops = super()._compile(p, *a)
        off = self.offset_ns * ((p.core * 7919) % 32) / 31
        return [(chipmod._TIME, off, 0.0)] + ops if off else ops

    def _issue(self, p, ops, i):
        ins = ops[i][1]
        if p.core == 0 and p.unit == "aiv0" and ins.label == "O -> GM" and ins.gm_key[3] == 0:
            self.item_out.append(self.env.now)
        return super()._issue(p, ops, i)


def _schedule(n_q: int, k: int = 0):
    """(chip, schedule) of the prefill at ``n_q`` in ``k`` lock-step groups (0: every core)."""
    spec = load_inputs(ROOT / "topologies" / "ascend950dt.yaml",
                       ROOT / "workloads" / "sparse-mla-prefill.yaml",
                       [f"n_q={n_q}", f"lockstep_groups={k}"])
    chip = spec.topology.chip
    return chip, sparse_mla_schedule(chip, SparseMlaParams(**spec.params))


def _run(chip, sched, warm: bool = False, offset_ns: float = 0.0):
    """(ChipRun, CPU s, probe) of ``sched`` (its lock-step groups, if any, as one core each)."""
    sim = _Probe(chip, offset_ns=offset_ns)
    if warm:
        for prog in sched.cores:
            for instrs in prog.pipes.values():
                for ins in instrs:
                    for key in getattr(ins, "regions", None) or ():
                        sim.l2.write(key, ins.size_bytes // len(ins.regions))
    t0 = time.process_time()
    run = sim.run(sched)
    return run, time.process_time() - t0, sim


def _spread(run) -> float:
    fin: dict = {}
    for (core, _u, _p), st in run.pipe_stats.items():
        fin[core] = max(fin.get(core, 0.0), st.finish_ns)
    return max(fin.values()) - min(fin.values())


def _line(label, run, cpu, ref=None) -> str:
    s = (f"  {label:22s} {run.makespan_ns:12.1f} ns  spread {_spread(run):7.1f} ns  "
         f"l2 {run.l2_bytes:.0f} B  hbm {run.hbm_bytes:.0f} B  sim {cpu:5.1f} s CPU")
    if ref is not None:
        same = (round(run.l2_bytes) == round(ref.l2_bytes) and round(run.hbm_bytes) == round(ref.hbm_bytes)
                and (run.l2_hits, run.l2_misses) == (ref.l2_hits, ref.l2_misses))
        s += f"  {100 * (run.makespan_ns / ref.makespan_ns - 1):+.3f}%  traffic {'same' if same else 'DIFFERS'}"
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nq", type=int, nargs="*", default=[128, 512])
    ap.add_argument("--groups", type=int, nargs="*", default=[1, 8, 16])
    ap.add_argument("--mechanism", action="store_true")
    args = ap.parse_args()
    for n_q in args.nq:
        chip, _ = _schedule(n_q)
        print(f"n_q {n_q}:")
        ref, cpu, _ = _run(chip, _schedule(n_q)[1])
        print(_line("detailed", ref, cpu))
        for k in args.groups:
            run, cpu, _ = _run(chip, _schedule(n_q, k)[1])
            print(_line(f"{k} groups", run, cpu, ref))
    if args.mechanism:
        chip, _ = _schedule(512)
        print("n_q 512, every KV region in L2 at the start:")
        ref, cpu, _ = _run(chip, _schedule(512)[1], warm=True)
        print(_line("detailed", ref, cpu))
        for k in (1, 8):
            run, cpu, _ = _run(chip, _schedule(512, k)[1], warm=True)
            print(_line(f"{k} groups", run, cpu, ref))
        for off in (50, 200, 500):
            run, cpu, _ = _run(chip, _schedule(512)[1], warm=True, offset_ns=off)
            print(_line(f"starts over {off} ns", run, cpu, ref))
        print("n_q 512, core 0's lag in one group behind the detailed run, at each item's first "
              "O -> GM copy (ns):")
        _, _, a = _run(chip, _schedule(512)[1])
        _, _, b = _run(chip, _schedule(512, 1)[1])
        print("  " + " ".join(f"{y - x:5.0f}" for x, y in zip(a.item_out, b.item_out)))


if __name__ == "__main__":
    main()
