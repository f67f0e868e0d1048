"""Workload kind ``transport``: put microbenchmarks on the supernode (p2p, ring, all-to-all).

The probe that separates the transport from the software above it, like nccl-tests'
alltoall or the HCCS/UB transport benchmark of S13 (facts 0): every sending rank posts
one train of ``messages_per_peer`` put WQEs to each peer of the pattern at once, rings
one doorbell, and is done when every put is complete: its last byte has landed and
the acknowledgement has travelled back (a reliable write completes on the ack). The
puts go through the same URMA engine and HBM model as DeepEP
(``simnode.network.urma``), so per-message engine costs, headers, latencies and link
sharing are the ones DeepEP's trains see, without DeepEP's kernel phases.

Patterns: ``p2p`` (rank ``p2p_src`` to rank ``p2p_dst`` only), ``ring`` (r to r + 1) and
``alltoall`` (every rank to every other). The result reports ``transport_ns`` (the
slowest sender, as S13 and nccl-tests time an iteration), ``transport_GBps`` (payload
per sending rank / time), ``aggregate_GBps`` (all payload / time), the rank's port
payload limit and the share of it reached, the analytical bound and the hottest links.
"""

from __future__ import annotations

import math
from itertools import chain

import numpy as np
import simpy

from simnode import units
from simnode.errors import ConfigError
from simnode.ep import fields
from simnode.ep.phase import RankTimes
from simnode.ep.size import check_pairs, with_num_ranks
from simnode.ep.trace import EPTracer
from simnode.network.bound import analytical_bound_ns
from simnode.network.flows import FlowNetwork
from simnode.network.urma import RankEndpoints, busiest
from simnode.report.result import KernelRecord, Result, fig
from simnode.workloads.registry import Field, Reference, WorkloadKind
from simnode.workloads.supernode import link_series, link_util

PATTERNS = ("p2p", "ring", "alltoall")
# a put WQE: 48 B header + one 16 B SGE = one 64 B WQEBB (facts 4.2 step 4's SQE layout)
PUT_WQEBBS = 1
#: the most put WQEs per (sender, peer): their engine time is one number per train, so this
#: bounds no memory, only a WQE count that no transport benchmark approaches (S13 posts 1)
MAX_MESSAGES_PER_PEER = 2 ** 30

FIELDS = (
    Field("pattern", "str", "alltoall", "who sends to whom", PATTERNS),
    fields.NUM_RANKS,
    Field("bytes_per_peer", "int", 32 * 2**20, "payload bytes each sender puts to each of its peers",
          min_value=1, unit="B"),
    Field("messages_per_peer", "int", 1, "put WQEs the bytes to one peer are split into", min_value=1,
          unit="WQEs", max_value=MAX_MESSAGES_PER_PEER),
    Field("p2p_src", "int", 0, "p2p: the sending rank", min_value=0, unit="1"),
    Field("p2p_dst", "int", 1, "p2p: the receiving rank", min_value=0, unit="1"),
    fields.BATCH_WINDOW_NS,
)


def peers_of(pattern: str, num_ranks: int, p2p_src: int = 0, p2p_dst: int = 1) -> list[list[int]]:
    """The ranks each rank sends to, per rank (empty for a rank that does not send)."""
    R = num_ranks
    if pattern == "p2p":
        return [[p2p_dst] if r == p2p_src else [] for r in range(R)]
    if pattern == "ring":
        return [[(r + 1) % R] for r in range(R)]
    return [list(range(r)) + list(range(r + 1, R)) for r in range(R)]   # every d != r, in order


def check(topology, params, source: str = "workload"):
    """The topology at the workload's num_ranks; p2p ranks must exist and differ."""
    topology = with_num_ranks(topology, params["num_ranks"], "transport", source)
    R = topology.supernode.num_ranks
    pairs = {"p2p": 1, "ring": R}.get(params["pattern"], R * (R - 1))
    check_pairs(pairs, R, source if params["num_ranks"] else topology.source,
                "num_ranks" if params["num_ranks"] else "supernode.num_ranks")
    if params["pattern"] == "p2p":
        for key in ("p2p_src", "p2p_dst"):
            if params[key] >= R:
                raise ConfigError(source, key, params[key], f"a rank in 0..{R - 1} ({R} ranks)")
        if params["p2p_src"] == params["p2p_dst"]:
            raise ConfigError(source, "p2p_dst", params["p2p_dst"],
                              f"a rank other than p2p_src ({params['p2p_src']}): a put to itself "
                              f"never reaches the network")
    return topology


