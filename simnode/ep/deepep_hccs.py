"""The EP family's A3 member: DeepEP-Ascend's normal kernels on Atlas A3 (910C) over HCCS.

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
AIV walks its own list of peers in a fixed order. Each AIV is modeled as such a chain
(``simnode.ep.aiv``): one flow per (peer, records) piece of its list, in order, the next
started when the last has arrived; the flow puts its bytes on the links and both HBMs and
holds the AIV (``rankR.aivA_<phase>``, 1 ns per ns) for the pieces' serial time, so it runs
at most at the AIV's own rate (``HccsCosts``: the chip's copy paths and vector rate, the
path's round trip, and the unknown costs of a remote access, ``remote_read_ns`` and
``remote_write_ns``, declared once for every member on this path: ``fields.AivWindowCosts``)
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

What-ifs, off by default, make a remote access cost more as the peers a rank accesses
grow, in the two shapes the 950's URMA model has (a cache of peer contexts with
``peer_cache_entries`` and a miss cost, or a cost per peer): nothing published gives either
(``simnode calibrate`` fits them).

``HccsSim(topology, plan, costs).run(kind)`` returns a ``simnode.ep.phase.PhaseRun``.
Bandwidth is the benchmark's: received expanded rows x hidden x 2 (BF16 bytes, whatever the
dispatch dtype) / call time (sgl-kernel-npu tests/python/deepep/test_intranode.py at X7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from simnode.config.params import param
from simnode.ep.aiv import AivCopies, split
from simnode.ep.fields import AivWindowCosts
from simnode.ep.kernel import EPKernel, new_network, rank_hbm
from simnode.ep.phase import TrafficPlan

#: bytes of the source triple (rank, token, k) after a record's row and scale (X7: 3 x int32)
TRIPLE_BYTES = 12
#: alignments of the kernels' buffers (X7: UB 32 B, window slots 512 B)
UB_ALIGN, WIN_ALIGN = 32, 512
#: dispatch dtypes the A3 kernels move (910C has no FP8: X7 quantizes to INT8)
DISPATCH_DTYPES = ("int8", "bf16")


@dataclass(frozen=True)
class HccsPlan(TrafficPlan):
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

    @cached_property
    def pair(self) -> np.ndarray:
        """[src, dst] records src sends to dst's experts."""
        per = self.experts_per_rank
        return self.counts.reshape(self.num_ranks, self.num_ranks, per).sum(axis=2)

    def wire_row_bytes(self, kind: str) -> float:
        return float(self.record_bytes if kind == "dispatch" else self.row_bytes)

    def counted_row_bytes(self, kind: str) -> int:
        """The benchmark counts a BF16 row per received record, whatever the dtype (X7)."""
        return self.row_bytes

    def segments(self, d: int) -> list:
        """Rank d's statuses in kernel order, as (source s, records): status i is (local expert
        i // R, source i % R) (X7 deep_ep.cpp recv_count, ShareToOutput's fromRank = i % R); the
        received rows lie in this order too."""
        R, per = self.num_ranks, self.experts_per_rank
        return [(i % R, int(self.counts[i % R, d * per + i // R])) for i in range(self.num_experts)]

    def aiv_statuses(self) -> list:
        """[start, end) status indices of each AIV (X7 dispatch: E / AIVs each, the
        remainder to the first AIVs)."""
        ends = np.cumsum(split(self.num_experts, self.num_aiv)).tolist()
        return list(zip([0] + ends[:-1], ends))

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


def _ceil(n: int, a: int) -> int:
    return -(-n // a) * a


def build_hccs_plan(topk_by_rank, num_ranks: int, tokens_per_rank: int, hidden: int, top_k: int,
                    num_experts: int, num_aiv: int, quantized: bool) -> HccsPlan:
    """The plan from each rank's [tokens, top_k] expert ids (an iterable, in rank order)."""
    counts = np.zeros((num_ranks, num_experts), dtype=np.int64)
    for r, topk in enumerate(topk_by_rank):
        ids = np.asarray(topk).reshape(-1)
        counts[r] = np.bincount(ids[ids >= 0], minlength=num_experts)
    return HccsPlan(num_ranks, tokens_per_rank, hidden, top_k, num_experts, num_aiv, quantized, counts)


@dataclass(frozen=True)
class HccsCosts(AivWindowCosts):
    """Software and access costs of the kernels (the deepep_hccs kind's fields), in ns: the
    family's (``fields.AivWindowCosts``) and the host work of a dispatch call;
    ``reduce_ops_per_element``: per element and top-k row of combine's weighted sum."""
    host_ns: float = param(0.0, "host work inside one dispatch call, between its kernels "
                           "(0 = none)", min=0, origin="")


class HccsSim(AivCopies, EPKernel):
    """Dispatch or combine on every rank; see the module docstring."""

    # -- per-record times (ns of one AIV) ------------------------------------------------------
    def stage_ns(self) -> float:
        """Dispatch, at the source: read a BF16 row, quantize it, write the record locally;
        the write of one record overlaps the read of the next (two UB buffers, X7)."""
        p, c = self.plan, self.costs
        read = self.copy_ns(p.row_bytes, "mte2")
        quant = c.quant_ops_per_element * p.hidden / self.vec_ops_per_ns if p.quantized else 0.0
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
        p, c, vec = self.plan, self.costs, self.vec_ops_per_ns
        per_row = max(self.copy_ns(p.row_bytes, "mte2"), c.reduce_ops_per_element * p.hidden / vec)
        return p.top_k * per_row + p.hidden / vec + self.copy_ns(p.row_bytes, "mte3")

    def peers(self, d: int) -> int:
        """Ranks other than d that d's records come from (and its combine rows go to)."""
        pair = self.plan.pair[:, d].copy()
        pair[d] = 0
        return int((pair > 0).sum())

    # -- set-up ------------------------------------------------------------------------------
    def build(self) -> None:
        env, net = new_network(self.spec, self.batch_window_ns)
        self.r_hbm = rank_hbm(net, self.chip)
        self.attach(env, net, self.start_copies(net))

    def prepare(self, kind: str) -> None:
        p = self.plan
        R, A = p.num_ranks, p.num_aiv
        peers = [self.peers(d) for d in range(R)]
        if kind == "dispatch":
            # per-record pull time [s, d] (the peers are the puller's, d's)
            self._pull = np.array([[self.pull_ns(s, d, peers[d]) for d in range(R)] for s in range(R)])
            self.aiv_pool("stage", np.tile(split(p.tokens_per_rank * p.top_k, A) * self.stage_ns(), (R, 1)))
            self._pullers = self.aiv_resources("pull")
            self._read_port = np.zeros(0, dtype=np.int64)
            if self.costs.remote_read_GBps > 0:
                self._read_port = np.asarray(self.net.share.add_resources(
                    [f"rank{r}.read_serve" for r in range(R)], [self.costs.remote_read_GBps] * R),
                    dtype=np.int64)
                self.pools["read_serve"] = self._read_port
        else:
            self._push = np.array([[self.push_ns(d, s, peers[d]) for s in range(R)] for d in range(R)])
            self._pushers = self.aiv_resources("push")
            self.aiv_pool("reduce", np.tile(split(p.tokens_per_rank, A) * self.reduce_ns(), (R, 1)))

    def chip_groups(self) -> list:
        return [("hbm", self.r_hbm)] + [(k if k == "read_serve" else f"aiv_{k}", ids)
                                        for k, ids in self.pools.items()]

    # -- dispatch ------------------------------------------------------------------------------
    def dispatch_rank(self, d: int, t):
        env, c, p = self.env, self.costs, self.plan
        yield from self.kernel_start("dispatch", d, t)
        # notify_dispatch: each AIV of the first ceil(R / 48) rounds writes a flag to its ranks
        # and reads their counts back (X7), then every rank has every rank's counts
        rounds = math.ceil(p.num_ranks / p.num_aiv)
        yield from self.barrier("notify", d, rounds * (c.remote_store_ns + 2 * self.max_latency_ns))
        t.mark("notify_dispatch", t.start_ns, env.now)
        s0 = env.now
        yield env.timeout(c.host_ns)
        t.mark("host", s0, env.now)
        s0 = env.now
        yield env.timeout(c.kernel_launch_ns)
        # InputToShare: every AIV stages its equal share of the token x top-k pairs locally
        pairs = p.tokens_per_rank * p.top_k
        yield self.copy_flows([d], [d], [pairs * float(p.record_bytes)], [self.pools["stage"][d]],
                              [pairs * self.stage_ns()])
        t.mark("quantize + stage", s0, env.now)
        s0 = env.now
        # SetStatus to every expert's owner, WaitStatus for every source's
        yield from self.barrier("status", d, c.remote_store_ns)
        t.mark("status", s0, env.now)
        s0 = env.now
        yield self.dispatch_pulls(d)
        t.mark("pull records", s0, env.now)
        yield from self.kernel_end("dispatch", d, t)

    def dispatch_pulls(self, d: int):
        """Every AIV of d pulls its segments one after another (one MTE2 in flight): an event
        when the last AIV is done."""
        aivs, row = self._pullers, float(self.plan.record_bytes)
        return self.env.all_of([
            self.env.process(self.chain(d, int(aivs[d, a]), pieces, row, self._pull[:, d],
                                        pull=True, read_ports=self._read_port))
            for a, pieces in enumerate(self.plan.aiv_pulls(d)) if pieces])

    # -- combine -------------------------------------------------------------------------------
    def combine_rank(self, d: int, t):
        env, p = self.env, self.plan
        yield from self.kernel_start("combine", d, t)
        yield self.combine_pushes(d)
        t.mark("push rows", t.start_ns, env.now)
        s0 = env.now
        # every token's rows have landed once every rank has pushed its share
        yield from self.barrier("pushed", d, 0.0)
        t.mark("wait for rows", s0, env.now)
        s0 = env.now
        tokens = p.tokens_per_rank
        yield self.copy_flows([d], [d], [tokens * p.top_k * float(p.row_bytes)],
                              [self.pools["reduce"][d]], [tokens * self.reduce_ns()])
        t.mark("weighted sum", s0, env.now)
        yield from self.kernel_end("combine", d, t)

    def combine_pushes(self, d: int):
        aivs, row = self._pushers, float(self.plan.row_bytes)
        return self.env.all_of([
            self.env.process(self.chain(d, int(aivs[d, a]), pieces, row, self._push[d]))
            for a, pieces in enumerate(self.plan.aiv_pushes(d)) if pieces])
