"""Generate the figures of docs/low-latency.md from runs: ``python docs/gen_low_latency.py
[RUN ...]`` (all runs, or those named; ``--render`` only re-renders the page from the JSON).

- the A3 checks: ``simnode run topologies/calibrated/atlas900-a3-superpod-aligned-reads.yaml
  workloads/deepep-ll-a3.yaml --set num_ranks=N`` (the normal kernels' calibration alone) and
  the same on ``atlas900-a3-superpod-ll.yaml`` (the refit, as ``simnode validate --only
  'a3-ll-*'`` runs it), each against validation/published.yaml's a3-ll-* cases;
- the 950 prediction: ``workloads/deepep-ll.yaml`` at each EP size, the memory transport at
  ``remote_write_ns`` 0 and 3529.32, the URMA what-if on the two calibrated 950 topologies
  (the runs of docs/ll_curve.py's two sweeps, one by one).

Figures go to docs/low-latency.json, blocks are rendered by docs/pagegen.py;
tests/test_pages.py holds the page to the JSON and the JSON to fresh runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pagegen  # noqa: E402  (docs/ is not a package)

ROOT = pagegen.ROOT
DATA = ROOT / "docs" / "low-latency.json"
PAGES = (ROOT / "docs" / "low-latency.md",)
A3 = {"aligned": "topologies/calibrated/atlas900-a3-superpod-aligned-reads.yaml",
      "ll": "topologies/calibrated/atlas900-a3-superpod-ll.yaml"}
EPS = (8, 16, 32, 64, 128, 256)
WRITE_NS = (0, 3529.32)                  #: the two readings of the 950's per-write cost
URMA = {"cost": "topologies/calibrated/atlas950-supernode-peer-cost.yaml",
        "cache": "topologies/calibrated/atlas950-supernode-peer-cache.yaml"}
KERNELS = ("dispatch", "combine")
CASES = {c["id"]: c for c in yaml.safe_load((ROOT / "validation" / "published.yaml").read_text())["cases"]
         if c["id"].startswith("a3-ll-")}

RUNS = {**{f"a3-{t}-{n}": pagegen.command("run", A3[t], "workloads/deepep-ll-a3.yaml", {"num_ranks": n})
           for t in A3 for n in (8, 32)},
        **{f"mem-{w:g}-{n}": pagegen.command("run", "topologies/atlas950-supernode.yaml", "workloads/deepep-ll.yaml",
                                             {"num_ranks": n, "remote_write_ns": w}) for w in WRITE_NS for n in EPS},
        **{f"urma-{u}-{n}": pagegen.command("run", URMA[u], "workloads/deepep-ll.yaml",
                                            {"num_ranks": n, "transport": "urma"}) for u in URMA for n in EPS}}

#: the two forms against each other: (row label, the chains run) -- each also run as
#: ``form=per_write`` under ``pw-`` + its id
FORMS = (("A3 EP8, the path's LL calibration (latency-bound)", "a3-ll-8"),
         ("950 EP8, remote_write_ns 0 (bandwidth-bound)", "mem-0-8"),
         ("A3 EP32", "a3-ll-32"),
         ("950 EP16, remote_write_ns 0", "mem-0-16"),
         ("A3 EP8, uncalibrated (remote_write_ns 0, 28 GB/s ports)", "a3-base-8"),
         ("950 EP8, remote_write_ns 3529 ns", "mem-3529.32-8"),
         ("URMA what-if, 950 EP8, per-peer overlay", "urma-cost-8"))
#: the same at 64 tokens per rank, EP8: (chip, chains run)
FORMS_64 = (("A3", "a3-ll-8-t64"), ("950", "mem-0-8-t64"))
RUNS["a3-base-8"] = pagegen.command("run", "topologies/atlas900-a3-superpod.yaml", "workloads/deepep-ll-a3.yaml",
                                    {"num_ranks": 8})
for _chip, _key in FORMS_64:
    RUNS[_key] = RUNS[_key[:-len("-t64")]] + ["--set", "tokens_per_rank=64"]
for _, _key in FORMS + FORMS_64:
    RUNS[f"pw-{_key}"] = RUNS[_key] + ["--set", "form=per_write"]


def figures(key: str, flat: dict) -> dict:
    """What the page quotes of one run: each kernel's mean time over ranks, us."""
    out = {k: flat[f"{k}_us"] for k in KERNELS}
    if key in ("a3-ll-8", "a3-ll-32"):
        out["dispatch_steps_us"] = flat["dispatch_steps_us"]
    return out