def cost(topology, params: dict) -> float:
    """Seconds of one core: ~0.4 s plus the flows, one per (sender, peer), ~flows^1.4 as
    DeepEP's (an 8-rank all-to-all ~0.4 s, 128 ranks ~1 s)."""
    ranks = params["num_ranks"] or topology.supernode.num_ranks
    flows = {"p2p": 1, "ring": ranks}.get(params["pattern"], ranks * (ranks - 1))
    return 0.4 + 1.2e-6 * flows ** 1.4


REFERENCE = Reference("an 8-rank all-to-all", 0.4)


class TransportSim:
    """One run of the pattern on every rank; see the module docstring."""

    def __init__(self, topology, peers: list[list[int]], bytes_per_peer: int, messages_per_peer: int,
                 batch_window_ns: float = 0.0, tracer=None):
        self.spec, self.chip, self.peers = topology.supernode, topology.chip, peers
        self.bytes_per_peer, self.wqes = bytes_per_peer, messages_per_peer
        self.batch_window_ns, self.tracer = batch_window_ns, tracer

    def _ranks(self, senders: list, times: dict, pairs: tuple):
        """Every sending rank at once (they all start at 0 and ring their doorbell after the
        same time): one group of the trains of all of them (the share sees the same
        transfers, rows and solves as with a group per rank; posting them together saves a
        group's bookkeeping per rank), each rank done when its own puts are acknowledged."""
        env = self.env
        for r in senders:
            times[r].start_ns = env.now
        yield env.timeout(self.spec.doorbell_ns)            # one doorbell after posting the WQEs
        s = env.now
        for r in senders:
            times[r].mark("doorbell", times[r].start_ns, s)
        # one train of puts per peer; each is complete when its last byte has landed and the
        # acknowledgement has travelled back (a reliable write completes on the ack)
        src, dst, counts = pairs                            # (``_pairs``)
        group = self.ends.send_many(src, dst, np.full(dst.shape, float(self.bytes_per_peer)),
                                    self.wqes * PUT_WQEBBS * self.spec.wqebb_bytes, self.wqes,
                                    np.repeat(counts, counts), tag=(src, dst))
        self.groups.append(group)
        yield group
        acked = group.arrival_ns + self.net.latency_ns(dst, src)
        ends = np.maximum.reduceat(acked, np.cumsum(counts) - counts).tolist()
        for r, end in zip(senders, ends):
            times[r].mark("puts (transfer + ack)", s, end)
            times[r].end_ns = end
        yield env.timeout(max(ends) - env.now)

    def _pairs(self, senders: list):
        """(source, destination) rank of every put, sender by sender, each sender's peers in
        order, and each sender's count (arrays)."""
        counts = np.fromiter(map(len, (self.peers[r] for r in senders)), np.int64, len(senders))
        dst = np.fromiter(chain.from_iterable(self.peers[r] for r in senders), np.int64,
                          int(counts.sum()))
        return np.repeat(np.asarray(senders, dtype=np.int64), counts), dst, counts

    def run(self) -> dict:
        self.env = simpy.Environment()
        self.net = FlowNetwork(self.env, self.spec, batch_window_ns=self.batch_window_ns)
        self.ends = RankEndpoints(self.net, self.chip.memory.hbm_bandwidth_GBps,
                                  self.chip.memory.hbm_arbitration == "fcfs")
        self.groups = []
        senders = [r for r, p in enumerate(self.peers) if p]
        times = {r: RankTimes() for r in senders}
        pairs = self._pairs(senders)
        if senders:
            self.env.process(self._ranks(senders, times, pairs))
        self.env.run()
        if self.tracer is not None:
            messages = sorted((int(a), int(b), g.start_ns, float(t)) for g in self.groups
                              for a, b, t in zip(g.tag[0], g.tag[1], g.arrival_ns))
            self.tracer.record("transport", self, [times.get(r, RankTimes()) for r in range(len(self.peers))],
                               messages)
        R = len(self.peers)
        traffic = np.zeros((R, R))
        src, dst, _ = pairs
        traffic[src, dst] = self.bytes_per_peer
        if not math.isclose(self.net.payload_bytes_sent, float(traffic.sum()), rel_tol=1e-9):
            raise RuntimeError(f"transport: conservation violated: {self.net.payload_bytes_sent} payload "
                               f"bytes sent, {traffic.sum()} planned")
        horizon = max(times[r].end_ns for r in senders)
        chip_util, chip_busiest = busiest(self.net, self.ends.groups(), horizon)
        return {"rank_ns": np.array([times[r].end_ns - times[r].start_ns for r in senders]),
                "phases": times[senders[0]].phases, "traffic": traffic,
                "wire_bytes": float(self.net.port_bytes().sum()),
                "bound_ns": analytical_bound_ns(traffic, self.net.routes),
                "hottest": self.net.hottest_links(5), "chip_util": chip_util,
                "chip_busiest": chip_busiest, "recomputes": self.net.share.recomputes,
                "util": link_util(self.net)}


