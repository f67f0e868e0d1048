"""The frame every EP kernel runs in: one clock, every rank's process, barriers, the result.

``EPKernel(topology, plan, costs, ...)`` is the base of a member's kernels (the package
docstring lists what a member adds). ``run(kind)`` builds a fresh clock and network
(``build``, the member's), lets the member add its per-kind resources (``prepare``), starts
one SimPy process per rank (``dispatch_rank`` / ``combine_rank``), runs the clock to the
end, fails if a rank never finished (a barrier nobody completed), writes the trace if asked,
checks conservation (every planned byte sent once) and returns a ``PhaseRun``.

Shared mechanisms: ``barrier`` (each rank issues its stores, waits for the last rank's and
for the farthest path), ``arrive`` (the counted event under a barrier or a flag),
``kernel_start`` / ``kernel_end`` (launch, then the member's ``entry``; the member's
``exit``: the hooks a MoE layer calls when it runs a kernel's parts itself),
``local_work`` (transfers on a rank's own resources, no network part) and ``post`` (keep a
group of messages for the trace). ``new_network`` and ``rank_hbm`` build what every member
posts on.
"""

from __future__ import annotations

import math

import numpy as np
import simpy

from simnode.ep.phase import PhaseRun, RankTimes
from simnode.network.bound import analytical_bound_ns
from simnode.network.flows import FlowNetwork
from simnode.network.urma import busiest

#: from this EP size on, a kernel's hundreds of solves over ~R^2 flows repay compiling the
#: engine's loops before the first one (speed only; same results)
COMPILED_FROM_RANKS = 32


def new_network(spec, batch_window_ns: float,
                compiled: bool | None = None) -> tuple[simpy.Environment, FlowNetwork]:
    """A fresh clock and the supernode's network on it, its engine compiled if ``compiled``
    (None: from ``COMPILED_FROM_RANKS`` on; a member that solves a few times says False)."""
    env = simpy.Environment()
    net = FlowNetwork(env, spec, batch_window_ns=batch_window_ns)
    if compiled or (compiled is None and spec.num_ranks >= COMPILED_FROM_RANKS):
        net.share.compile_now()
    return env, net


def rank_hbm(net: FlowNetwork, chip) -> np.ndarray:
    """Share ids of every rank's HBM (``rankR.hbm``, the chip's bandwidth and arbitration)."""
    R = net.spec.num_ranks
    return np.asarray(net.share.add_resources(
        [f"rank{r}.hbm" for r in range(R)], [chip.memory.hbm_bandwidth_GBps] * R,
        "fcfs" if chip.memory.hbm_arbitration == "fcfs" else "fair"), dtype=np.int64)


