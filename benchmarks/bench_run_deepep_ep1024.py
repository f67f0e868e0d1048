"""Whole-process speed target 'deepep-ep1024' (issue 17): median of 3 runs, wall time and peak memory.

    python benchmarks/bench_run_deepep_ep1024.py [--runs N]

The command, the target and the figure before issue 17 are in ``process.ROWS``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process import main_for  # noqa: E402

if __name__ == "__main__":
    sys.exit(main_for("deepep-ep1024"))
