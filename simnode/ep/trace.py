"""Chrome trace of EP kernel runs: per-rank phase tracks, link utilization, send arrows.

``EPTracer.open(options)`` returns None unless a trace path was asked for. For
each kernel run it writes: one process per rank (``rankNNN``) with a ``deepep`` thread
(``thread``: the transport microbenchmark names it ``transport``) holding a span per
phase; a ``network`` process with a counter track per
link (busy fraction per time bin, from ``FlowNetwork.utilization_series``), and in
each rank's process counters of its HBM and URMA send / receive ceiling; and
flow arrows from a sender's track to the receiver's, one per message train, for
at most ``max_arrows`` trains per kernel (every k-th, so an EP128 trace stays small).
Kernels follow each other on the time axis (combine starts where dispatch ended).
"""

from __future__ import annotations

from simnode.engine.trace import Tracer

MAX_ARROWS = 2000            # per kernel: ~0.3 MB of arrows whatever the EP size
RANK_COUNTERS = ("hbm", "urma_tx", "urma_rx")   # chip resources traced per rank


class EPTracer:
    """Writes EP kernel runs to one Chrome trace; see the module docstring."""

    def __init__(self, tracer: Tracer, max_arrows: int = MAX_ARROWS, thread: str = "deepep"):
        self.tracer = tracer
        self.thread = thread
        self.max_arrows = max_arrows
        self.offset_ns = 0.0
        self._flow_id = 0

    @classmethod
    def open(cls, options, thread: str = "deepep"):
        if options is None or not options.trace_path:
            return None
        return cls(Tracer(options.trace_path, options.trace_scopes or None), thread=thread)

    def record(self, kind: str, sim, times, messages: list) -> None:
        """Write one kernel run: ``times`` per rank, ``messages`` (src, dst, start, arrival)."""
        tr, off = self.tracer, self.offset_ns
        tids = []
        for r, t in enumerate(times):
            pid = tr.process(f"rank{r:03d}")
            tid = tr.thread(pid, f"rank{r:03d}.{self.thread}")
            tids.append((pid, tid))
            if tid is None:
                continue
            tr.span(pid, tid, kind, off + t.start_ns, t.end_ns - t.start_ns)
            for name, (a, b) in t.phases.items():
                tr.span(pid, tid, name, off + a, b - a)
        step = max(1, len(messages) // self.max_arrows)
        for src, dst, start, arrival in messages[::step]:
            (sp, st), (dp, dt) = tids[src], tids[dst]
            if st is None or dt is None:
                continue
            self._flow_id += 1
            tr.flow("s", self._flow_id, sp, st, off + start, f"{kind} {src}->{dst}")
            tr.flow("f", self._flow_id, dp, dt, off + arrival, f"{kind} {src}->{dst}")
        net = sim.net
        edges, util = net.utilization_series()
        npid = tr.process("network")
        names = net.share.names
        for res in net.ports.tolist():
            name = names[res]
            if tr.thread(npid, name) is not None:
                self._counter(npid, f"util {name}", edges, util[:, res])
        # each rank's HBM and URMA ceiling: where combine's reduction takes URMA's HBM share
        ports = set(net.ports.tolist())
        for res in range(len(names)):
            if res in ports:
                continue
            rank, _, what = names[res].partition(".")
            if what in RANK_COUNTERS and tids[int(rank[4:])][1] is not None:
                self._counter(tids[int(rank[4:])][0], f"util {what}", edges, util[:, res])
        self.offset_ns = off + max(t.end_ns for t in times)

    def _counter(self, pid, name: str, edges, busy) -> None:
        """A counter track of busy fractions per time bin (a point only where it changes)."""
        last = None
        for b in range(busy.shape[0]):
            value = round(float(busy[b]), 4)
            if value != last:
                self.tracer.counter(pid, name, self.offset_ns + edges[b], {"busy": value})
                last = value

    def close(self) -> None:
        self.tracer.close()
