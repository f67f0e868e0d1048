"""The whole-process speed targets, one row each: median wall time and peak memory of --runs runs.

    python benchmarks/bench_targets.py [--runs N] [--only NAME ...]

Rows and targets: ``process.ROWS`` (docs/benchmarks.md has the table). Without ``--only``
every row runs but the on-demand ones (EP2048: minutes per run); ``--only NAME`` runs the
named rows, on-demand ones included.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process import ROWS, measure, report  # noqa: E402


def selected(only: list[str]) -> list[str]:
    """The rows to measure: those named, or every row that is not on demand."""
    return list(only) or [name for name, row in ROWS.items() if not row.on_demand]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", action="append", choices=sorted(ROWS), default=[])
    args = ap.parse_args(argv)
    for name in selected(args.only):
        print(report(ROWS[name], measure(ROWS[name].argv, args.runs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
