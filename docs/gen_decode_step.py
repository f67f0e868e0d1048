"""Generate the figures of docs/decode-step.md from runs: ``python docs/gen_decode_step.py [RUN ...]``
(all runs, or those named; ``--render`` only re-renders the page from the JSON).

Every run is ``simnode run topologies/calibrated/atlas950-supernode-decode.yaml
workloads/v4-flash-decode.yaml --json`` with the ``--set`` values of ``RUNS`` (in one process: the runs share the kernel
profiles they have in common, as a sweep does). The figures the pages quote go to
docs/decode-step.json (``figures(result)`` per run) and each block of a page (``PAGES``: the
decode page and the README's summary) between ``<!-- generated: NAME -->`` and
``<!-- end -->`` is rendered from them (``blocks``; docs/pagegen.py holds the skeleton).
tests/test_pages.py holds the pages to the JSON and the JSON to fresh runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pagegen  # noqa: E402  (docs/ is not a package)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "decode-step.md"
README = ROOT / "README.md"
PAGES = (PAGE, README)                    #: the pages with generated blocks
DATA = ROOT / "docs" / "decode-step.json"
#: the 950 supernode with the host time per graph replay fitted on row (a)
#: (topologies/calibrated/decode-host-gap.yaml); the ``-raw`` runs set it back to 0
TOPOLOGY = "topologies/calibrated/atlas950-supernode-decode.yaml"
WORKLOAD = "workloads/v4-flash-decode.yaml"

#: the published rows (facts v4-decode 2): checks, never inputs
PUBLISHED = {"a": {"tpot_ms": 6.55, "tokens_per_s_per_chip": 152.79, "accepted": 1.44},
             "b": {"tpot_ms": 25.54, "tokens_per_s_per_chip": 7047.44, "accepted": 0.7}}
MTP1 = {"next_n": 1, "accepted_tokens": 0.7}
B = {"global_batch": 2880, **MTP1}
#: twice the UB: every port of the Clos and the URMA payload ceiling doubled
UB2 = {"topology.supernode.port_bandwidth_GBps": 102.84, "topology.supernode.urma_payload_GBps": 703.4}

#: run id -> --set values
RAW = {"host_gap_ns": 0}
RUNS = {
    "a": {}, "b": B, "a-raw": RAW, "b-raw": {**B, **RAW},
    "mtp3-64": {"global_batch": 64}, "mtp3-256": {"global_batch": 256}, "mtp3-1024": {"global_batch": 1024},
    "mtp1-64": {"global_batch": 64, **MTP1}, "mtp1-256": {"global_batch": 256, **MTP1},
    "mtp1-1024": {"global_batch": 1024, **MTP1},
    "a-ep64": {"chips": 64, "attn_dp": 64, "moe_ep": 64, "global_batch": 64},
    "b-ep64": {**B, "chips": 64, "attn_dp": 64, "moe_ep": 64, "global_batch": 11520},
    "a-fp4kv": {"kv_cache": "fp4_compressed"}, "b-fp4kv": {**B, "kv_cache": "fp4_compressed"},
    "a-inline": {"shared_expert": "inline"}, "b-inline": {**B, "shared_expert": "inline"},
    "a-ub2": UB2, "b-ub2": {**B, **UB2},
}
TREND = [("3", "a"), ("3", "mtp3-64"), ("3", "mtp3-256"), ("3", "mtp3-1024"),
         ("1", "mtp1-64"), ("1", "mtp1-256"), ("1", "mtp1-1024"), ("1", "b")]
#: (what-if, run id suffix, its --set as the page shows it)
WHATIFS = [("as deployed", "", ""),
           ("EP64 at the same per-chip batch", "-ep64",
            "`chips=64 attn_dp=64 moe_ep=64 global_batch=64` ((b): `=11520`)"),
           ("FP4 compressed KV", "-fp4kv", "`kv_cache=fp4_compressed`"),
           ("shared expert inline", "-inline", "`shared_expert=inline`"),
           ("twice the UB bandwidth", "-ub2", "`topology.supernode.port_bandwidth_GBps=102.84 "
            "topology.supernode.urma_payload_GBps=703.4`")]
#: main-stream kernel families of the trend table: kernel name -> family
FAMILIES = (("routed experts", ("gmm_w13", "gmm_w2", "swiglu_quant")),
            ("dispatch + combine", ("dispatch", "combine")),
            ("projections", ("wq_a", "wq_b", "wkv", "wo_a", "wo_b", "gate", "e_proj", "h_proj",
                             "compressor", "idx_compressor", "idx_weights_proj")),
            ("sparse attn", ("sparse_attn_window", "sparse_attn_csa", "sparse_attn_hca")),
            ("shared expert", ("sh_quant", "sh_w13", "sh_swiglu_quant", "sh_w2", "add_shared")),
            ("LM head + sampler", ("lm_head", "sampler")),
            ("mHC", ("hc_pre_attn", "hc_pre_ffn", "hc_post_attn", "hc_post_ffn", "hc_head")),
            ("indexer", ("lightning_indexer", "idx_wq_b", "idx_q_rope", "idx_hadamard", "idx_q_quant")))
TOP = 10


def kernel_names(flat: dict) -> list[str]:
    return [k[:-len("_launches")] for k in flat if k.endswith("_launches")]


def figures(flat: dict) -> dict:
    """What the page quotes of one run."""
    kernels = []
    for name in kernel_names(flat):
        kernels.append({"name": name, "launches": flat[f"{name}_launches"], "ms": flat[f"{name}_ns"] / 1e6,
                        "share": flat[f"{name}_share_of_step_frac"], "mean_us": flat[f"{name}_mean_us"],
                        "bound_ms": flat.get(f"bound_{name}_ns", 0.0) / 1e6,
                        "bottleneck": flat[f"{name}_bottleneck"], "model": flat[f"{name}_model"],
                        "stream": flat[f"{name}_stream"]})
    kernels.sort(key=lambda k: (-k["ms"], k["name"]))
    main = {k["name"]: k["ms"] for k in kernels if k["stream"] == "main"}
    fam = {f: sum(main.get(n, 0.0) for n in names) for f, names in FAMILIES}
    fam["other kernels"] = sum(main.values()) - sum(fam.values())
    return {"step_ms": flat["step_us"] / 1e3, "tpot_ms": flat["tpot_ms"],
            "tokens_per_s_per_chip": flat["tokens_per_s_per_chip"], "M": flat["tokens_per_chip"],
            "hbm_frac": flat["hbm_capacity_frac"], "hbm_GB": sum(flat["hbm_footprint_GB"].values()),
            "critical_ms": {k: v / 1e3 for k, v in flat["critical_us"].items()},
            "layer_us": {k: v["mean"] for k, v in flat["layer_us"].items()},
            "unmodeled_frac": flat["unmodeled_frac"], "families_ms": fam, "top": kernels[:TOP],
            "kernels_ms": {k["name"]: k["ms"] for k in kernels},
            "mean_us": {k["name"]: k["mean_us"] for k in kernels}}


# -- rendering ------------------------------------------------------------------------------

def _pct(model: float, published: float) -> str:
    return f"{100 * (model / published - 1):+.1f}%"


def _rows(data: dict) -> str:
    out = ["| case | `--set` | step ms | TPOT ms: uncalibrated | TPOT ms: host gap fitted on (a) | published | "
           "tokens/s/chip: model / published |", "|---|---|---:|---:|---:|---:|---:|"]
    for case, label, sets, kind in (("a", "(a) global batch 16, next_n 3, 1.44 accepted", "(none)", "fit"),
                                    ("b", "(b) global batch 2880, next_n 1, 0.7 accepted",
                                     "`global_batch=2880 next_n=1 accepted_tokens=0.7`", "check")):
        d, raw, p = data[case], data[case + "-raw"], PUBLISHED[case]
        out.append(f"| {label} | {sets} | {d['step_ms']:.2f} | {raw['tpot_ms']:.2f} "
                   f"({_pct(raw['tpot_ms'], p['tpot_ms'])}) | {d['tpot_ms']:.2f} ({_pct(d['tpot_ms'], p['tpot_ms'])}, "
                   f"{kind}) | {p['tpot_ms']} | {d['tokens_per_s_per_chip']:.1f} / {p['tokens_per_s_per_chip']} |")
    return "\n".join(out)


def _summary(d: dict) -> str:
    c, lay = d["critical_ms"], d["layer_us"]
    seg = ", ".join(f"{k.replace('layer ', '')} {v:.1f}" for k, v in lay.items() if k != "embedding")
    return (f"Slowest rank's critical path (`critical_us`): kernels {c['kernels']:.2f} ms, communication "
            f"{c['communication']:.2f} ms, imbalance wait {c['imbalance_wait']:.2f} ms, launch gaps "
            f"{c['launch_gaps']:.2f} ms ({100 * c['launch_gaps'] / d['step_ms']:.1f}% of the step), host gaps "
            f"{c['host_gaps']:.2f} ms. Per segment, us: {seg}. HBM {d['hbm_GB']:.2f} GB "
            f"({100 * d['hbm_frac']:.1f}%). Proxies and rooflines time {100 * d['unmodeled_frac']:.0f}% of "
            f"the kernel time (`unmodeled_frac`).")


def _top(d: dict) -> str:
    out = ["| # | kernel | launches | time ms | share of step | per launch us | roofline ms | bottleneck | model |",
           "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for i, k in enumerate(d["top"], 1):
        bound = f"{k['bound_ms']:.2f}" if k["bound_ms"] else "-"
        out.append(f"| {i} | {k['name']} | {k['launches']} | {k['ms']:.2f} | {100 * k['share']:.1f}% | "
                   f"{k['mean_us']:.1f} | {bound} | {k['bottleneck']} | {k['model']} |")
    return "\n".join(out)


def _trend(data: dict) -> str:
    fams = [f for f, _ in FAMILIES] + ["other kernels"]
    out = ["| next_n | global batch | M | step | TPOT | tokens/s/chip | " + " | ".join(fams)
           + " | launch gaps | host gaps |", "|---|---:|---:|---:|---:|---:|" + "---:|" * (len(fams) + 2)]
    for n, key in TREND:
        d = data[key]
        batch = RUNS[key].get("global_batch", 16)
        out.append(f"| {n} | {batch} | {d['M']} | {d['step_ms']:.2f} | {d['tpot_ms']:.2f} | "
                   f"{d['tokens_per_s_per_chip']:.0f} | " + " | ".join(f"{d['families_ms'][f]:.2f}" for f in fams)
                   + f" | {d['critical_ms']['launch_gaps']:.2f} | {d['critical_ms']['host_gaps']:.2f} |")
    return "\n".join(out)


def _slo(data: dict) -> str:
    parts = []
    for limit in (10.0, 20.0, 50.0):
        for n in ("3", "1"):
            ok = [RUNS[k].get("global_batch", 16) for m, k in TREND if m == n and data[k]["tpot_ms"] <= limit]
            parts.append(f"{limit:g} ms with MTP{n}: " + (f"up to global batch {max(ok)}" if ok else "none"))
    return "Largest batch run here within each TPOT SLO: " + "; ".join(parts) + "."


def _moved(d: dict, base: dict, n: int = 2) -> str:
    """The ``n`` main-stream lines (kernel families, launch gaps) that moved most against ``base``."""
    lines = {**d["families_ms"], "launch gaps": d["critical_ms"]["launch_gaps"]}
    ref = {**base["families_ms"], "launch gaps": base["critical_ms"]["launch_gaps"]}
    delta = sorted(((lines[k] - ref[k], k) for k in lines), key=lambda x: (-abs(x[0]), x[1]))[:n]
    return ", ".join(f"{k} {v:+.2f}" for v, k in delta if abs(v) >= 0.005) or "nothing moved"


def _whatifs(data: dict) -> str:
    out = ["| what-if | `--set` | (a) TPOT ms | (b) TPOT ms | (a) tokens/s/chip | (b) tokens/s/chip | "
           "what moved most, ms per step: (a); (b) |", "|---|---|---:|---:|---:|---:|---|"]
    for label, suffix, sets in WHATIFS:
        a, b = data["a" + suffix], data["b" + suffix]
        why = f"{_moved(a, data['a'])}; {_moved(b, data['b'])}" if suffix else ""
        out.append(f"| {label} | {sets} | {a['tpot_ms']:.2f} | {b['tpot_ms']:.2f} | "
                   f"{a['tokens_per_s_per_chip']:.1f} | {b['tokens_per_s_per_chip']:.0f} | {why} |")
    return "\n".join(out)


def _readme(data: dict) -> str:
    out = ["| DeepSeek-V4-Flash, 16 chips, context 8192 | TPOT ms: uncalibrated | TPOT ms: host gap fitted on "
           "the first row | published |", "|---|---:|---:|---:|"]
    for case, label, kind in (("a", "global batch 16, MTP3", "fit"), ("b", "global batch 2880, MTP1", "check")):
        d, raw, p = data[case], data[case + "-raw"], PUBLISHED[case]
        out.append(f"| {label} | {raw['tpot_ms']:.2f} ({_pct(raw['tpot_ms'], p['tpot_ms'])}) | {d['tpot_ms']:.2f} "
                   f"({_pct(d['tpot_ms'], p['tpot_ms'])}, {kind}) | {p['tpot_ms']} |")
    return "\n".join(out)


def blocks(data: dict) -> dict[str, str]:
    """Each generated block of the pages, by name."""
    return {"readme": _readme(data), "rows": _rows(data), "summary-a": _summary(data["a"]), "top-a": _top(data["a"]),
            "summary-b": _summary(data["b"]), "top-b": _top(data["b"]), "trend": _trend(data),
            "slo": _slo(data), "whatifs": _whatifs(data)}


GENERATOR = pagegen.Page(Path(__file__), DATA, PAGES,
                         {k: pagegen.command("run", TOPOLOGY, WORKLOAD, sets) for k, sets in RUNS.items()},
                         lambda key, flat: figures(flat), blocks)

if __name__ == "__main__":
    raise SystemExit(pagegen.main(GENERATOR, sys.argv[1:]))
