"""Benchmark: the published BF16 GEMM shape (4096x7168x16384) on one 950DT.

Target: at most 3 s wall on a 2-core machine (schedule build + simulation).
Prints wall time, instructions and SimPy events per second, and peak memory.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import CountingEnvironment, Stopwatch, peak_rss_MiB  # noqa: E402

from simnode.config.topology import load_topology  # noqa: E402
from simnode.hardware.chip import ChipSim  # noqa: E402
from simnode.kernels.gemm import GemmParams, gemm_schedule  # noqa: E402
from simnode.units import tflops  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 3.0


def main() -> int:
    topo = load_topology(ROOT / "topologies" / "ascend950dt.yaml")
    params = GemmParams(4096, 7168, 16384, "bf16")
    with Stopwatch() as build:
        sched = gemm_schedule(topo.chip, params)
    env = CountingEnvironment()
    sim = ChipSim(topo.chip, env)
    with Stopwatch() as simulate:
        run = sim.run(sched)
    wall = build.wall_s + simulate.wall_s
    n_instr = sched.num_instructions()
    print(f"gemm 4096x7168x16384 bf16: {tflops(sched.flops, run.makespan_ns):.1f} TFLOPS modeled")
    print(f"wall time          {wall:.2f} s (build {build.wall_s:.2f} s, simulate {simulate.wall_s:.2f} s)"
          f"  target <= {TARGET_S:.1f} s: {'ok' if wall <= TARGET_S else 'MISSED'}")
    print(f"instructions       {n_instr} ({n_instr / simulate.wall_s:,.0f} per s simulated)")
    print(f"SimPy events       {env.events_scheduled} ({env.events_scheduled / simulate.wall_s:,.0f} per s)")
    print(f"solver recomputes  {sim.share.recomputes}")
    print(f"peak memory        {peak_rss_MiB():.0f} MiB")
    return 0 if wall <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
