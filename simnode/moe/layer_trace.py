"""Chrome trace of a MoE layer run: every rank's streams on one time axis.

``write_trace(options, layer_run)`` writes one process per rank (``rankNNN``) with a
``cube`` thread (its grouped GEMMs, per micro-batch or chunk, shared experts' included), a
``vector`` thread (SwiGLU + cast on the AIVs the compute kernels hold), a ``shared`` thread
(the shared experts' kernels when they have a stream of their own) and a ``comm`` thread
(its DeepEP kernels, their phases and flag waits, epilogues), counter tracks of
its HBM in use split by user (``hbm kernels``: its compute kernels; ``hbm comm``: URMA and
the communication AIVs) as busy fractions of the HBM, a ``network`` process with a counter
per link, and, in fused mode, arrows from a dispatch chunk leaving its source to the expert
blocks on the receiver that consume it (a sample, at most ``MAX_ARROWS``).
"""

from __future__ import annotations

import numpy as np

from simnode.engine.trace import Tracer


def write_trace(options, lr) -> None:
    tr = Tracer(options.trace_path, options.trace_scopes or None)
    try:
        _write(tr, lr)
    finally:
        tr.close()


def _write(tr: Tracer, lr) -> None:
    R = len(lr.ranks)
    tids = []
    for r, rec in enumerate(lr.ranks):
        pid = tr.process(f"rank{r:03d}")
        comp = tr.thread(pid, f"rank{r:03d}.cube")
        vec = tr.thread(pid, f"rank{r:03d}.vector")
        comm = tr.thread(pid, f"rank{r:03d}.comm")
        side = (tr.thread(pid, f"rank{r:03d}.shared") if any(sp.stream == "shared" for sp in rec.spans)
                else None)
        tids.append((pid, comp, comm, vec))
        for sp in sorted(rec.spans, key=lambda s: (s.start_ns, s.stream, s.name)):
            # the compute stream's kernels one at a time: GEMMs on the cubes, SwiGLU on the AIVs
            tid = {"comm": comm, "shared": side}.get(sp.stream, comp if "gemm" in sp.name else vec)
            if tid is not None:
                tr.span(pid, tid, sp.name, sp.start_ns, sp.end_ns - sp.start_ns)
        if comm is not None:
            for name, (sim, times) in sorted(lr.kernels.items()):
                for ph, (a, b) in times[r].phases.items():
                    tr.span(pid, comm, f"{name}: {ph}", a, b - a)
    net = lr.fabric.net
    share = net.share
    edges, util = net.utilization_series()
    names = share.names
    index = {n: i for i, n in enumerate(names)}
    for r in range(R):
        pid, comp, comm, vec = tids[r]
        if comp is None and comm is None and vec is None:      # the rank is out of scope
            continue
        hbm, kern = index[f"rank{r}.hbm"], index[f"rank{r}.hbm_kernels"]
        # the shadow counts kernel bytes against an unlimited capacity: as a share of the HBM
        kernels = util[:, kern] * share.capacity[kern] / share.capacity[hbm]
        _counter(tr, pid, "util hbm kernels", edges, kernels)
        _counter(tr, pid, "util hbm comm", edges, np.maximum(util[:, hbm] - kernels, 0.0))
    npid = tr.process("network")
    for res in net.ports.tolist():
        if tr.thread(npid, names[res]) is not None:
            _counter(tr, npid, f"util {names[res]}", edges, util[:, res])
    fid = 0
    for src, dst, sent, arrived, chunk in lr.arrows:
        (sp, _, sc, _), (dp, dc, _, _) = tids[src], tids[dst]
        if sc is None or dc is None:
            continue
        start = [s.start_ns for s in lr.ranks[dst].spans
                 if s.name == f"chunk{chunk}.gemm1"]
        fid += 1
        tr.flow("s", fid, sp, sc, sent, f"dispatch chunk {chunk} {src}->{dst}")
        tr.flow("f", fid, dp, dc, max([arrived] + start), f"dispatch chunk {chunk} {src}->{dst}")


def _counter(tr: Tracer, pid: int, name: str, edges, busy) -> None:
    """A counter track of busy fractions per time bin (a point only where it changes)."""
    last = None
    for b in range(busy.shape[0]):
        value = round(float(busy[b]), 4)
        if value != last:
            tr.counter(pid, name, edges[b], {"busy": value})
            last = value
