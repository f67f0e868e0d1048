"""Where a decode step's time goes: the slowest rank's critical path, kernels, layers, gaps.

``breakdown(run, chip) -> Breakdown`` reads a ``StepRun`` (``simnode.decode.step``). The
slowest rank's main stream runs from 0 to the step's end without a hole, so its time splits
exactly into ``critical`` lines (``CRITICAL``):

- ``kernels``: main-stream kernels at work (the MoE block's expert GEMMs and SwiGLU included);
- ``communication``: the MoE block's collective kernels (dispatch, combine) at work;
- ``imbalance_wait``: their entry barriers waiting for slower ranks;
- ``launch_gaps``, ``host_gaps``: the non-kernel gaps of ``program.Gaps``;
- ``wait_<stream>``: the main stream waiting for a side stream's kernels (kv, indexer,
  shared) or the AICPU's metadata, at the kernel that joins it: the side stream's exposed
  time (its kernels beside the main stream's are hidden).

``kernels``: one ``KernelRow`` per kernel of the step on that rank, by role and shape: its
launches, its time on the clock (contention included) and alone, its roofline bound, the
bottleneck of its model's run and its model (``timing.MODELS``, or ``moe.FLOW`` for the EP
kernels). A role with several shapes (sparse attention of each layer type) is named with
the layer type it first runs in. ``segments``: each segment's count and mean / max span on
the main stream (a layer of each type, a head, an MTP draft). Pure: no simulation.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode import units
from simnode.decode import kernels as K
from simnode.decode.moe import FLOW
from simnode.decode.program import HOST, KERNEL, METADATA, MOE

CRITICAL = ("kernels", "communication", "imbalance_wait", "launch_gaps", "host_gaps")


@dataclass(frozen=True)
class KernelRow:
    name: str
    key: str
    stream: str
    launches: int
    time_ns: float               #: on the step's clock, summed over its launches
    alone_ns: float              #: its time alone x launches
    bound_ns: float              #: roofline x launches
    bound: str                   #: what sets the roofline
    bottleneck: str
    model: str
    source: str


@dataclass(frozen=True)
class Breakdown:
    step_ns: float
    slowest_rank: int
    ranks: tuple                 #: the ranks the slowest one stands for (same work, same times)
    reason: str                  #: why that rank is the slowest
    critical: dict               #: line -> ns on the slowest rank's main stream (module docstring)
    kernels: tuple               #: KernelRow, by time on the clock, largest first
    segments: dict               #: segment name -> {"count", "mean_ns", "max_ns"}
    by_model: dict               #: model -> ns of the slowest rank's kernels at work, all streams
    stream_busy: dict            #: stream -> ns its kernels were at work


def _tag(seg: K.Segment) -> str:
    words = seg.name.split()
    return words[1] if words[0] == "layer" else words[0]


def breakdown(run, chip) -> Breakdown:
    g = run.slowest_group()
    ops, segs = run.program.ops, run.program.segments
    reach, ready, start, end = run.reach[g], run.ready[g], run.start[g], run.end[g]
    crit = dict.fromkeys(CRITICAL, 0.0)
    rows: dict = {}
    stream_busy: dict = {}
    by_model: dict = {}

    def add_row(name, key, stream, seg, t, alone, prof_bound, bottleneck, model, source, call):
        r = rows.setdefault((name, key), [stream, seg, 0, 0.0, 0.0, call, bottleneck, model, source])
        r[2] += 1
        r[3] += t
        r[4] += alone
        stream_busy[stream] = stream_busy.get(stream, 0.0) + t
        by_model[model] = by_model.get(model, 0.0) + t

    for i, op in enumerate(ops):
        on_main = op.stream == "main"
        if on_main and op.after and ready[i] > reach[i]:
            last = max(op.after, key=lambda a: end[a])
            line = f"wait_{ops[last].stream}"
            crit[line] = crit.get(line, 0.0) + ready[i] - reach[i]
        if op.kind == KERNEL:
            p = run.profiles[i]
            add_row(op.name, op.call.key, op.stream, op.segment, end[i] - start[i], p.ns, None,
                    p.bottleneck, p.model, p.source, op.call)
            if on_main:
                crit["launch_gaps"] += start[i] - ready[i]
                crit["kernels"] += end[i] - start[i]
        elif op.kind == MOE:
            calls = {c.name: c for c in segs[op.segment].kernels}
            for ph, (arrive, s, e) in zip(run.phases_of(g, i), run.phases[(g, i)]):
                add_row(ph.name, calls[ph.name].key, "main", op.segment, e - s, ph.ns, None, ph.bottleneck,
                        ph.model, "moe", calls[ph.name])
                crit["communication" if ph.collective else "kernels"] += e - s
                crit["imbalance_wait" if ph.collective else "launch_gaps"] += s - arrive
        elif on_main:
            crit["host_gaps" if op.kind == HOST else "wait_metadata"] = \
                crit.get("host_gaps" if op.kind == HOST else "wait_metadata", 0.0) + end[i] - start[i]
        elif op.kind == METADATA:
            stream_busy["metadata"] = stream_busy.get("metadata", 0.0) + end[i] - start[i]
    kernels = _rows(rows, segs, chip)
    seg_spans: dict = {}
    first: dict = {}
    last: dict = {}
    for i, op in enumerate(ops):
        if op.stream == "main":
            first.setdefault(op.segment, reach[i])
            last[op.segment] = end[i]
    for si, seg in enumerate(segs):
        if si in first:
            seg_spans.setdefault(seg.name, []).append(last[si] - first[si])
    segments = {name: {"count": len(v), "mean_ns": sum(v) / len(v), "max_ns": max(v)}
                for name, v in seg_spans.items()}
    ranks = run.groups[g]
    rows_of = run.moe.routed_rows
    mean = sum(rows_of) / len(rows_of)
    r = ranks[0]
    reason = (f"rank {r}: {rows_of[r]} routed rows per MoE layer ({rows_of[r] / mean:.2f}x the mean), "
              f"{len(ranks)} rank(s) alike; its barriers waited {units.ns_to_us(run.barrier_wait_ns(g)):.1f} us")
    plain = lambda d: {k: float(v) for k, v in d.items()}      # noqa: E731
    return Breakdown(run.group_end(g), r, ranks, reason, plain(crit), kernels,
                     {k: {"count": v["count"], "mean_ns": float(v["mean_ns"]), "max_ns": float(v["max_ns"])}
                      for k, v in segments.items()}, plain(by_model), plain(stream_busy))


def _rows(rows: dict, segs: tuple, chip) -> tuple:
    names: dict = {}
    for (name, key) in rows:
        names.setdefault(name, []).append(key)
    out, used = [], set()
    for (name, key), (stream, seg, n, t, alone, call, bottleneck, model, source) in rows.items():
        label = name if len(names[name]) == 1 else f"{name}_{_tag(segs[seg])}"
        while label in used:
            label += "_"
        used.add(label)
        # an EP kernel has no roofline of its own here (its network is not the chip's)
        bound, what = K.roofline_ns(call, chip) if model != FLOW else (0.0, "")
        out.append(KernelRow(label, key, stream, n, float(t), float(alone), bound * n, what, bottleneck,
                             model, source))
    return tuple(sorted(out, key=lambda r: (-r.time_ns, r.name)))
