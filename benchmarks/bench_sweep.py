"""Sweep speed-up: DeepEP at the published configuration over num_ranks = 8..128, run by
``simnode.commands.sweep.run_sweep`` on 1 and on 2 worker processes (and, with ``--dask``, on a
2-process dask LocalCluster). Checks that every executor returns identical results
(the whole result dict, link time series included) and prints each wall time and the
speed-up ratio 1-process wall / N-process wall (the target: faster on 2 than on 1).

The sweep is as fast as its slowest point (EP128 is ~2/3 of the serial time), so on
2 cores the ratio stays well below 2.

    python benchmarks/bench_sweep.py [--ranks 8,16,32,64,128] [--dask]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from simnode.commands.sweep import run_sweep

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = ROOT / "topologies" / "atlas950-supernode.yaml"
WORKLOAD = ROOT / "workloads" / "deepep-normal.yaml"       # the published configuration


def timed_sweep(ranks: list[int], **executor) -> tuple[float, list]:
    start_s = time.perf_counter()
    rows = run_sweep(str(TOPOLOGY), str(WORKLOAD), {"num_ranks": ranks}, [], progress=False, **executor)
    return time.perf_counter() - start_s, [(point, r.to_dict()) for point, _, r in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="8,16,32,64,128", help="num_ranks values")
    ap.add_argument("--dask", action="store_true", help="also run on a 2-process dask LocalCluster")
    args = ap.parse_args(argv)
    ranks = [int(x) for x in args.ranks.split(",")]
    print(f"sweep num_ranks={ranks}, deepep-normal.yaml (published configuration)")
    # warm-up: imports and first-call costs, which forked workers would otherwise inherit free
    run_sweep(str(TOPOLOGY), str(WORKLOAD), {"num_ranks": ranks[:1]}, ["tokens_per_rank=512"],
              jobs=1, progress=False)
    serial, point_s = [], []                 # 1 process, one point at a time to time each
    for n in ranks:
        wall_s, rows = timed_sweep([n], jobs=1)
        serial += rows
        point_s.append(wall_s)
        d = rows[0][1]
        print(f"  EP{n:<4d} {wall_s:6.2f} s wall  makespan {d['makespan_ns'] / 1000:7.1f} us  "
              f"dispatch {d['dispatch_GBps']:6.1f} GB/s  combine {d['combine_GBps']:6.1f} GB/s")
    serial_s = sum(point_s)
    best_s = max(max(point_s), serial_s / 2)     # no 2-worker schedule beats this
    runs = [("local, 2 processes", {"jobs": 2})]
    if args.dask:
        runs.append(("dask LocalCluster, 2 processes", {"jobs": 2, "executor": "dask"}))
    print(f"{'local, 1 process':32s} wall {serial_s:6.2f} s  (2-process bound: "
          f"x{serial_s / best_s:.2f}, the slowest point or half the work)")
    ok = True
    for label, executor in runs:
        wall_s, rows = timed_sweep(ranks, **executor)
        same = rows == serial
        ok &= same
        print(f"{label:32s} wall {wall_s:6.2f} s  speed-up x{serial_s / wall_s:.2f}  "
              f"results {'identical' if same else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
