"""Whole-process speed target 'moe-layer-ep128' (issue 18): median of 3 runs, wall time and peak memory.

    python benchmarks/bench_run_moe_layer_ep128.py [--runs N]

The command (the fused MoE layer at EP128) and the target are in ``process.ROWS``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process import main_for  # noqa: E402

if __name__ == "__main__":
    sys.exit(main_for("moe-layer-ep128"))
