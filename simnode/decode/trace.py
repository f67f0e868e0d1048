"""Chrome trace of a decode step: one process per rank, one thread per stream.

``write_trace(path, scopes, run)`` writes, for every rank (``rankNNN``), a thread per
stream it used (``rankNNN.main``, ``.kv``, ``.indexer``, ``.shared``, ``.metadata``) with a
span per kernel (named by its role; a MoE block as its phases, a collective's barrier wait
as ``wait: ranks``), the host's turns, and a ``wait: <stream>`` span where the main stream
waited for a side stream. Ranks of one group (``StepRun.groups``) have the same spans.
"""

from __future__ import annotations

from simnode.decode.program import HOST, KERNEL, METADATA, MOE
from simnode.engine.trace import Tracer


def write_trace(path: str, scopes, run) -> None:
    tr = Tracer(path, scopes or None)
    try:
        ranks = sorted((r, g) for g, members in enumerate(run.groups) for r in members)
        for r, g in ranks:
            _rank(tr, run, r, g)
    finally:
        tr.close()


def _rank(tr: Tracer, run, r: int, g: int) -> None:
    pid = tr.process(f"rank{r:03d}")
    tids = {s: tr.thread(pid, f"rank{r:03d}.{s}") for s, _ in run.program.streams}
    ops = run.program.ops
    reach, ready, start, end = run.reach[g], run.ready[g], run.start[g], run.end[g]
    for i, op in enumerate(ops):
        tid = tids[op.stream]
        if tid is None:
            continue
        if ready[i] > reach[i]:
            waited = ops[max(op.after, key=lambda a: end[a])].stream
            tr.span(pid, tid, f"wait: {waited}", reach[i], ready[i] - reach[i])
        if op.kind == KERNEL or (op.kind in (HOST, METADATA) and end[i] > start[i]):
            tr.span(pid, tid, op.name, start[i], end[i] - start[i])
        elif op.kind == MOE:
            for ph, (arrive, s, e) in zip(run.rank_phases(r, i), run.phases[(g, i)]):
                if ph.collective and s > arrive:
                    tr.span(pid, tid, "wait: ranks", arrive, s - arrive)
                tr.span(pid, tid, ph.name, s, e - s)