def _a3(data: dict, topology: str) -> str:
    fit = topology == "ll"
    out = ["| case | published | model | error |" + (" |" if fit else ""), "|---|---|---|---|" + ("---|" if fit else "")]
    for n in (8, 32):
        for k in KERNELS:
            case = CASES[f"a3-ll-ep{n}-{k}"]
            model, published = data[f"a3-{topology}-{n}"][k], case["published"]
            err = model / published - 1
            unit = " us" if (n, k) == (8, "dispatch") else ""
            mark = f"**{100 * err:+.1f}%** (outside {100 * case['tolerance']:g}%)" \
                if abs(err) > case["tolerance"] and not fit else f"{100 * err:+.1f}%"
            role = (" fit |" if (n, k) == (8, "dispatch") else " check |") if fit else ""
            out.append(f"| EP{n} {k} | {published:g}{unit} | {model:.1f} | {mark} |{role}")
    return "\n".join(out)


def _curve(data: dict) -> str:
    out = ["| EP | dispatch memory (0 / 3529 ns) | dispatch URMA (peer-cost / peer-cache) | combine memory "
           "| combine URMA |", "|---|---|---|---|---|"]
    for n in EPS:
        cells = []
        for k in KERNELS:             # each kernel: memory (0 / 3529 ns), URMA (peer-cost / peer-cache)
            cells.append(" / ".join(f"{data[f'mem-{w:g}-{n}'][k]:.1f}" for w in WRITE_NS))
            cells.append(" / ".join(f"{data[f'urma-{u}-{n}'][k]:.1f}" for u in URMA))
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(out)


#: the A3 EP8 dispatch's (token, k) pairs per AIV: 128 tokens x top-8 over a die's 48 AIVs
A3_WRITES = 22


def _where(data: dict) -> str:
    ep8, ep32 = data["a3-ll-8"], data["a3-ll-32"]
    steps = ep8["dispatch_steps_us"]
    grow = ep32["dispatch"] - ep8["dispatch"]
    published = CASES["a3-ll-ep32-dispatch"]["published"] - CASES["a3-ll-ep8-dispatch"]["published"]
    return (f"Where the time goes at EP8 (dispatch): ~{A3_WRITES} serial writes on the slowest AIV, "
            f"each waiting ~{steps['write'] / A3_WRITES:.1f} us for its completion ({steps['write']:.0f} of "
            f"{ep8['dispatch']:.0f} us), the copy to the output ({steps['copy']:.0f} us), statuses and polling "
            f"~{steps['status'] + steps['wait']:.0f} us. The model grows by {grow:.0f} us from EP8 to EP32 (half "
            f"the writes cross the L2 switches: +1 us of round trip each) against the published {published:g} us.")


def _err(data: dict, key: str, kernel: str) -> float:
    return 100 * (data[key][kernel] / data[f"pw-{key}"][kernel] - 1)


def _forms(data: dict) -> str:
    out = ["| case | dispatch | combine |", "|---|---|---|"]
    for label, key in FORMS:
        out.append(f"| {label} | " + " | ".join(f"{_err(data, key, k):+.1f}%" for k in KERNELS) + " |")
    return "\n".join(out)


def _forms_text(data: dict) -> str:
    at = {chip: {k: _err(data, key, k) for k in KERNELS} for chip, key in FORMS_64}
    dispatch = max(abs(_err(data, key, "dispatch")) for _, key in FORMS)
    combine = max(_err(data, key, "combine") for _, key in FORMS)
    return (f"Dispatch holds within {dispatch:.1f}% ({max(abs(a['dispatch']) for a in at.values()):.1f}% at 64 "
            f"tokens). Combine errs slow by up to {combine:.0f}% here, and more at fewer tokens\n"
            f"({at['A3']['combine']:+.1f}% on A3 and {at['950']['combine']:+.1f}% on the 950 at 64 tokens per "
            "rank, EP8):")


def blocks(data: dict) -> dict[str, str]:
    return {"ll-forms": _forms(data), "ll-forms-text": _forms_text(data), "ll-a3-checks": _a3(data, "aligned"), "ll-a3-refit": _a3(data, "ll"), "ll-a3-where": _where(data),
            "ll-950": _curve(data)}


#: the URMA what-if at EP128 and EP256: ~6 and ~23 s of CPU each (one work request per
#: (token, expert) through each of 256 engines)
#: and every per_write run (5 to 20 s each: a flow per write on the engine)
HEAVY = frozenset([f"urma-{u}-{n}" for u in URMA for n in (128, 256)] + [k for k in RUNS if k.startswith("pw-")])

GENERATOR = pagegen.Page(Path(__file__), DATA, PAGES, RUNS, figures, blocks, HEAVY)

if __name__ == "__main__":
    raise SystemExit(pagegen.main(GENERATOR, sys.argv[1:]))
