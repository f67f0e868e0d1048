"""The lock-step reduced form (the sparse MLA field ``lockstep_groups``: one representative core
per group, ``simnode.hardware.lockstep``) against the detailed form (``lockstep_groups=0``) on
the sparse MLA prefill.

    python benchmarks/bench_lockstep_prefill.py [--nq 128 512 4096] [--groups 1 8 16] [--warm]

For each n_q: the detailed run (every core) and the reduced runs with ``k`` groups: makespan,
its error, whether L2/HBM bytes and hits/misses match, the spread of the cores' finish times
and the simulation's CPU time (the schedule is built once, outside the timing). With
``--warm``, every KV region is in L2 before the start: the detailed cores then stay in exact
lock step and one group reproduces them, which shows that the cold misses are what drives the
detailed cores apart.
Not a test: nothing is asserted (tests/hardware/test_lockstep.py is).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simnode.hardware.chip import ChipSim  # noqa: E402
from simnode.kernels.sparse_mla import SparseMlaParams, sparse_mla_schedule  # noqa: E402
from simnode.workloads.loader import load_inputs  # noqa: E402


def _schedule(n_q: int, k: int = 0):
    """(chip, schedule) of the prefill at ``n_q`` in ``k`` lock-step groups (0: every core)."""
    spec = load_inputs(ROOT / "topologies" / "ascend950dt.yaml",
                       ROOT / "workloads" / "sparse-mla-prefill.yaml",
                       [f"n_q={n_q}", f"lockstep_groups={k}"])
    chip = spec.topology.chip
    return chip, sparse_mla_schedule(chip, SparseMlaParams(**spec.params))


def _run(chip, sched, warm: bool = False):
    """(ChipRun, CPU s) of ``sched`` (its lock-step groups, if any, as one core each)."""
    sim = ChipSim(chip)
    if warm:
        for prog in sched.cores:
            for instrs in prog.pipes.values():
                for ins in instrs:
                    for key in getattr(ins, "regions", None) or ():
                        sim.l2.write(key, ins.size_bytes // len(ins.regions))
    t0 = time.process_time()
    run = sim.run(sched)
    return run, time.process_time() - t0


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
    ap.add_argument("--warm", action="store_true", help="every KV region in L2 at the start")
    args = ap.parse_args()
    for n_q in args.nq:
        chip, sched = _schedule(n_q)
        print(f"n_q {n_q}{', every KV region in L2 at the start' if args.warm else ''}:")
        ref, cpu = _run(chip, sched, args.warm)
        print(_line("detailed", ref, cpu))
        for k in args.groups:
            run, cpu = _run(chip, _schedule(n_q, k)[1], args.warm)
            print(_line(f"{k} groups", run, cpu, ref))


if __name__ == "__main__":
    main()
