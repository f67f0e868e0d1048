"""Result records of a run, their table and JSON forms.

``Result`` holds what every kind reports (makespan, flops, tflops, bottleneck,
per-pipe busy fractions, L2/HBM bytes and GB/s, the roofline bound) plus a
``details`` mapping of kind-specific figures. ``chip_result`` builds one from a
``ChipRun``; ``format_table`` and ``to_json`` print it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

from simnode import units
from simnode.kernels import isa

PIPE_NAMES = {"aic.m": "cube (aic.m)", "aic.mte2": "AIC MTE2 (GM->L1)", "aic.mte1": "MTE1 (L1->L0)",
              "aic.fix": "FixPipe (aic.fix)", "aic.s": "AIC scalar", "aiv.mte2": "AIV MTE2 (GM->UB)",
              "aiv.v": "vector (aiv.v)", "aiv.mte3": "AIV MTE3 (UB->GM/L1)", "aiv.s": "AIV scalar"}


@dataclass(frozen=True)
class Result:
    workload: str
    kind: str
    makespan_ns: float
    flops: float
    tflops: float
    bottleneck: str
    pipe_busy_frac: Mapping[str, float]        #: mean busy fraction per pipe kind over used units
    l2_bytes: float
    l2_GBps: float
    l2_util_frac: float
    hbm_bytes: float
    hbm_GBps: float
    hbm_util_frac: float
    roofline_ns: float                         #: lower bound from peak rates (0 if not computed)
    details: Mapping = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = {"workload": self.workload, "kind": self.kind, "makespan_ns": round(self.makespan_ns, 3),
             "flops": self.flops, "tflops": round(self.tflops, 3), "bottleneck": self.bottleneck,
             "pipe_busy_frac": {k: round(v, 5) for k, v in sorted(self.pipe_busy_frac.items())},
             "l2_bytes": round(self.l2_bytes), "l2_GBps": round(self.l2_GBps, 3),
             "l2_util_frac": round(self.l2_util_frac, 5), "hbm_bytes": round(self.hbm_bytes),
             "hbm_GBps": round(self.hbm_GBps, 3), "hbm_util_frac": round(self.hbm_util_frac, 5),
             "roofline_ns": round(self.roofline_ns, 3)}
        d.update(_rounded(self.details))
        return d


def _rounded(obj):
    if isinstance(obj, float):
        return round(obj, 5)
    if isinstance(obj, Mapping):
        return {str(k): _rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_rounded(v) for v in obj]
    return obj


def to_json(result_or_list) -> str:
    if isinstance(result_or_list, list):
        return json.dumps([r.to_dict() for r in result_or_list], indent=2, sort_keys=False)
    return json.dumps(result_or_list.to_dict(), indent=2, sort_keys=False)


def pipe_busy(run) -> dict[str, float]:
    """Mean busy fraction per pipe kind ("aic.m", "aiv.mte2", ...) over the units that ran it."""
    return run.busy_frac()


def flag_waits(run, min_frac: float = 0.01) -> dict[str, dict[str, float]]:
    """Per pipe kind, the mean fraction of the run it sat idle on flags, by the pipe (same
    unit) or unit (cross-core) that sets them: where a pipe's time goes when it is not busy.
    Entries under ``min_frac`` are left out."""
    total, count = {}, {}
    span = run.makespan_ns or 1.0
    for (_core, unit, pipe), st in run.pipe_stats.items():
        k = f"{isa.unit_kind(unit)}.{pipe}"
        count[k] = count.get(k, 0) + 1
        acc = total.setdefault(k, {})
        for src, ns in st.wait_ns.items():
            acc[src] = acc.get(src, 0.0) + ns
    out = {}
    for k in sorted(total):
        fr = {src: round(ns / (count[k] * span), 4) for src, ns in sorted(total[k].items())}
        fr = {src: f for src, f in fr.items() if f >= min_frac}
        if fr:
            out[k] = fr
    return out


# Below this busy fraction the busiest resource is not what sets the time: the run waits on
# dependencies and latencies (a flag round trip, a gather's completion), and the table says so.
SATURATED_FRAC = 0.8


def bottleneck_of(busy: Mapping[str, float], l2_util: float, hbm_util: float) -> str:
    """The most utilized of: every pipe kind, L2 bandwidth, HBM bandwidth."""
    return _busiest(busy, l2_util, hbm_util)[1]


def _busiest(busy: Mapping[str, float], l2_util: float, hbm_util: float) -> tuple[float, str]:
    cands = [(v, PIPE_NAMES.get(k, k)) for k, v in busy.items()]
    cands += [(l2_util, "L2 bandwidth"), (hbm_util, "HBM bandwidth")]
    cands.sort(key=lambda c: (-c[0], c[1]))
    return cands[0]


def busiest_by_unit(busy: Mapping[str, float]) -> dict[str, str]:
    """Per core kind ("aic", "aiv"), its busiest pipe: the pipe that would bind if the
    other kind's work were free, e.g. FixPipe against the cube in S1's 1C1V reasoning."""
    out = {}
    for k, v in sorted(busy.items(), key=lambda kv: (-kv[1], kv[0])):
        out.setdefault(k.split(".", 1)[0], PIPE_NAMES.get(k, k))
    return dict(sorted(out.items()))


def chip_result(workload: str, kind: str, run, chip, roofline_ns: float = 0.0,
                details: Mapping | None = None) -> Result:
    span = run.makespan_ns
    busy = pipe_busy(run)
    l2_GBps = run.l2_bytes / span if span else 0.0
    hbm_GBps = run.hbm_bytes / span if span else 0.0
    l2_util = l2_GBps / chip.memory.l2_bandwidth_GBps
    hbm_util = hbm_GBps / chip.memory.hbm_bandwidth_GBps
    flops = run.schedule.flops
    details = {**dict(details or {}), "bottleneck_util_frac": _busiest(busy, l2_util, hbm_util)[0],
               "busiest_pipe_by_unit": busiest_by_unit(busy), "idle_on_flags_frac": flag_waits(run)}
    return Result(workload, kind, span, flops, units.tflops(flops, span),
                  bottleneck_of(busy, l2_util, hbm_util), busy, run.l2_bytes, l2_GBps, l2_util,
                  run.hbm_bytes, hbm_GBps, hbm_util, roofline_ns, details)


def _bottleneck_text(r: Result) -> str:
    util = r.details.get("bottleneck_util_frac")
    if util is None:
        return r.bottleneck
    text = f"{r.bottleneck}, {100 * util:.1f}% busy"
    if util < SATURATED_FRAC:
        text += (f" (nothing above {100 * SATURATED_FRAC:.0f}%: dependencies and latencies set the "
                 f"time; idle_on_flags_frac says who each pipe waits on)")
    return text


def format_table(r: Result) -> str:
    rows = [("workload", r.workload), ("kind", r.kind),
            ("makespan", f"{units.ns_to_us(r.makespan_ns):.3f} us")]
    if r.flops:
        rows.append(("achieved", f"{r.tflops:.1f} TFLOPS"))
    if r.roofline_ns:
        rows.append(("roofline bound", f"{units.ns_to_us(r.roofline_ns):.3f} us "
                     f"(makespan / bound = {r.makespan_ns / r.roofline_ns:.3f})"))
    rows.append(("bottleneck", _bottleneck_text(r)))
    if r.l2_bytes:
        rows.append(("L2", f"{r.l2_bytes / units.BYTES_PER_GB:.3f} GB, {r.l2_GBps:.0f} GB/s, "
                           f"{100 * r.l2_util_frac:.1f}% of peak"))
    if r.hbm_bytes:
        rows.append(("HBM", f"{r.hbm_bytes / units.BYTES_PER_GB:.3f} GB, {r.hbm_GBps:.0f} GB/s, "
                            f"{100 * r.hbm_util_frac:.1f}% of peak"))
    for k, v in r.pipe_busy_frac.items():
        rows.append((f"busy {PIPE_NAMES.get(k, k)}", f"{100 * v:.1f}%"))
    for k, v in r.details.items():
        if k == "bottleneck_util_frac":
            continue                                   # printed on the bottleneck row
        if isinstance(v, Mapping):
            for sub, x in v.items():
                if isinstance(x, Mapping):
                    x = ", ".join(f"{a}={b:.4g}" if isinstance(b, float) else f"{a}={b}"
                                  for a, b in x.items())
                rows.append((f"{k}.{sub}", f"{x:.4g}" if isinstance(x, float) else str(x)))
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                text = ", ".join(f"{a}={b:.4g}" if isinstance(b, float) else f"{a}={b}"
                                 for a, b in x.items()) if isinstance(x, Mapping) else str(x)
                rows.append((f"{k}[{i}]", text))
        else:
            rows.append((k, f"{v:.4g}" if isinstance(v, float) else str(v)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
