"""Whole-process speed target 'moe-layer-decode-ep128' (issue 33): median of 3 runs, wall time and peak memory.

    python benchmarks/bench_run_moe_layer_decode_ep128.py [--runs N]

The command (the decode MoE layer of V4-Flash at EP128) and the target are in ``process.ROWS``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process import main_for  # noqa: E402

if __name__ == "__main__":
    sys.exit(main_for("moe-layer-decode-ep128"))
