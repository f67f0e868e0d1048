"""DeepEP-Ascend dispatch and combine on a supernode, timed on the flow network (facts 4).

``DeepEPSim(topology, plan, costs, ...)`` runs one kernel (``run("dispatch")`` or
``run("combine")``) on every rank at once and returns a ``PhaseRun``: each rank's
kernel time and phase times, bytes, the hottest links and the analytical bound.

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

Fixed costs (launch, barriers, routing VF, prefix sums, count exchange, doorbell,
drain) are phases of the rank process with the measured or reasoned costs of
``DeepEPCosts``; those that talk to every peer grow with the number of ranks.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np
import simpy

from simnode.moe.deepep_plan import DeepEPPlan
from simnode.network.bound import analytical_bound_ns
from simnode.network.flows import FlowNetwork
from simnode.network.urma import RankEndpoints, busiest
# RankTimes lives with the trace (the transport kind needs it without importing this module)
from simnode.moe.deepep_trace import RankTimes  # noqa: F401 (re-exported)


#: from this EP size on, a kernel's hundreds of solves over ~R^2 message trains repay
#: compiling the engine's loops before the first one (speed only; same results)
COMPILED_FROM_RANKS = 32

#: how a rank's sends become flows: "rank_peer" = one train per (rank, peer), all at once
#: (fast; each AIV's share moves in parallel); "jetty_fifo" = one message per (AIV, peer)
#: in dispatch and per task in combine, each Jetty's in order (exact, ~100x the flows)
SEND_ORDERS = ("rank_peer", "jetty_fifo")


def rotation(rank: int, aiv: int, num_ranks: int) -> list:
    """Peers in the order AIV ``aiv`` of ``rank`` visits them: from rank + aiv + 1 on,
    skipping the rank itself (facts 4.3 step 2)."""
    out = [(rank + aiv + i) % num_ranks for i in range(1, num_ranks + 1)]
    return [d for d in out if d != rank][:num_ranks - 1]


@dataclass(frozen=True)
class DeepEPCosts:
    """Software costs of the DeepEP kernels on a 950DT (set in the workload file)."""
    kernel_launch_ns: float          #: kernel launch + InitSocState (facts 1.2, S6: ~1.9 us)
    vf_launch_ns: float              #: launching one SIMT VF (facts 1.2, S6: ~0.5 us)
    histogram_ns_per_token: float    #: routing VF work per token of one AIV's range (S6)
    slot_assign_ns_per_token: float  #: slot assignment per token of one AIV's range (S6)
    remote_store_ns: float           #: one round of SIMT remote stores / atomics over UB_MEM
    barrier_ns: float                #: a cross-rank barrier's own work, before waiting for peers
    reduce_ops_per_element: float    #: vector ops per element of a reduced BF16 row (cast + add)


@dataclass
class PhaseRun:
    kind: str                        #: "dispatch" or "combine"
    ranks: list                      #: RankTimes per rank
    recv_tokens: np.ndarray          #: records each rank received, its own included (DeepEP's count)
    recv_remote_tokens: np.ndarray   #: of which came over the network from other ranks
    logical_bytes_per_token: int     #: DeepEP's benchmark bytes per received token
    wire_bytes: float                #: bytes the network carried, headers included
    payload_bytes: float
    bound_ns: float                  #: busiest port's bytes / bandwidth (no latency, no costs)
    hottest: list                    #: (resource, bytes, utilization) of the busiest links
    resources: dict                  #: per-rank chip resources: name -> busiest rank's utilization
    busiest: dict                    #: name -> that busiest resource, e.g. "rank0.urma_rx"
    solver_recomputes: int
    transfers: int

    @property
    def kernel_ns(self) -> np.ndarray:
        return np.array([r.end_ns - r.start_ns for r in self.ranks])

    @property
    def GBps(self) -> np.ndarray:
        """DeepEP's convention per rank: received tokens x logical bytes / kernel time.
        ``num_recv_tokens`` counts every record in the receive buffer, the self-rank region
        too (S6 dispatch.hpp: the rank histogram and receive prefix sums include the rank
        itself; facts 2.4's 16,384 x 4.44 = 72.7 K records at EP8 count it as well)."""
        return self.recv_tokens * self.logical_bytes_per_token / self.kernel_ns

    @property
    def network_GBps(self) -> np.ndarray:
        """The same with only the records that crossed the network."""
        return self.recv_remote_tokens * self.logical_bytes_per_token / self.kernel_ns


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
    per rank; compiles the engine's loops from ``COMPILED_FROM_RANKS`` ranks on."""
    spec, chip = topology.supernode, topology.chip
    env = simpy.Environment()
    net = FlowNetwork(env, spec, batch_window_ns=batch_window_ns)
    share = net.share
    if spec.num_ranks >= COMPILED_FROM_RANKS:
        share.compile_now()
    R, A = spec.num_ranks, num_aiv
    f = chip.aiv_freq_GHz
    per_aiv_mte2 = chip.paths["gm_to_ub"].bandwidth_B_per_cycle * chip.aic_freq_GHz
    per_aiv_mte3 = chip.paths["ub_to_gm"].bandwidth_B_per_cycle * chip.aic_freq_GHz
    ends = RankEndpoints(net, chip.memory.hbm_bandwidth_GBps, chip.memory.hbm_arbitration == "fcfs")

    def per_rank(what, capacity):
        return np.asarray(share.add_resources([f"rank{r}.{what}" for r in range(R)],
                                              [capacity] * R), dtype=np.int64)
    return Fabric(env, net, ends, per_rank("aiv_mte2", A * per_aiv_mte2),
                  per_rank("aiv_mte3", A * per_aiv_mte3),
                  per_rank("aiv_vec", A * chip.vector.ops_per_cycle["simple"] * f),
                  # 1 ns of AIV scalar / VF time per ns, like the URMA engine
                  per_rank("aiv_scalar", float(A)), A,
                  float(net.latency_ns(np.zeros(R, dtype=np.int64), np.arange(R)).max())
                  if R > 1 else 0.0)


class DeepEPSim:
    """Dispatch or combine on every rank; see the module docstring."""

    def __init__(self, topology, plan: DeepEPPlan, costs: DeepEPCosts, *,
                 batch_window_ns: float = 0.0, tracer=None, send_order: str = "rank_peer",
                 jetty_jitter_ns: float = 0.0, seed: int = 0, on_progress=None,
                 fabric: Fabric | None = None, name: str = ""):
        """``fabric``: post on this one (a MoE layer's, shared with other kernels and tasks)
        instead of a fabric of its own; ``name`` tells its barriers from other instances'
        (e.g. "mb0.dispatch" in a micro-batch), the kernel kind if empty."""
        if send_order not in SEND_ORDERS:
            raise ValueError(f"send_order {send_order!r}; expected one of {SEND_ORDERS}")
        self.send_order = send_order
        # jetty_fifo only: each Jetty starts its first message after a random delay in
        # [0, jetty_jitter_ns) (seeded), so studies can ask whether the Jetties' alignment matters
        self.jetty_jitter_ns = jetty_jitter_ns
        self.seed = seed
        self.topo = topology
        self.spec = topology.supernode
        self.chip = topology.chip
        self.plan = plan
        self.costs = costs
        self.batch_window_ns = batch_window_ns
        self.tracer = tracer
        #: callback(simulated_ns, bound_ns) after every rate solve, for a progress line
        self.on_progress = on_progress
        self.name = name
        self.payload_sent = 0.0       #: payload bytes its messages carried (conservation)
        if fabric is not None:
            self._attach(fabric)

    # -- set-up ------------------------------------------------------------------------------
    def _build(self) -> None:
        self._attach(build_fabric(self.topo, self.plan.params.num_aiv, self.batch_window_ns))

    def _attach(self, fab: Fabric) -> None:
        if fab.num_aiv != self.plan.params.num_aiv:
            raise ValueError(f"fabric has {fab.num_aiv} communication AIVs per rank, the plan "
                             f"{self.plan.params.num_aiv}")
        self.fabric = fab
        self.env, self.net, self.ends = fab.env, fab.net, fab.ends
        self.r_hbm, self.r_urma = self.ends.hbm, self.ends.urma
        self.r_mte2, self.r_mte3, self.r_vec, self.r_aiv = fab.r_mte2, fab.r_mte3, fab.r_vec, fab.r_aiv
        self.max_latency_ns = fab.max_latency_ns
        R, A = self.spec.num_ranks, self.plan.params.num_aiv
        self.arrivals: dict = {}
        self.jitter = np.random.default_rng([self.seed, 0x4A455454]).uniform(
            0.0, self.jetty_jitter_ns, (R, A)) if self.jetty_jitter_ns > 0 else None
        self.groups: list = []       # Group of message trains, kept for the trace only
        self.payload_sent = 0.0
        self.barrier_wait_ns = np.zeros(R)   #: per rank: time its barriers waited for others
        self.entry_wait_ns = np.zeros(R)     #: ... of which at the entry barrier

    def _barrier(self, name: str, rank: int, work_ns: float):
        """Cross-rank barrier: ``work_ns`` of issuing (remote stores, polling), then wait until
        every rank has issued its own and the last one has travelled the farthest path."""
        env = self.env
        yield env.timeout(work_ns)
        state = self.arrivals.setdefault(name, [0, env.event()])
        state[0] += 1
        if state[0] == self.spec.num_ranks:
            state[1].succeed()
        arrived = env.now
        yield state[1]
        wait = env.now - arrived                           # waiting for slower ranks
        self.barrier_wait_ns[rank] += wait
        self.entry_wait_ns[rank] += wait if name.endswith(".entry") else 0.0
        yield env.timeout(self.max_latency_ns)

    def _kernel_start(self, kind: str, rank: int, t: RankTimes):
        """Kernel launch + InitSocState, then the cross-rank entry barrier (facts 4.2 step 1)."""
        env = self.env
        t.start_ns = env.now
        yield env.timeout(self.costs.kernel_launch_ns)
        s = env.now
        yield from self._barrier(f"{self.name or kind}.entry", rank, self.costs.barrier_ns)
        t.mark("entry barrier", s, env.now)

    def _kernel_end(self, kind: str, rank: int, t: RankTimes):
        """The benchmark's final barrier: every rank's traffic has landed (facts 2.4)."""
        s = self.env.now
        yield from self._barrier(f"{self.name or kind}.exit", rank, self.costs.barrier_ns)
        t.mark("exit barrier", s, self.env.now)
        t.end_ns = self.env.now

    # -- dispatch ------------------------------------------------------------------------------
    def dispatch_rank(self, r: int, t: RankTimes):
        """Rank r's dispatch kernel (a SimPy generator; every rank must run its own)."""
        yield from self._kernel_start("dispatch", r, t)
        yield from self.dispatch_prologue(r, t)
        s = self.env.now
        yield from self.dispatch_sends(r)
        t.mark("URMA transfer + drain", s, self.env.now)
        yield from self._kernel_end("dispatch", r, t)

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
        metadata = self._local((self.r_mte2[r], self.r_mte3[r], self.r_hbm[r]), (meta, meta, 2 * meta))
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
        sqe_write = self._local((self.r_mte3[r], self.r_hbm[r]), (sqes * A * sz.sqe_bytes,) * 2)
        own = int(plan.pair_tokens[r, r]) * (sz.hidden_row_bytes + sz.metadata_bytes)
        self_copies = self._local((self.r_mte2[r], self.r_mte3[r], self.r_hbm[r]), (own, own, 2 * own))
        yield env.all_of([sqe_write, self_copies])
        t.mark("SQEs + self-rank copies", s, env.now)
        # count exchange (facts 4.2 step 6): a round of rank-count stores (each AIV's lanes
        # take peers AIV, AIV + 64, ... in parallel) and a round of expert-count atomics (AIV
        # 0, one lane per expert), then every owner waits for all ranks' arrivals
        s = env.now
        yield from self._barrier(f"{self.name or 'dispatch'}.counts", r, 2 * c.remote_store_ns)
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
            group = self.ends.send_many(src, dst, payload, wqes * sz.sqe_bytes, wqes, len(peers),
                                        tag=(src, dst))
            if self.tracer is not None:        # the trace reads them; else they go once done
                self.groups.append(group)
            if on_group is not None:
                on_group(group)
            yield group

    # -- combine -------------------------------------------------------------------------------
    def combine_rank(self, d: int, t: RankTimes):
        """Rank d's combine kernel (a SimPy generator; every rank must run its own)."""
        env = self.env
        yield from self._kernel_start("combine", d, t)
        s = env.now
        yield env.timeout(self.costs.vf_launch_ns)     # peer infos by a small SIMT VF (step 1)
        t.mark("peer info VF", s, env.now)
        reductions = self.combine_reductions(d)
        yield from self.combine_fill(d, t)
        s2 = env.now
        yield env.all_of(reductions + self.combine_sends(d))
        t.mark("reduce + URMA transfer + drain", s2, env.now)
        yield from self._kernel_end("combine", d, t)

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
        return [self._local(rows, units * share_of)]

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
            group = self.ends.send_many(src, dst, n * sz.combine_wire_bytes,
                                        n * sz.combine_wqe_bytes, n, len(peers), tag=(src, dst))
            if self.tracer is not None:        # the trace reads them; else they go once done
                self.groups.append(group)
            work.append(group)
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

    def _local(self, rows, units):
        """Work with no network part, one transfer per row of ``rows`` (resources) and
        ``units`` (work on each; a single row may be given as tuples): its 'size' is the
        row's largest unit count, its weights each resource's units per unit of size."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, np.shape(rows)[-1] if np.ndim(rows) else 1)
        units = np.asarray(units, dtype=float).reshape(rows.shape)
        size = units.max(axis=1) if units.size else np.zeros(rows.shape[0])
        weights = units / np.where(size > 0, size, 1.0)[:, None]
        return self.net.share.start_group(size, rows, weights, np.full(size.shape, np.inf), 0.0)

    def _reduce_ns_one_aiv(self, tokens: int, rows_per_token: float) -> float:
        chip, c, p = self.chip, self.costs, self.plan.params
        row = self.plan.sizes.expert_row_bytes
        rate = chip.paths["gm_to_ub"].bandwidth_B_per_cycle * chip.aic_freq_GHz
        vec = chip.vector.ops_per_cycle["simple"] * chip.aiv_freq_GHz
        return tokens * max(rows_per_token * row / rate,
                            rows_per_token * p.hidden * c.reduce_ops_per_element / vec)

    # -- run -----------------------------------------------------------------------------------
    def run(self, kind: str) -> PhaseRun:
        self._build()
        R = self.spec.num_ranks
        times = [RankTimes() for _ in range(R)]
        body = self.dispatch_rank if kind == "dispatch" else self.combine_rank
        messages = []
        if self.tracer is not None:
            self.net.share.on_served = lambda tr: messages.append(
                (tr.src, tr.dst, tr.start_ns, tr.served_ns + tr.latency_ns)) if tr.src is not None else None
        if self.on_progress is not None:
            bound = analytical_bound_ns(self._traffic(kind), self.net.routes)
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
        return self._result(kind, times)

    def _result(self, kind: str, times: list) -> PhaseRun:
        plan, net, sz = self.plan, self.net, self.plan.sizes
        traffic = self._traffic(kind)
        self._check_conservation(kind, traffic)
        net.share.sync()
        # both kernels count the rank's num_recv_tokens from dispatch (facts 2.4): the records
        # that landed at it, which are also the rows it returns in combine
        recv, remote = plan.recv_tokens(include_self=True), plan.recv_tokens()
        logical = sz.dispatch_logical_bytes if kind == "dispatch" else sz.combine_row_bytes
        horizon = max(tt.end_ns for tt in times)
        chip_util, chip_busiest = busiest(
            net, self.ends.groups() + [("aiv_mte2", self.r_mte2), ("aiv_vec", self.r_vec)], horizon)
        return PhaseRun(kind, times, recv, remote, logical, float(net.port_bytes().sum()),
                        float(traffic.sum()), analytical_bound_ns(traffic, net.routes),
                        net.hottest_links(5), chip_util, chip_busiest, net.share.recomputes,
                        net.share.transfers_started)

    def _traffic(self, kind: str) -> np.ndarray:
        """[src, dst] payload bytes the kernel sends over the network (no self-rank copies)."""
        sz = self.plan.sizes
        pair = self.plan.pair_tokens if kind == "dispatch" else self.plan.pair_tokens.T
        traffic = pair * (sz.dispatch_wire_bytes if kind == "dispatch" else sz.combine_wire_bytes)
        np.fill_diagonal(traffic, 0)
        return traffic

    def _check_conservation(self, kind: str, traffic: np.ndarray) -> None:
        """Every planned byte was sent exactly once (by this kernel's messages)."""
        sent = self.payload_sent
        if not math.isclose(sent, float(traffic.sum()), rel_tol=1e-9):
            raise RuntimeError(f"{kind}: conservation violated: {sent} payload bytes sent, "
                               f"{traffic.sum()} planned")

