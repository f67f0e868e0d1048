"""Speed benchmark: the sparse MLA prefill (n_q 4096, kv_len 8192) on the 950DT.

Run ``python benchmarks/bench_sparse_mla.py [--n-q N] [--kv-len L]``. Prints the
wall and CPU time of schedule generation, of the launch (the schedule check and the
pipes' compiled programs) and of the simulation, the SimPy
events and instructions per second, the modeled TFLOPS and the peak resident memory.
Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import simpy

from simnode.config.topology import load_topology_raw, topology_from_mapping
from simnode.engine.clock import events_scheduled
from simnode.hardware.chip import ChipSim
from simnode.kernels.sparse_mla import SparseMlaParams, sparse_mla_schedule
from simnode.units import tflops

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-q", type=int, default=4096)
    ap.add_argument("--kv-len", type=int, default=8192)
    ap.add_argument("--detailed", action="store_true",
                    help="every GM read its own transfer (ChipSim gm_bursts=False), for comparison")
    args = ap.parse_args()
    topo_path = ROOT / "topologies" / "ascend950dt.yaml"
    topo = topology_from_mapping(load_topology_raw(topo_path), str(topo_path))
    t0, c0 = time.perf_counter(), time.process_time()
    sched = sparse_mla_schedule(topo.chip, SparseMlaParams(n_q=args.n_q, kv_len=args.kv_len))
    t1, c1 = time.perf_counter(), time.process_time()
    env = simpy.Environment()
    sim = ChipSim(topo.chip, env, gm_bursts=not args.detailed)
    started = []                    # when the launch is done and the simulation starts
    env_run = env.run
    env.run = lambda *a, **k: (started.append((time.perf_counter(), time.process_time())),
                               env_run(*a, **k))[1]
    run = sim.run(sched)
    t2, c2 = time.perf_counter(), time.process_time()
    (tl, cl), = started
    events = events_scheduled(env)
    instrs = sched.num_instructions()
    peak_MiB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"sparse MLA prefill n_q={args.n_q} kv_len={args.kv_len}")
    print(f"  generate           {t1 - t0:8.2f} s wall {c1 - c0:8.2f} s CPU  ({instrs} instructions)")
    print(f"  check + compile    {tl - t1:8.2f} s wall {cl - c1:8.2f} s CPU")
    print(f"  simulate           {t2 - tl:8.2f} s wall {c2 - cl:8.2f} s CPU")
    print(f"  check + simulate   {t2 - t1:8.2f} s   ({events} SimPy event ids, "
          f"{sim.share.transfers_started} GM transfers, {sim.share.recomputes} solves"
          f"{', detailed form' if args.detailed else ''})")
    print(f"  total wall         {t2 - t0:8.2f} s")
    print(f"  events / s         {events / (t2 - t1):10.0f}")
    print(f"  instructions / s   {instrs / (t2 - t0):10.0f}  (generation + simulation)")
    print(f"  peak memory        {peak_MiB:8.0f} MiB")
    print(f"  modeled            {tflops(sched.flops, run.makespan_ns):8.1f} TFLOPS "
          f"(makespan {run.makespan_ns!r} ns)")


if __name__ == "__main__":
    main()
