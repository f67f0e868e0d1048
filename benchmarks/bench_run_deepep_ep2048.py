"""Whole-process run of DeepEP at EP2048 (issue 17: "runs under 4 GiB, with its time stated"):
wall time and peak memory of one run by default (it takes minutes).

    python benchmarks/bench_run_deepep_ep2048.py [--runs N]

2048 ranks on a Clos with 256-port spines, one expert per rank, 8192 tokens per rank (the
deepep kind's 2^24-token limit over 2048 ranks): 4.19 M communicating pairs, each a flow
in dispatch and in combine. Target: peak <= 4096 MiB; time: stated, no target.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process import Row, measure, report  # noqa: E402

ROW = Row("deepep-ep2048", ("simnode", "run", "topologies/atlas950-supernode.yaml",
                            "workloads/deepep-normal.yaml", "--set", "num_ranks=2048",
                            "--set", "num_experts=2048", "--set", "tokens_per_rank=8192",
                            "--set", "topology.supernode.spine_radix=256", "--json"),
          float("inf"), 4096.0)

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    print(report(ROW, measure(ROW.argv, ap.parse_args().runs)))
