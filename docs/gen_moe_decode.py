"""Generate the figures of docs/moe-layer-decode.md from runs: ``python docs/gen_moe_decode.py
[RUN ...]`` (all runs, or those named; ``--render`` only re-renders the page from the JSON).

The W4A8 kernel table: ``simnode run topologies/ascend950dt.yaml workloads/grouped-gemm.yaml``
with V4-Flash's GEMM 1 at EP16 (16 experts x 24 rows, 4096 x 4096, FP4 weights) for S3's
Dequant-B and CANN's kernel at one and two VF issues per cycle. The tokens-per-rank table:
``simnode run topologies/atlas950-supernode.yaml workloads/moe-layer-decode-v4-flash.yaml``
at each ``tokens_per_rank`` (the points of the page's sweep). Figures go to
docs/moe-layer-decode.json, blocks are rendered by docs/pagegen.py; tests/test_pages.py holds
the page to the JSON and the JSON to fresh runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pagegen  # noqa: E402  (docs/ is not a package)

ROOT = pagegen.ROOT
DATA = ROOT / "docs" / "moe-layer-decode.json"
PAGES = (ROOT / "docs" / "moe-layer-decode.md",)

GEMM = {"m_per_expert": "[" + ",".join(["24"] * 16) + "]", "n": 4096, "k": 4096, "weight_dtype": "fp4"}
#: run id -> (row label, the kernel's --set, what its decode bound is called)
KERNELS = {
    "s3": ("S3's Dequant-B (one AIV)", {"impl": "deepgemm", "layout": "masked"}, "vector (decoder)"),
    "cann": ("CANN's, VF issue 1/cycle (the calibrated rate)", {"impl": "cann", "layout": "packed"},
             "vector (decode VF)"),
    "cann-vf2": ("CANN's, VF issue 2/cycle (the sourced dual issue)",
                 {"impl": "cann", "layout": "packed", "topology.chip.vector.vf_issue_per_cycle": 2},
                 "vector (decode VF)"),
}
BOUNDS = {"decode": None, "compute": "cube", "l2": "L2", "hbm": "HBM"}   #: bound_*_ns -> its name
TOKENS = (1, 4, 16, 64, 128, 256, 512)
LAYER = ("topologies/atlas950-supernode.yaml", "workloads/moe-layer-decode-v4-flash.yaml")

RUNS = {**{key: pagegen.command("run", "topologies/ascend950dt.yaml", "workloads/grouped-gemm.yaml",
                                {**GEMM, **sets}) for key, (_, sets, _) in KERNELS.items()},
        **{f"tokens-{t}": pagegen.command("run", *LAYER, {"tokens_per_rank": t}) for t in TOKENS}}


def figures(key: str, flat: dict) -> dict:
    """What the page quotes of one run."""
    if key in KERNELS:
        bound = max(BOUNDS, key=lambda b: flat[f"bound_{b}_ns"])
        return {"us": flat["makespan_ns"] / 1e3, "hbm_floor_us": flat["bound_hbm_ns"] / 1e3,
                "bound": BOUNDS[bound] or KERNELS[key][2]}
    return {"layer_us": flat["layer_us"], "routed_gemm_us": flat["expert_gemm_us"],
            "comm_us": flat["comm_us"], "shared_stream_us": flat["breakdown_us"]["shared_stream"],
            # the page's claim: the shared stream ends before the main stream's combine starts
            "shared_hidden": flat["breakdown_us"]["shared_stream"] <= sum(
                flat["breakdown_us"][k] for k in ("dispatch", "gemm1", "swiglu", "gemm2"))}


def _w4a8(data: dict) -> str:
    out = ["| kernel | time | bound | HBM floor |", "|---|---:|---|---:|"]
    for key, (label, _, _) in KERNELS.items():
        d = data[key]
        out.append(f"| {label} | {d['us']:.1f} us | {d['bound']} | {d['hbm_floor_us']:.1f} us |")
    return "\n".join(out)


def _tokens(data: dict) -> str:
    rows = (("layer us", "layer_us"), ("routed GEMMs us", "routed_gemm_us"),
            ("dispatch + combine us", "comm_us"), ("shared stream us", "shared_stream_us"))
    out = ["| tokens per rank | " + " | ".join(map(str, TOKENS)) + " |", "|---|" + "---:|" * len(TOKENS)]
    for label, field in rows:
        out.append(f"| {label} | " + " | ".join(f"{data[f'tokens-{t}'][field]:.1f}" for t in TOKENS) + " |")
    return "\n".join(out)


def blocks(data: dict) -> dict[str, str]:
    return {"moe-decode-w4a8": _w4a8(data), "moe-decode-tokens": _tokens(data)}


GENERATOR = pagegen.Page(Path(__file__), DATA, PAGES, RUNS, figures, blocks)

if __name__ == "__main__":
    raise SystemExit(pagegen.main(GENERATOR, sys.argv[1:]))