def run(topology, params: dict, options=None, name: str = "transport"):
    topology = check(topology, params)
    spec = topology.supernode
    peers = peers_of(params["pattern"], spec.num_ranks, params["p2p_src"], params["p2p_dst"])
    tracer = EPTracer.open(options, thread="transport")
    try:
        out = TransportSim(topology, peers, params["bytes_per_peer"], params["messages_per_peer"],
                           params["batch_window_ns"], tracer).run()
    finally:
        if tracer is not None:
            tracer.close()
    return _result(name, spec, params, peers, out)


def _result(name, spec, params, peers, out) -> Result:
    t_ns = float(out["rank_ns"].max())
    senders = sum(1 for p in peers if p)
    total = float(out["traffic"].sum())
    limit = spec.ports_per_rank * spec.port_bandwidth_GBps * spec.payload_efficiency
    per_rank = total / senders / t_ns
    hottest = out["hottest"]
    cands = [(u, f"link {n}") for n, _, u in hottest[:1]]
    cands += [(u, out["chip_busiest"][res]) for res, u in out["chip_util"].items()]
    # the busiest, ties (equal to float noise) to the first in order: links, then chip resources
    util, label = max(cands, key=lambda c: round(c[0], 9))
    figures = (
        fig("num_ranks", spec.num_ranks, "ranks", "ranks of the supernode"),
        fig("pattern", params["pattern"], "", "who sends to whom"),
        fig("senders", senders, "ranks", "ranks that send"),
        fig("bytes_per_peer", params["bytes_per_peer"], "B", "payload each sender puts to each peer"),
        fig("messages_per_peer", params["messages_per_peer"], "WQEs", "puts each peer's bytes are split into"),
        fig("byte_convention", "payload bytes put / time of the slowest sender (headers and acks not counted)",
            "", "how transport_GBps counts bytes"),
        fig("aggregate_GBps", total / t_ns, doc="all payload / time", headline=True),
        fig("port_payload_limit_GBps", limit, doc="what a rank's ports carry of payload", headline=True),
        # the chip's URMA ceiling per direction, if the topology sets one (0 = none)
        fig("urma_payload_limit_GBps", spec.urma_payload_GBps, doc="the rank's URMA ceiling (0 = none)",
            headline=True),
        fig("hbm_util_frac", out["chip_util"]["hbm"], doc="the busiest rank's HBM busy share"))
    kernel = KernelRecord("transport", t_ns, out["bound_ns"], label, util, (
        fig("GBps", per_rank, "GB/s", "payload per sending rank / time (byte_convention)", headline=True),
        fig("frac_of_port_limit", per_rank / limit, "fraction", "GBps / port_payload_limit_GBps"),
        fig("frac_of_rank_limit", per_rank / min(limit, spec.urma_payload_GBps or limit), "fraction",
            "GBps / the lower of the port and URMA limits"),
        fig("wire_bytes", out["wire_bytes"], "B", "bytes on the wire, headers included"),
        fig("phases_us", {n: round(units.ns_to_us(b - a), 3) for n, (a, b) in out["phases"].items()}, "us",
            "the first sender's phases"),
        fig("hottest_links", [{"link": n, "bytes": b, "util_frac": round(u, 4)} for n, b, u in hottest], "",
            "the busiest links: bytes and busy fraction of the run"),
        fig("chip_util_frac", out["chip_util"], "fraction", "busy share of the busiest rank's chip resources"),
        fig("chip_busiest", out["chip_busiest"], "", "which rank's resource that is"),
        fig("solver_recomputes", out["recomputes"], "solves", "rate solves of the flow network")))
    return Result(name, "transport", t_ns, label, (kernel,), figures,
                  tuple(link_series("transport", out["util"])), roofline_ns=out["bound_ns"])


KIND = WorkloadKind("transport", FIELDS, run, "put microbenchmark (p2p, ring, all-to-all) on a supernode",
                             needs_supernode=True, check=check, cost=cost, reference=REFERENCE)
