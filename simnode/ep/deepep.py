"""The EP family's 950 member: DeepEP-Ascend's normal kernels over URMA (facts 4).

``DeepEPSim(topology, plan, costs, ...)`` (a ``simnode.ep.kernel.EPKernel``) runs one
kernel (``run("dispatch")`` or ``run("combine")``) on every rank at once and returns a
``PhaseRun``: each rank's kernel time and phase times, bytes, the hottest links and the
analytical bound. Its plan is ``simnode.ep.deepep_plan``'s. A MoE layer runs the kernels'
parts on its own ``Fabric`` (``build_fabric``), beside its compute.

Granularity (the design's "one flow per message"): the 64 AIVs of a rank work on
equal token ranges and ring their doorbells together, so a rank's kernel is one
SimPy process walking the phases of one AIV program (facts 4.2 / 4.3), and the
WQEs that one rank posts for one peer form one message train: one flow per
(rank, peer) on the Clos. Everything a train costs besides wire bytes is charged
to the resource that pays it, in proportion to the train's progress (a weight per
wire byte), so per-message costs and contention are mechanisms, not factors:

- ``urmaR``: rank R's URMA engine, 1 ns of work per ns; each WQE costs
  ``wqe_processing_ns`` (topology), so small messages load it more
  (``simnode.network.urma``, shared with the transport microbenchmark);
- ``hbmR``: rank R's HBM, shared by the URMA engine's payload and descriptor reads,
  the receiver's remote writes and (combine) the AIVs' reduction reads and writes; it
  is first-come-first-served if the chip says so (``memory.hbm_arbitration``), and then
  the reduction takes URMA's share while it lasts: "HBM contention with URMA" (facts
  4.3, S5);
- ``urma_tx`` / ``urma_rx``: the chip's URMA ceiling per direction, if the topology
  sets one; with the what-if peer-context cache on, a sender's WQEs that miss it also
  stall ``urma_tx`` (a rank posts to every peer it has tokens for);
- ``mte2R`` / ``mte3R`` / ``vecR`` / ``aivR``: the 64 AIVs' MTE2, MTE3, vector and
  scalar/VF time of combine's sender-side reduction, one local transfer per peer that
  starts with the kernel and runs ahead of the network (the AIVs ring doorbells and go on).

Fixed costs (launch, entry and exit barriers, routing VF, prefix sums, count exchange,
doorbell, drain) are phases of the rank process with the measured or reasoned costs of
``DeepEPCosts``; those that talk to every peer grow with the number of ranks.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np
import simpy

from simnode.config.params import param
from simnode.ep.deepep_plan import DeepEPPlan
from simnode.ep.fields import EPCosts
from simnode.ep.kernel import EPKernel, new_network, rank_hbm
from simnode.ep.phase import RankTimes
from simnode.network.flows import FlowNetwork
from simnode.network.urma import RankEndpoints

#: how a rank's sends become flows: "rank_peer" = one train per (rank, peer), all at once
#: (fast; each AIV's share moves in parallel); "jetty_fifo" = one message per (AIV, peer)
#: in dispatch and per task in combine, each Jetty's in order (exact, ~100x the flows)
SEND_ORDERS = ("rank_peer", "jetty_fifo")
#: dispatch dtypes the 950's kernels move (facts 2.4: FP8 with row-major scales)
DISPATCH_DTYPES = ("fp8", "bf16")
#: the most (sender, receiver) pairs one run of one train per (rank, peer) may simulate:
#: EP2048's (2048 x 2047), whose dispatch + combine (8192 tokens per rank) peaked at 3.55 GiB
#: measured, under the 4 GiB a run may use (~0.9 KiB per pair at the peak); in-order Jetties
#: keep the family's default (``simnode.ep.size.MAX_PAIRS``)
MAX_PAIRS = 2048 * 2047


def rotation(rank: int, aiv: int, num_ranks: int) -> list:
    """Peers in the order AIV ``aiv`` of ``rank`` visits them: from rank + aiv + 1 on,
    skipping the rank itself (facts 4.3 step 2)."""
    out = [(rank + aiv + i) % num_ranks for i in range(1, num_ranks + 1)]
    return [d for d in out if d != rank][:num_ranks - 1]


@dataclass(frozen=True)
class DeepEPCosts(EPCosts):
    """Software costs of the DeepEP kernels on a 950DT (the deepep kind's fields), in ns;
    ``reduce_ops_per_element``: per element of a reduced BF16 row (cast + add)."""
    vf_launch_ns: float = param(doc="one SIMT VF launch", min=0, origin="")
    histogram_ns_per_token: float = param(doc="routing VF per token of an AIV's range", min=0,
                                          origin="")
    slot_assign_ns_per_token: float = param(doc="slot assignment per token of an AIV's range",
                                            min=0, origin="")
    barrier_ns: float = param(doc="a cross-rank barrier's own work, before waiting for peers",
                              min=0, origin="")


@dataclass
class Fabric:
    """What every DeepEP kernel of a run posts on: one clock (``env``), the network and
    its sharing engine (``net``, ``net.share``), each rank's HBM and URMA engine (``ends``),
    and the pipes of the AIVs that run the communication kernels (aggregates over
    ``num_aiv`` AIVs per rank). A MoE layer builds one and runs kernels, compute tasks and
    their messages on it together."""
    env: simpy.Environment
    net: FlowNetwork
    ends: RankEndpoints
    r_mte2: np.ndarray
    r_mte3: np.ndarray
    r_vec: np.ndarray
    r_aiv: np.ndarray
    num_aiv: int
    max_latency_ns: float            #: one-way latency of the farthest peer (a barrier's last store)


def build_fabric(topology, num_aiv: int, batch_window_ns: float) -> Fabric:
    """A ``Fabric`` for ``topology`` (chip + supernode) with ``num_aiv`` communication AIVs
    per rank."""
    spec, chip = topology.supernode, topology.chip
    env, net = new_network(spec, batch_window_ns)
    R, A = spec.num_ranks, num_aiv
    f = chip.aiv_freq_GHz
    per_aiv_mte2 = chip.paths["gm_to_ub"].bandwidth_B_per_cycle * chip.aic_freq_GHz
    per_aiv_mte3 = chip.paths["ub_to_gm"].bandwidth_B_per_cycle * chip.aic_freq_GHz
    ends = RankEndpoints(net, chip.memory.hbm_bandwidth_GBps, hbm=rank_hbm(net, chip))

    def per_rank(what, capacity):
        return np.asarray(net.share.add_resources([f"rank{r}.{what}" for r in range(R)],
                                                  [capacity] * R), dtype=np.int64)
    return Fabric(env, net, ends, per_rank("aiv_mte2", A * per_aiv_mte2),
                  per_rank("aiv_mte3", A * per_aiv_mte3),
                  per_rank("aiv_vec", A * chip.vector.ops_per_cycle["simple"] * f),
                  # 1 ns of AIV scalar / VF time per ns, like the URMA engine
                  per_rank("aiv_scalar", float(A)), A,
                  float(net.latency_ns(np.zeros(R, dtype=np.int64), np.arange(R)).max())
                  if R > 1 else 0.0)


class DeepEPSim(EPKernel):
    """Dispatch or combine on every rank; see the module docstring."""

    def __init__(self, topology, plan: DeepEPPlan, costs: DeepEPCosts, *,
                 batch_window_ns: float = 0.0, tracer=None, send_order: str = "rank_peer",
                 jetty_jitter_ns: float = 0.0, seed: int = 0, on_progress=None,
                 fabric: Fabric | None = None, name: str = ""):
        """``fabric``: post on this one (a MoE layer's, shared with other kernels and tasks)
        instead of a fabric of its own. ``jetty_jitter_ns`` (jetty_fifo only): each Jetty
        starts its first message after a random delay in [0, jetty_jitter_ns) drawn from
        ``seed``, so studies can ask whether the Jetties' alignment matters."""
        if send_order not in SEND_ORDERS:
            raise ValueError(f"send_order {send_order!r}; expected one of {SEND_ORDERS}")
        super().__init__(topology, plan, costs, batch_window_ns=batch_window_ns, tracer=tracer,
                         on_progress=on_progress, name=name)
        self.send_order, self.jetty_jitter_ns, self.seed = send_order, jetty_jitter_ns, seed
        if fabric is not None:
            self.use_fabric(fabric)

    # -- set-up ------------------------------------------------------------------------------
    def build(self) -> None:
        self.use_fabric(build_fabric(self.topo, self.plan.params.num_aiv, self.batch_window_ns))

    def use_fabric(self, fab: Fabric) -> None:
        """Post on ``fab`` from now on (``EPKernel.attach`` with the fabric's resources)."""
        if fab.num_aiv != self.plan.params.num_aiv:
            raise ValueError(f"fabric has {fab.num_aiv} communication AIVs per rank, the plan "
                             f"{self.plan.params.num_aiv}")
        self.attach(fab.env, fab.net, fab.max_latency_ns)
        self.fabric, self.ends = fab, fab.ends
        self.r_hbm, self.r_urma = fab.ends.hbm, fab.ends.urma
        self.r_mte2, self.r_mte3, self.r_vec, self.r_aiv = fab.r_mte2, fab.r_mte3, fab.r_vec, fab.r_aiv
        R, A = self.spec.num_ranks, fab.num_aiv
        self.jitter = np.random.default_rng([self.seed, 0x4A455454]).uniform(
            0.0, self.jetty_jitter_ns, (R, A)) if self.jetty_jitter_ns > 0 else None

    def chip_groups(self) -> list:
        return self.ends.groups() + [("aiv_mte2", self.r_mte2), ("aiv_vec", self.r_vec)]

    def entry(self, kind: str, rank: int, t: RankTimes):
        """The cross-rank entry barrier after launch + InitSocState (facts 4.2 step 1)."""
        yield from self._fence(kind, rank, t, "entry")

    def exit(self, kind: str, rank: int, t: RankTimes):
        """The benchmark's final barrier: every rank's traffic has landed (facts 2.4)."""
        yield from self._fence(kind, rank, t, "exit")

    def _fence(self, kind: str, rank: int, t: RankTimes, which: str):
        s = self.env.now
        yield from self.barrier(f"{self.name or kind}.{which}", rank, self.costs.barrier_ns)
        t.mark(f"{which} barrier", s, self.env.now)

    # -- dispatch ------------------------------------------------------------------------------
    def dispatch_rank(self, r: int, t: RankTimes):
        """Rank r's dispatch kernel (a SimPy generator; every rank must run its own)."""
        yield from self.kernel_start("dispatch", r, t)
        yield from self.dispatch_prologue(r, t)
        s = self.env.now
        yield from self.dispatch_sends(r)
        t.mark("URMA transfer + drain", s, self.env.now)
        yield from self.kernel_end("dispatch", r, t)

    def dispatch_prologue(self, r: int, t: RankTimes):
        """Dispatch up to its sends: routing and metadata, prefix sums and slots, SQEs and
        self-rank copies, the count exchange and the doorbell (facts 4.2 steps 2-7)."""
        env, c, p, plan = self.env, self.costs, self.plan.params, self.plan
        A = p.num_aiv
        sz = plan.sizes
        # routing VF (histogram, dedup, SGE indices) with, overlapped, the scalar's metadata
        # assembly: one record per token (scales, top-k ids and weights, source index) read
        # GM->UB and written UB->GM to metadata_send_buffer (facts 4.2 steps 2 and 5)
        s = env.now
        tokens_per_aiv = math.ceil(p.tokens_per_rank / A)
        routing = env.timeout(c.vf_launch_ns + tokens_per_aiv * c.histogram_ns_per_token)
        meta = p.tokens_per_rank * sz.metadata_bytes
        metadata = self.local_work((self.r_mte2[r], self.r_mte3[r], self.r_hbm[r]), (meta, meta, 2 * meta))
        yield env.all_of([routing, metadata])
        t.mark("routing + metadata", s, env.now)
        # cross-AIV prefix sums (facts 4.2 step 3): each AIV stores its per-peer counts to GM,
        # then one warp per destination rank (64 AIVs x 16 warps cover up to 1024 peers at
        # once, S6) polls the 64 entries and scans them: a store and a poll round, whatever
        # the number of peers; then slot assignment over the AIV's tokens
        s = env.now
        yield env.timeout(2 * c.remote_store_ns + tokens_per_aiv * c.slot_assign_ns_per_token)
        t.mark("prefix sums + slots", s, env.now)
        # the warps write the SQEs into the SQ in GM (step 4) while the scalar, released by the
        # slot assignment (S6: local_copy_ready), copies the self-rank tokens GM->UB->GM into
        # their receive slots (step 5)
        s = env.now
        sqes = int(plan.aiv_sqes_max[r])
        sqe_write = self.local_work((self.r_mte3[r], self.r_hbm[r]), (sqes * A * sz.sqe_bytes,) * 2)
        own = int(plan.pair_tokens[r, r]) * (sz.hidden_row_bytes + sz.metadata_bytes)
        self_copies = self.local_work((self.r_mte2[r], self.r_mte3[r], self.r_hbm[r]), (own, own, 2 * own))
        yield env.all_of([sqe_write, self_copies])
        t.mark("SQEs + self-rank copies", s, env.now)
        # count exchange (facts 4.2 step 6): a round of rank-count stores (each AIV's lanes
        # take peers AIV, AIV + 64, ... in parallel) and a round of expert-count atomics (AIV
        # 0, one lane per expert), then every owner waits for all ranks' arrivals
        s = env.now
        yield from self.barrier(f"{self.name or 'dispatch'}.counts", r, 2 * c.remote_store_ns)
        t.mark("count exchange", s, env.now)
        # doorbells, then URMA moves every (token, peer) record (facts 4.2 step 7)
        s = env.now
        yield env.timeout(self.spec.doorbell_ns)
        t.mark("doorbell", s, env.now)

    def dispatch_sends(self, r: int, share_of: float = 1.0, on_group=None):
        """URMA moves rank r's records to every peer: one train per peer (or each Jetty's
        messages in order); ``share_of``: this part of every train (a fused kernel's chunk);
        ``on_group(group)`` is called with the trains' group once it is posted."""
        env, plan = self.env, self.plan
        R, A = self.spec.num_ranks, plan.params.num_aiv
        sz = plan.sizes
        row = plan.pair_tokens[r].tolist()         # (Python ints: no numpy scalar per peer)
        peers = [d for d in range(R) if d != r and row[d] > 0]
        if self.send_order == "jetty_fifo":
            # each AIV's Jetty sends its peers' SQEs in order, peers from r + AIV + 1 on as
            # combine visits them (facts 4.3; dispatch's SQ order is not described)
            toks, sqes = plan.aiv_tokens[r], plan.aiv_sqes_of(r)
            yield env.all_of([env.process(self._jetty(r, a, [
                (d, int(toks[a, d]) * sz.dispatch_wire_bytes,
                 int(sqes[a, d]) * sz.sqe_bytes, int(sqes[a, d]))
                for d in rotation(r, a, R) if toks[a, d] > 0], len(peers)))
                for a in range(A)])
        else:
            dst = np.asarray(peers, dtype=np.int64)
            wqes = plan.pair_sqes[r, dst] * share_of
            src = np.full(dst.shape, r)
            payload = plan.pair_tokens[r, dst] * float(sz.dispatch_wire_bytes) * share_of
            self.payload_sent += float(payload.sum())
            group = self.post(self.ends.send_many(src, dst, payload, wqes * sz.sqe_bytes, wqes,
                                                  len(peers), tag=(src, dst)))
            if on_group is not None:
                on_group(group)
            yield group

    # -- combine -------------------------------------------------------------------------------
    def combine_rank(self, d: int, t: RankTimes):
        """Rank d's combine kernel (a SimPy generator; every rank must run its own)."""
        env = self.env
        yield from self.kernel_start("combine", d, t)
        s = env.now
        yield env.timeout(self.costs.vf_launch_ns)     # peer infos by a small SIMT VF (step 1)
        t.mark("peer info VF", s, env.now)
        reductions = self.combine_reductions(d)
        yield from self.combine_fill(d, t)
        s2 = env.now
        yield env.all_of(reductions + self.combine_sends(d))
        t.mark("reduce + URMA transfer + drain", s2, env.now)
        yield from self.kernel_end("combine", d, t)

    def combine_fill(self, d: int, t: RankTimes):
        """The pipeline fill before an AIV's first doorbell: it comes after 8 tasks (facts
        4.3 step 4), or after all of its tokens if it has fewer."""
        env, c, p, plan = self.env, self.costs, self.plan.params, self.plan
        s = env.now
        fill_tokens = min(p.combine_task_tokens * p.combine_doorbell_tasks,
                          int(plan.combine_tokens_of(d).sum(axis=1).max()))
        rows = plan.reduce_rows[d].sum() / max(1, plan.pair_tokens[:, d].sum())
        yield env.timeout(self._reduce_ns_one_aiv(fill_tokens, rows)
                          + p.combine_doorbell_tasks * c.vf_launch_ns + self.spec.doorbell_ns)
        t.mark("pipeline fill", s, env.now)

    def combine_reductions(self, d: int, share_of: float = 1.0) -> list:
        """Events of rank d's reductions of ``share_of`` of its rows. The AIVs reduce task
        after task and ring a doorbell every 8 tasks without waiting for URMA (facts 4.3
        steps 3-4): the reduction of every peer's rows runs from the start on the AIV pipes,
        ahead of the network, and its HBM traffic meets URMA's (the HBM's arbitration, chip
        memory.hbm_arbitration, decides who yields)."""
        srcs = np.flatnonzero(self.plan.pair_tokens[:, d] > 0)
        rows, units = self._reductions(d, srcs)
        return [self.local_work(rows, units * share_of)]

    def combine_sends(self, d: int, share_of: float = 1.0) -> list:
        """Events of rank d's sends of ``share_of`` of its rows back to their source ranks."""
        env, p, plan = self.env, self.plan.params, self.plan
        R = self.spec.num_ranks
        sz = plan.sizes
        work = []
        col = plan.pair_tokens[:, d].tolist()      # (Python ints: no numpy scalar per peer)
        returns = {r: col[r] for r in range(R) if r != d}
        peers = [r for r, n in returns.items() if n > 0]  # self rows: reduced into the recv buffer
        if self.send_order == "jetty_fifo":
            # each AIV's Jetty: one task of <= 8 tokens per peer in turn, peers round-robin
            # from d + AIV + 1, then the next round of tasks (facts 4.3 steps 2-3)
            task = p.combine_task_tokens
            rows_of_aiv, tasks_of_aiv = plan.combine_tokens_of(d), plan.combine_tasks_of(d)
            for a in range(plan.params.num_aiv):
                order = [r for r in rotation(d, a, R) if rows_of_aiv[a, r] > 0]
                msgs = []
                for k in range(int(tasks_of_aiv[a].max(initial=0))):
                    for r in order:
                        n = min(task, int(rows_of_aiv[a, r]) - k * task)
                        if n > 0:
                            msgs.append((r, n * sz.combine_wire_bytes, n * sz.combine_wqe_bytes, n))
                work.append(env.process(self._jetty(d, a, msgs, len(peers))))
        else:
            dst = np.asarray(peers, dtype=np.int64)
            n = plan.pair_tokens[dst, d] * share_of
            src = np.full(dst.shape, d)
            self.payload_sent += float((n * sz.combine_wire_bytes).sum())
            work.append(self.post(self.ends.send_many(src, dst, n * sz.combine_wire_bytes,
                                                      n * sz.combine_wqe_bytes, n, len(peers),
                                                      tag=(src, dst))))
        return work

    def _jetty(self, src: int, aiv: int, messages: list, peers: int):
        """One AIV's Jetty posting ``messages`` [(dst, payload, descriptor bytes, wqes)] in
        order: the next leaves when the previous has (an SQ is processed in order, facts
        1.5); done when all have landed."""
        pending = collections.deque()
        if self.jetty_jitter_ns > 0:
            yield self.env.timeout(float(self.jitter[src, aiv]))
        for dst, payload, desc, wqes in messages:
            self.payload_sent += payload
            tr = self.ends.send(src, dst, payload, desc, wqes, flow_key=aiv, peers=peers)
            pending.append(tr)
            yield tr.injected
            while pending and pending[0].processed:    # keep only the ones still in flight
                pending.popleft()
        yield self.env.all_of(list(pending))

    def _reductions(self, d: int, srcs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Resources ([len(srcs), 5]) and total work (same shape) of owner d's reductions of
        the rows it returns to each rank of ``srcs``: MTE2 reads of every expert row of tokens
        with >= 2 experts on d, their vector adds, the MTE3 write of each partial sum, their
        HBM traffic, and one VF launch per task; for r == d every token, reduced or copied,
        goes through UB into the receive buffer."""
        plan, c = self.plan, self.costs
        row = plan.sizes.expert_row_bytes
        rows, toks = plan.reduce_rows[d, srcs], plan.reduce_tokens[d, srcs]
        added = rows * plan.params.hidden * c.reduce_ops_per_element     # vector adds
        # a self token with one local row is still copied GM->UB->GM into the receive
        # buffer (S6 combine_impl: load_next_token + store_last_token when is_local); only a
        # remote one is sent straight from x; a copy has no vector adds
        singles = np.where(srcs == d, int(plan.pair_tokens[d, d]) - toks, 0)
        rows, toks = rows + singles, toks + singles
        tasks = plan.combine_pair_tasks[d, srcs]
        res = np.array([self.r_mte2[d], self.r_mte3[d], self.r_vec[d], self.r_aiv[d],
                        self.r_hbm[d]], dtype=np.int64)
        units = np.stack([rows * row, toks * row, added, tasks * c.vf_launch_ns,
                          (rows + toks) * row], axis=1).astype(float)
        return np.broadcast_to(res, units.shape), units

    def _reduce_ns_one_aiv(self, tokens: int, rows_per_token: float) -> float:
        chip, c, p = self.chip, self.costs, self.plan.params
        row = self.plan.sizes.expert_row_bytes
        rate = chip.paths["gm_to_ub"].bandwidth_B_per_cycle * chip.aic_freq_GHz
        vec = chip.vector.ops_per_cycle["simple"] * chip.aiv_freq_GHz
        return tokens * max(rows_per_token * row / rate,
                            rows_per_token * p.hidden * c.reduce_ops_per_element / vec)
