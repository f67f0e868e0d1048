"""Every whole-process speed target of issue 17, one row each (median of 3 runs).

    python benchmarks/bench_targets.py [--runs N] [--only NAME ...]

Rows and targets: ``process.ROWS`` (the EP1024 row takes a few minutes per run).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process import ROWS, measure, report  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", action="append", choices=sorted(ROWS), default=[])
    args = ap.parse_args()
    for name in args.only or list(ROWS):
        print(report(ROWS[name], measure(ROWS[name].argv, args.runs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