class EPKernel:
    """Dispatch or combine of one member on every rank; see the module docstring."""

    def __init__(self, topology, plan, costs, *, batch_window_ns: float = 0.0, tracer=None,
                 on_progress=None, name: str = ""):
        """``tracer``: an ``simnode.ep.trace.EPTracer`` or None; ``on_progress(simulated_ns,
        bound_ns)`` is called after every rate solve; ``name`` tells this instance's barriers
        from other instances' on a shared clock (e.g. "mb0.dispatch"), the kind if empty."""
        self.topo, self.spec, self.chip = topology, topology.supernode, topology.chip
        self.plan, self.costs, self.name = plan, costs, name
        self.batch_window_ns, self.tracer, self.on_progress = batch_window_ns, tracer, on_progress
        self.payload_sent = 0.0       #: payload bytes its messages carried (conservation)

    # -- what a member gives -----------------------------------------------------------------
    def build(self) -> None:
        """A fresh clock and network with the member's resources on it, then ``attach``."""
        raise NotImplementedError

    def prepare(self, kind: str) -> None:
        """Resources and per-row costs that only ``kind`` needs (after ``build``)."""

    def dispatch_rank(self, r: int, t: RankTimes):
        raise NotImplementedError

    def combine_rank(self, r: int, t: RankTimes):
        raise NotImplementedError

    def chip_groups(self) -> list:
        """[(name, share ids per rank)] of the chip resources the result reports."""
        raise NotImplementedError

    def entry(self, kind: str, rank: int, t: RankTimes):
        """What a kernel does after its launch before its own work (nothing by default)."""
        return
        yield

    def exit(self, kind: str, rank: int, t: RankTimes):
        """What a kernel does after its own work (nothing by default)."""
        return
        yield

    # -- shared mechanisms ---------------------------------------------------------------------
    def attach(self, env: simpy.Environment, net: FlowNetwork, max_latency_ns: float) -> None:
        """Post on ``env`` and ``net`` from now on; ``max_latency_ns``: the one-way latency of
        the farthest pair (a barrier's last store). Barrier and byte accounting start afresh."""
        R = self.spec.num_ranks
        self.env, self.net, self.max_latency_ns = env, net, max_latency_ns
        self.arrivals: dict = {}
        self.groups: list = []        # groups of messages, kept for the trace only
        self.payload_sent = 0.0
        self.barrier_wait_ns = np.zeros(R)   #: per rank: time its barriers waited for others
        self.entry_wait_ns = np.zeros(R)     #: ... of which at the entry barrier

    def barrier(self, name: str, rank: int, work_ns: float):
        """Cross-rank barrier: ``work_ns`` of issuing (remote stores, polling), then wait until
        every rank has issued its own and the last one has travelled the farthest path."""
        env = self.env
        yield env.timeout(work_ns)
        everyone = self.arrive(name, self.spec.num_ranks)
        arrived = env.now
        yield everyone
        wait = env.now - arrived                           # waiting for slower ranks
        self.barrier_wait_ns[rank] += wait
        self.entry_wait_ns[rank] += wait if name.endswith(".entry") else 0.0
        yield env.timeout(self.max_latency_ns)

    def arrive(self, name: str, expected: int):
        """Count one arrival at ``name`` (a barrier, a status flag's counter): the event, the
        same for every caller, fires once ``expected`` arrivals have come."""
        state = self.arrivals.setdefault(name, [0, self.env.event()])
        state[0] += 1
        if state[0] == expected:
            state[1].succeed()
        return state[1]

    def kernel_start(self, kind: str, rank: int, t: RankTimes):
        """The kernel's launch (``costs.kernel_launch_ns``), then the member's ``entry``."""
        t.start_ns = self.env.now
        yield self.env.timeout(self.costs.kernel_launch_ns)
        yield from self.entry(kind, rank, t)

    def kernel_end(self, kind: str, rank: int, t: RankTimes):
        """The member's ``exit``; the kernel ends on that rank."""
        yield from self.exit(kind, rank, t)
        t.end_ns = self.env.now

    def post(self, group):
        """``group`` (messages tagged (src, dst)), kept for the trace if one is written."""
        if self.tracer is not None:
            self.groups.append(group)
        return group

    def local_work(self, rows, units):
        """Work with no network part, one transfer per row of ``rows`` (resources) and
        ``units`` (work on each; a single row may be given as tuples): its 'size' is the
        row's largest unit count, its weights each resource's units per unit of size."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, np.shape(rows)[-1] if np.ndim(rows) else 1)
        units = np.asarray(units, dtype=float).reshape(rows.shape)
        size = units.max(axis=1) if units.size else np.zeros(rows.shape[0])
        weights = units / np.where(size > 0, size, 1.0)[:, None]
        return self.net.share.start_group(size, rows, weights, np.full(size.shape, np.inf), 0.0)

    # -- the run -------------------------------------------------------------------------------
    def run(self, kind: str) -> PhaseRun:
        self.build()
        self.prepare(kind)
        R = self.spec.num_ranks
        times = [RankTimes() for _ in range(R)]
        body = self.dispatch_rank if kind == "dispatch" else self.combine_rank
        messages = []
        if self.tracer is not None:
            self.net.share.on_served = lambda tr: messages.append(
                (tr.src, tr.dst, tr.start_ns, tr.served_ns + tr.latency_ns)) if tr.src is not None else None
        if self.on_progress is not None:
            bound = analytical_bound_ns(self.plan.traffic(kind), self.net.routes)
            self.net.share.on_rates = lambda now, _rates: self.on_progress(now, bound)
        procs = [self.env.process(body(r, times[r])) for r in range(R)]
        self.env.run()
        if not all(pr.triggered for pr in procs):
            raise RuntimeError(f"{kind}: ranks did not finish (a barrier never completed)")
        if self.tracer is not None:
            for g in self.groups:
                messages += [(int(a), int(b), g.start_ns, float(t)) for a, b, t in
                             zip(g.tag[0], g.tag[1], g.arrival_ns)]
            self.tracer.record(kind, self, times, sorted(messages))
        return self.result(kind, times)

    def result(self, kind: str, times: list) -> PhaseRun:
        plan, net = self.plan, self.net
        traffic = plan.traffic(kind)
        if not math.isclose(self.payload_sent, float(traffic.sum()), rel_tol=1e-9):
            raise RuntimeError(f"{kind}: conservation violated: {self.payload_sent} payload bytes "
                               f"sent over the network, {traffic.sum()} planned")
        net.share.sync()
        horizon = max(tt.end_ns for tt in times)
        util, busiest_of = busiest(net, self.chip_groups(), horizon)
        return PhaseRun(kind, times, plan.received(), plan.received(include_self=False),
                        plan.counted_row_bytes(kind), float(net.port_bytes().sum()),
                        float(traffic.sum()), analytical_bound_ns(traffic, net.routes),
                        net.hottest_links(5), util, busiest_of, net.share.recomputes,
                        net.share.transfers_started)
