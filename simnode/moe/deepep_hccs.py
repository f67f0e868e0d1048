"""DeepEP-Ascend's normal kernels on Atlas A3 (910C) over HCCS memory semantics, on the flow network.

The SGLang community's DeepEP for A2/A3 (sgl-project/sgl-kernel-npu, facts 1.6 / S12; the
kernels as of the README's A3 figures, docs/sources.md X7) moves tokens with the AI vector
cores' own copies to and from other dies' memory windows, not with URMA work requests:

- dispatch (``cam_moe_dispatch_normal``) sends one record per (token, expert), not per
  (token, rank). Each of the die's AIVs takes an equal share of the rank's token x top-k
  pairs and, one after another, reads the BF16 row (MTE2), quantizes it to INT8 in the
  vector unit and writes the record (row, scale, source triple) into its *own* window
  (MTE3). It then sets a status flag at every expert's owner, waits until every source
  has flagged its own experts, and *pulls*: each AIV owns E / AIVs of the rank's
  (local expert, source rank) segments and reads their records from the source's window
  one at a time (one MTE2 in flight: the next read waits for the last), writing each into
  the expert-major output. The call also runs a count exchange kernel (``notify_dispatch``)
  and host work between the kernels (device-to-host copies and loops, ``host_ns``).
- combine (``cam_moe_combine_normal``) *pushes*: each AIV takes a contiguous share of the
  rank's received rows and, one after another, reads a row (MTE2) and writes it into its
  source rank's window (MTE3), waits for all pipes (``PipeBarrier<PIPE_ALL>``) and sets a
  flag; then each AIV takes an equal share of its own tokens, waits for their top-k flags,
  reads the k rows and sums them weighted.

So a remote record costs one AIV a round trip on the path plus the copy, serially, and each
AIV walks its own list of peers in a fixed order. Each AIV is modeled as such a chain: one
flow per (peer, records) piece of its list, in order, the next started when the last has
arrived; the flow puts its bytes on the links and both HBMs and holds the AIV
(``rankR.aivA_<phase>``, 1 ns per ns) for the pieces' serial time, so it runs at most at
the AIV's own rate (``HccsCosts``: the chip's copy paths and vector rate, the path's round
trip, and the unknown costs of a remote access, ``remote_read_ns`` and ``remote_write_ns``)
and shares the links with every other AIV's flow.

Why the bandwidth falls with EP (the mechanism behind S12's trend): the kernels' splits do
not depend on the rank. Dispatch gives AIV a the statuses [a E/48, (a+1) E/48) on every
rank, status i being (expert i // R, source i % R), so at any moment AIV a of *every* rank
reads the same source: at most 48 of the R sources are read at once (fewer where two AIVs'
lists coincide: 41 of 64 at EP64, 45 of 128 at EP128 at the start; all 8 at EP8), each by
R readers per AIV on it, and the status barrier just before aligns them. A die serves
other dies' reads of its memory at a limited rate (``remote_read_GBps``, all readers
together; no published figure), so the fewer sources are busy, the less of the supernode's
read capacity a rank gets. Combine splits each rank's received rows into 48 equal shares
in the same status order, so AIV a of every rank writes to nearly the same peer too (the
shares' starts drift with each rank's own counts, which spreads the writes a little); its
writes load the peers' links. Nothing here is a per-EP factor: the EP dependence is the
count of busy peers the fixed splits leave, computed by the flows.

What-ifs, off by default, make a
remote access cost more as the peers a rank accesses grow, in the two shapes the 950's
URMA model has (a cache of peer contexts with ``peer_cache_entries`` and a miss cost, or
a cost per peer): nothing published gives either (``simnode calibrate`` fits them).

``HccsSim(topology, plan, costs).run(kind)`` returns a ``simnode.moe.deepep.PhaseRun``.
Bandwidth is the benchmark's: received expanded rows x hidden x 2 (BF16 bytes, whatever the
dispatch dtype) / call time (sgl-kernel-npu tests/python/deepep/test_intranode.py at X7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import simpy

from simnode.moe.deepep import PhaseRun, RankTimes
from simnode.network.bound import analytical_bound_ns
from simnode.network.flows import FlowNetwork
from simnode.network.urma import busiest

#: from this EP size on, compile the sharing engine's loops first (speed only)
COMPILED_FROM_RANKS = 32
#: bytes of the source triple (rank, token, k) after a record's row and scale (X7: 3 x int32)
TRIPLE_BYTES = 12
#: alignments of the kernels' buffers (X7: UB 32 B, window slots 512 B)
UB_ALIGN, WIN_ALIGN = 32, 512


@dataclass(frozen=True)
class HccsPlan:
    """Who sends what (pure: from the routing, no SimPy)."""
    num_ranks: int
    tokens_per_rank: int
    hidden: int
    top_k: int
    num_experts: int
    num_aiv: int
    quantized: bool                  #: INT8 records (else BF16 rows)
    counts: np.ndarray               #: [src, expert] (token, k) pairs of src routed to expert

    @property
    def experts_per_rank(self) -> int:
        return self.num_experts // self.num_ranks

    @property
    def record_bytes(self) -> int:
        """A dispatch record as one MTE copy moves it: the row, its scale slot, the triple."""
        row = self.hidden * (1 if self.quantized else 2)
        return _ceil(row, UB_ALIGN) + UB_ALIGN + TRIPLE_BYTES

    @property
    def row_bytes(self) -> int:
        """A BF16 row of hidden (combine)."""
        return self.hidden * 2

    def segments(self, d: int) -> list:
        """Rank d's statuses in kernel order, as (source s, records): status i is (local expert
        i // R, source i % R) (X7 deep_ep.cpp recv_count, ShareToOutput's fromRank = i % R); the
        received rows lie in this order too."""
        R, per = self.num_ranks, self.experts_per_rank
        return [(i % R, int(self.counts[i % R, d * per + i // R])) for i in range(self.num_experts)]

    def aiv_statuses(self) -> list:
        """[start, end) status indices of each AIV (X7 dispatch: E / AIVs each, the
        remainder to the first AIVs)."""
        E, A = self.num_experts, self.num_aiv
        per, rem = divmod(E, A)
        out, start = [], 0
        for a in range(A):
            n = per + (1 if a < rem else 0)
            out.append((start, start + n))
            start += n
        return out

    def aiv_pulls(self, d: int) -> list:
        """Each AIV of rank d's pulls in kernel order: [(source, records), ...] over its
        statuses (X7 ShareToOutput: status i = (local expert i // R, source i % R)). The
        split depends on the status index only, not on d: AIV a of every rank walks the same
        sources in the same order."""
        segs = self.segments(d)
        return [segs[lo:hi] for lo, hi in self.aiv_statuses()]

    def aiv_pushes(self, d: int) -> list:
        """Each AIV of rank d's pushes in kernel order: [(source, rows), ...]. Combine splits
        the rank's received rows (in receive order: status by status) into equal contiguous
        shares, the remainder one each to the first AIVs (X7 SplitCoreCal), so where a share
        starts depends on d's own counts."""
        segs = self.segments(d)
        shares = split(sum(n for _, n in segs), self.num_aiv)
        out, k, left = [], 0, segs[0][1] if segs else 0
        for want in shares:
            pieces = []
            while want > 0:
                while left == 0:
                    k += 1
                    left = segs[k][1]
                take = min(want, left)
                if pieces and pieces[-1][0] == segs[k][0]:
                    pieces[-1] = (segs[k][0], pieces[-1][1] + take)
                else:
                    pieces.append((segs[k][0], take))
                want -= take
                left -= take
            out.append(pieces)
        return out

    def recv_rows(self) -> np.ndarray:
        """Expanded rows each rank receives (its own included)."""
        per = self.experts_per_rank
        return np.array([int(self.counts[:, d * per:(d + 1) * per].sum()) for d in range(self.num_ranks)])

    def pair_rows(self) -> np.ndarray:
        """[src, dst] records src sends to dst's experts."""
        per = self.experts_per_rank
        return self.counts.reshape(self.num_ranks, self.num_ranks, per).sum(axis=2)


def _ceil(n: int, a: int) -> int:
    return -(-n // a) * a


def effective_aivs(work) -> float:
    """AIVs that, sharing the work evenly, take as long as the busiest one: total / max
    (at least a tiny positive number, so an idle pool is still a resource)."""
    work = np.asarray(work, dtype=float)
    top = float(work.max()) if work.size else 0.0
    return float(work.sum() / top) if top > 0 else 1.0


def split(total: int, parts: int) -> np.ndarray:
    """``total`` items over ``parts`` as the kernels split them: equal shares, the
    remainder one each to the first parts."""
    return np.full(parts, total // parts) + (np.arange(parts) < total % parts)


def build_hccs_plan(topk_by_rank, num_ranks: int, tokens_per_rank: int, hidden: int, top_k: int,
                    num_experts: int, num_aiv: int, quantized: bool) -> HccsPlan:
    """The plan from each rank's [tokens, top_k] expert ids (an iterable, in rank order)."""
    counts = np.zeros((num_ranks, num_experts), dtype=np.int64)
    for r, topk in enumerate(topk_by_rank):
        ids = np.asarray(topk).reshape(-1)
        counts[r] = np.bincount(ids[ids >= 0], minlength=num_experts)
    return HccsPlan(num_ranks, tokens_per_rank, hidden, top_k, num_experts, num_aiv, quantized, counts)


@dataclass(frozen=True)
class HccsCosts:
    """Software and access costs of the kernels (the workload's fields), in ns."""
    kernel_launch_ns: float          #: one kernel launch
    host_ns: float                   #: host work inside one dispatch call, between its kernels
    remote_store_ns: float           #: one round of small remote stores (flags, counts)
    quant_ops_per_element: float     #: vector ops per element to quantize a BF16 row to INT8
    reduce_ops_per_element: float    #: vector ops per element and top-k row of combine's weighted sum
    remote_read_ns: float            #: a remote MTE2 read's cost beyond the path's round trip and bytes
    remote_write_ns: float           #: a remote MTE3 write's (with its PIPE_ALL wait), likewise
    remote_read_GBps: float          #: what one die serves of other dies' reads of its memory (0: no limit)
    peer_cache_entries: int      #: what-if: peer contexts at hand (0 with a miss cost: none)
    read_miss_ns: float        #: what-if: extra per remote read whose peer is not cached
    write_miss_ns: float       #: what-if: extra per remote write whose peer is not cached
    read_ns_per_peer: float    #: what-if: extra per remote read per peer the rank accesses
    write_ns_per_peer: float   #: what-if: extra per remote write per peer the rank accesses

    def miss_fraction(self, peers: int) -> float:
        """Share of accesses whose peer misses a cache of ``peer_cache_entries`` when a rank
        accesses ``peers`` peers in an interleaved order (C / P hit whatever the policy)."""
        if peers <= 0 or (self.read_miss_ns <= 0 and self.write_miss_ns <= 0):
            return 0.0
        return max(0.0, 1.0 - self.peer_cache_entries / peers)

    def stall_ns(self, peers: int, write: bool) -> float:
        """What-if extra per remote access of a rank accessing ``peers`` peers (0 when off)."""
        miss, per = (self.write_miss_ns, self.write_ns_per_peer) if write else \
            (self.read_miss_ns, self.read_ns_per_peer)
        return self.miss_fraction(peers) * miss + max(peers, 0) * per


class HccsSim:
    """Dispatch or combine on every rank; see the module docstring."""

    def __init__(self, topology, plan: HccsPlan, costs: HccsCosts, *, batch_window_ns: float = 0.0):
        self.topo, self.spec, self.chip = topology, topology.supernode, topology.chip
        self.plan, self.costs = plan, costs
        self.batch_window_ns = batch_window_ns
        chip = self.chip
        f = chip.aic_freq_GHz
        self._mte2 = (chip.paths["gm_to_ub"].bandwidth_B_per_cycle * f,
                      chip.paths["gm_to_ub"].base_latency_cycles / f)
        self._mte3 = (chip.paths["ub_to_gm"].bandwidth_B_per_cycle * f,
                      chip.paths["ub_to_gm"].base_latency_cycles / f)
        self._vec = chip.vector.ops_per_cycle["simple"] * chip.aiv_freq_GHz
        self.payload_sent = 0.0

    # -- per-record times (ns of one AIV) ------------------------------------------------------
    def copy_ns(self, nbytes: float, pipe: str) -> float:
        rate, base = self._mte2 if pipe == "mte2" else self._mte3
        return base + nbytes / rate

    def stage_ns(self) -> float:
        """Dispatch, at the source: read a BF16 row, quantize it, write the record locally;
        the write of one record overlaps the read of the next (two UB buffers, X7)."""
        p, c = self.plan, self.costs
        read = self.copy_ns(p.row_bytes, "mte2")
        quant = c.quant_ops_per_element * p.hidden / self._vec if p.quantized else 0.0
        return max(read + quant, self.copy_ns(p.record_bytes, "mte3"))

    def pull_ns(self, s: int, d: int, peers: int) -> float:
        """Dispatch, at d: read one record from s's window (one MTE2 in flight) and write it
        out; the writes overlap the next read."""
        p = self.plan
        read = self.copy_ns(p.record_bytes, "mte2")
        write = self.copy_ns(p.record_bytes, "mte3")
        if s != d:
            read += self.rtt_ns[s, d] + self.costs.remote_read_ns + self.costs.stall_ns(peers, False)
        return max(read, write)

    def push_ns(self, d: int, s: int, peers: int) -> float:
        """Combine, at d: read a row, write it into s's window, wait for every pipe, set s's
        flag: all in series."""
        p = self.plan
        t = self.copy_ns(p.row_bytes, "mte2") + self.copy_ns(p.row_bytes, "mte3")
        if s != d:
            t += self.rtt_ns[d, s] + self.costs.remote_write_ns + self.costs.stall_ns(peers, True)
        return t

    def reduce_ns(self) -> float:
        """Combine, at the token's rank: read its k rows (the next read overlaps the sum of
        the last), weight and add them, cast and write the result."""
        p, c = self.plan, self.costs
        per_row = max(self.copy_ns(p.row_bytes, "mte2"), c.reduce_ops_per_element * p.hidden / self._vec)
        return p.top_k * per_row + p.hidden / self._vec + self.copy_ns(p.row_bytes, "mte3")

    # -- set-up ------------------------------------------------------------------------------
    def _build(self) -> None:
        spec, chip, R, A = self.spec, self.chip, self.plan.num_ranks, self.plan.num_aiv
        self.env = simpy.Environment()
        self.net = FlowNetwork(self.env, spec, batch_window_ns=self.batch_window_ns)
        share = self.net.share
        if R >= COMPILED_FROM_RANKS:
            share.compile_now()
        self.r_hbm = np.asarray(share.add_resources(
            [f"rank{r}.hbm" for r in range(R)], [chip.memory.hbm_bandwidth_GBps] * R,
            "fcfs" if chip.memory.hbm_arbitration == "fcfs" else "fair"), dtype=np.int64)
        src = np.repeat(np.arange(R), R)
        dst = np.tile(np.arange(R), R)
        one_way = self.net.latency_ns(src, dst).reshape(R, R)
        self.rtt_ns = one_way + one_way.T
        self._one_way = one_way
        ports, _ = self.net.routes.route(src, dst)
        self._paths = [tuple(int(self.net.ports[q]) for q in row if q >= 0) for row in ports]
        self.max_latency_ns = float(one_way.max()) if R > 1 else 0.0
        self.arrivals: dict = {}
        self.groups: list = []
        self.payload_sent = 0.0
        self.pools: dict = {}
        self._aivs: dict = {}

    def _aiv_resources(self, phase: str) -> None:
        """One resource per AIV of every rank for a phase of per-AIV chains (1 ns of AIV time
        per ns): ``self._aivs[phase][rank, aiv]``."""
        R, A = self.plan.num_ranks, self.plan.num_aiv
        ids = np.asarray(self.net.share.add_resources(
            [f"rank{r}.aiv{a}_{phase}" for r in range(R) for a in range(A)], [1.0] * (R * A)),
            dtype=np.int64)
        self._aivs[phase] = ids.reshape(R, A)
        self.pools[phase] = ids

    def _pool(self, phase: str, work: np.ndarray) -> np.ndarray:
        """The ranks' AIV pools of a phase, from each rank's per-AIV work [R, A] (ns): 1 ns of
        AIV time per ns and AIV, as many AIVs as ``effective_aivs``."""
        caps = [effective_aivs(w) for w in work]
        ids = np.asarray(self.net.share.add_resources(
            [f"rank{r}.aiv_{phase}" for r in range(len(caps))], caps), dtype=np.int64)
        self.pools[phase] = ids
        return ids

    def _barrier(self, name: str, work_ns: float):
        """Every rank does ``work_ns`` of remote stores, then waits for the last one's to land."""
        env = self.env
        yield env.timeout(work_ns)
        state = self.arrivals.setdefault(name, [0, env.event()])
        state[0] += 1
        if state[0] == self.plan.num_ranks:
            state[1].succeed()
        yield state[1]
        yield env.timeout(self.max_latency_ns)

    def _flows(self, src, dst, payload, aiv_rows, aiv_ns):
        """Flows of records: ``payload`` bytes src -> dst on the links and both HBMs, and
        ``aiv_ns`` of the AIV pool ``aiv_rows`` (share ids) that copies them."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        payload = np.asarray(payload, dtype=float)
        rows = np.stack([np.asarray(aiv_rows, dtype=np.int64), self.r_hbm[src], self.r_hbm[dst]], axis=1)
        units = np.stack([np.asarray(aiv_ns, dtype=float), payload, payload], axis=1)
        local = src == dst
        units[local, 2] = 0.0                     # a local copy reads and writes one HBM: count once
        units[local, 1] = 2 * payload[local]
        self.payload_sent += float(payload[~local].sum())
        group = self.net.send_many(src, dst, payload, rows, units, tag=(src, dst))
        self.groups.append(group)
        return group

    # -- dispatch ------------------------------------------------------------------------------
    def dispatch_rank(self, d: int, t: RankTimes):
        env, c, p = self.env, self.costs, self.plan
        A = p.num_aiv
        t.start_ns = env.now
        s0 = env.now
        # notify_dispatch: each AIV of the first ceil(R / 48) rounds writes a flag to its ranks
        # and reads their counts back (X7), then every rank has every rank's counts
        rounds = math.ceil(p.num_ranks / A)
        yield env.timeout(c.kernel_launch_ns)
        yield from self._barrier("notify", rounds * (c.remote_store_ns + 2 * self.max_latency_ns))
        t.mark("notify_dispatch", s0, env.now)
        s0 = env.now
        yield env.timeout(c.host_ns)
        t.mark("host", s0, env.now)
        s0 = env.now
        yield env.timeout(c.kernel_launch_ns)
        # InputToShare: every AIV stages its equal share of the token x top-k pairs locally
        pairs = p.tokens_per_rank * p.top_k
        yield self._flows([d], [d], [pairs * float(p.record_bytes)], [self.pools["stage"][d]],
                          [pairs * self.stage_ns()])
        t.mark("quantize + stage", s0, env.now)
        s0 = env.now
        # SetStatus to every expert's owner, WaitStatus for every source's
        yield from self._barrier("status", c.remote_store_ns)
        t.mark("status", s0, env.now)
        s0 = env.now
        yield self.dispatch_pulls(d)
        t.mark("pull records", s0, env.now)
        t.end_ns = env.now

    def peers(self, d: int) -> int:
        """Ranks other than d that d's records come from (and its combine rows go to)."""
        pair = self._pair[:, d].copy()
        pair[d] = 0
        return int((pair > 0).sum())

    def dispatch_pulls(self, d: int):
        """Every AIV of d pulls its segments one after another (one MTE2 in flight): an event
        when the last AIV is done."""
        return self.env.all_of([self.env.process(self._chain(d, a, pieces, "pull"))
                                for a, pieces in enumerate(self.plan.aiv_pulls(d)) if pieces])

    def _chain(self, d: int, a: int, pieces: list, phase: str):
        """AIV a of rank d moves its pieces in order, one flow per (peer, records): a pull
        reads from the peer (peer -> d), a push writes to it (d -> peer). The flow holds AIV a
        for the records' serial time (``pull_ns`` / ``push_ns`` each), so it runs at most at
        the AIV's own rate, and shares the links and HBMs with every other AIV's flow."""
        p, aiv = self.plan, int(self._aivs[phase][d, a])
        for s, n in pieces:
            if n <= 0:
                continue
            if phase == "pull":
                yield self._flow(s, d, n * float(p.record_bytes), aiv, n * self._pull[s, d],
                                 int(self._read_port[s]) if s != d and len(self._read_port) else -1)
            else:
                yield self._flow(d, s, n * float(p.row_bytes), aiv, n * self._push[d, s])

    def _flow(self, src: int, dst: int, payload: float, aiv: int, aiv_ns: float, served_by: int = -1):
        """One flow of ``_flows`` (the same resources and units), started on the share
        directly with the path looked up once per run (speed: a chain starts ~256 R of them)."""
        hs, hd = int(self.r_hbm[src]), int(self.r_hbm[dst])
        if src == dst:                            # a local copy reads and writes one HBM
            return self.net.share.start(payload, (aiv, hs), (aiv_ns / payload, 2.0))
        path = self._paths[src * self.plan.num_ranks + dst]
        wire = self.spec.wire_bytes(payload)
        self.payload_sent += payload
        extra, w = (aiv, hs, hd), (aiv_ns / wire, payload / wire, payload / wire)
        if served_by >= 0:                        # a remote read: the source die serves it
            extra, w = extra + (served_by,), w + (payload / wire,)
        return self.net.share.start(wire, path + extra, (1.0,) * len(path) + w,
                                    latency_ns=float(self._one_way[src, dst]))

    # -- combine -------------------------------------------------------------------------------
    def combine_rank(self, d: int, t: RankTimes):
        env, c, p = self.env, self.costs, self.plan
        t.start_ns = env.now
        s0 = env.now
        yield env.timeout(c.kernel_launch_ns)
        yield self.combine_pushes(d)
        t.mark("push rows", s0, env.now)
        s0 = env.now
        # every token's rows have landed once every rank has pushed its share
        yield from self._barrier("pushed", 0.0)
        t.mark("wait for rows", s0, env.now)
        s0 = env.now
        tokens = p.tokens_per_rank
        yield self._flows([d], [d], [tokens * p.top_k * float(p.row_bytes)], [self.pools["reduce"][d]],
                          [tokens * self.reduce_ns()])
        t.mark("weighted sum", s0, env.now)
        t.end_ns = env.now

    def combine_pushes(self, d: int):
        return self.env.all_of([self.env.process(self._chain(d, a, pieces, "push"))
                                for a, pieces in enumerate(self.plan.aiv_pushes(d)) if pieces])

    # -- run -----------------------------------------------------------------------------------
    def run(self, kind: str) -> PhaseRun:
        self._build()
        p = self.plan
        R, A = p.num_ranks, p.num_aiv
        self._pair = p.pair_rows()
        peers = [self.peers(d) for d in range(R)]
        if kind == "dispatch":
            # per-record pull time [s, d] (the peers are the puller's, d's)
            self._pull = np.array([[self.pull_ns(s, d, peers[d]) for d in range(R)] for s in range(R)])
            self._pool("stage", np.tile(split(p.tokens_per_rank * p.top_k, A) * self.stage_ns(), (R, 1)))
            self._aiv_resources("pull")
            self._read_port = np.zeros(0, dtype=np.int64)
            if self.costs.remote_read_GBps > 0:
                self._read_port = np.asarray(self.net.share.add_resources(
                    [f"rank{r}.read_serve" for r in range(R)], [self.costs.remote_read_GBps] * R),
                    dtype=np.int64)
                self.pools["read_serve"] = self._read_port
        else:
            self._push = np.array([[self.push_ns(d, s, peers[d]) for s in range(R)] for d in range(R)])
            self._aiv_resources("push")
            self._pool("reduce", np.tile(split(p.tokens_per_rank, A) * self.reduce_ns(), (R, 1)))
        times = [RankTimes() for _ in range(R)]
        body = self.dispatch_rank if kind == "dispatch" else self.combine_rank
        procs = [self.env.process(body(r, times[r])) for r in range(R)]
        self.env.run()
        if not all(pr.triggered for pr in procs):
            raise RuntimeError(f"{kind}: ranks did not finish (a barrier never completed)")
        return self._result(kind, times)

    def _traffic(self, kind: str) -> np.ndarray:
        p = self.plan
        pair = p.pair_rows()
        traffic = pair * float(p.record_bytes) if kind == "dispatch" else pair.T * float(p.row_bytes)
        np.fill_diagonal(traffic, 0)
        return traffic

    def _result(self, kind: str, times: list) -> PhaseRun:
        p, net = self.plan, self.net
        traffic = self._traffic(kind)
        if not math.isclose(self.payload_sent, float(traffic.sum()), rel_tol=1e-9):
            raise RuntimeError(f"{kind}: conservation violated: {self.payload_sent} remote bytes "
                               f"moved, {traffic.sum()} planned")
        net.share.sync()
        recv = p.recv_rows()
        remote = recv - np.diag(p.pair_rows())
        horizon = max(tt.end_ns for tt in times)
        groups = [("hbm", self.r_hbm)] + [(k if k == "read_serve" else f"aiv_{k}", ids)
                                          for k, ids in self.pools.items()]
        util, busiest_of = busiest(net, groups, horizon)
        return PhaseRun(kind, times, recv, remote, p.row_bytes, float(net.port_bytes().sum()),
                        float(traffic.sum()), analytical_bound_ns(traffic, net.routes),
                        net.hottest_links(5), util, busiest_of, net.share.recomputes,
                        net.share.transfers_started)
