"""The EP family's low-latency member: DeepEP-Ascend's decode kernels (facts v4-decode 3).

MoeDistributeDispatchV2 / CombineV2 (sgl-kernel-npu; the A3 kernels over HCCS, the *_a5.h
kernels on the 950 generation over UB memory semantics) run on every AIV of the die. Each
step is one of ``simnode.ep.lowlatency_costs.StepTimes`` and follows the plan of
``simnode.ep.lowlatency_plan``:

dispatch
  1. launch; the window-half bit and the expert ids are read;
  2. every AIV walks its share of (token, k) pairs: slot count, the BF16 row's read and its
     quantization in UB (INT8 with an FP32 scale; MXFP8 / MXFP4 on the 950), then one write
     of the record into the destination's window slot; a remote write is complete after
     its bytes, the round trip and ``remote_write_ns`` (the family's constant of the path),
     and the next pair's write waits for it;
  3. each AIV counts its experts' pairs, SyncAll, then writes one 32-B status per expert
     into the owner's state window (a small remote store, ``remote_store_ns``);
  4. each AIV of a receiver polls its share of the E statuses (local expert, source) until
     all have landed: every source writes every expert's status, zero counts too, after its
     SyncAll, so the slowest AIV of every source gates every receiver; it clears them,
     SyncAll;
  5. each AIV copies its statuses' rows window -> UB -> the output (at its AIVs' pace, or
     the die's HBM's if that is slower), SyncAll, the last AIV writes the counts.
combine
  1. launch; each expert owner's AIVs take contiguous shares of its received rows;
  2. per row: read it, write it back into its source's window slot, wait until complete,
     write the row's 32-B status;
  3. each AIV of a source then takes its share of the source's tokens: per token it polls
     the token's K statuses until all have landed, then sums the K rows with their weights.

Transports (``TRANSPORTS``): ``memory`` (the published kernels: the AIVs' MTE3 stores into
the peers' windows) and, a what-if on the 950, ``urma``: every (token, expert) write is one
URMA work request posted on the AIV's Jetty (the record first written to a local send
buffer; combine's rows are read by the engine where they lie), with the URMA engine's costs
of ``simnode.network.urma`` (per-WQE time, per-peer or context-cache stalls, the chip's
URMA ceiling); the AIV does not wait per write, only for all its completions before its
statuses, which are memory-semantic stores in both transports (DeepEP-Ascend's control
data, facts 3.3). Combine's row statuses then follow the AIV's last completion.

How the writes meet on the links is ``simnode.ep.lowlatency_send``'s, in two forms
(``FORMS``: ``chains``, fast; ``per_write``, exact), one schedule.

``LowLatencySim(topology, plan, costs, ...)`` runs one kernel on every rank
(``run("dispatch")`` / ``run("combine")``, a ``simnode.ep.phase.PhaseRun``) or, given a
``simnode.ep.deepep.Fabric``, posts on that shared clock (``dispatch_rank`` /
``combine_rank``, as a MoE layer drives the normal kernels). Each rank's kernel time is
marked as consecutive phases (``PHASES``; the trace draws them, the flag waits among them),
each one of the breakdown's steps (``STEPS``: launch, quantize, write, status, wait, copy,
reduce); ``steps_of(phases)`` adds them up per step. Dispatch's send is its slowest AIV's:
the time it waited for rows to be prepared (quantize, drawn first), then its writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simnode.config.params import Param
from simnode.ep.aiv import AivCopies, split
from simnode.ep.deepep import Fabric, build_fabric
from simnode.ep.kernel import EPKernel, new_network, rank_hbm
from simnode.ep.lowlatency_chains import dense, reduce_ends, scatter
from simnode.ep.lowlatency_costs import AivRates, LowLatencyCosts, StepTimes
from simnode.ep.lowlatency_plan import LAYOUTS, STATUS_BYTES, TRIPLE_BYTES, LowLatencyPlan
from simnode.ep.lowlatency_send import FORMS, SendForms

TRANSPORTS = ("memory", "urma")
#: the steps a rank's kernel time is made of (they add up to it)
STEPS = ("launch", "quantize", "write", "status", "wait", "copy", "reduce")
#: each kernel's phases, in order, and the step each belongs to
PHASES = {
    "dispatch": (("launch", "launch"), ("quantize", "quantize"), ("write", "write"),
                 ("status", "status"), ("wait for status flags", "wait"), ("copy out", "copy")),
    "combine": (("launch", "launch"), ("write back", "write"), ("row statuses", "status"),
                ("wait for rows", "wait"), ("weighted sum", "reduce")),
}


def steps_of(phases: dict, kind: str) -> dict:
    """ns of each of ``STEPS`` in one rank's ``phases`` (``RankTimes.phases``) of ``kind``."""
    out = dict.fromkeys(STEPS, 0.0)
    for name, step in PHASES[kind]:
        if name in phases:
            a, b = phases[name]
            out[step] += b - a
    return out

MAX_TOKENS_PER_RANK = Param.flat(
    "max_tokens_per_rank", "int", 0, "tokens per source the window holds "
    "(num_max_dispatch_tokens_per_rank; 0 = tokens_per_rank)", min_value=0, unit="tokens")
OUTPUT_LAYOUT = Param.flat(
    "output_layout", "str", "packed", "dispatch's output: packed 2-D rows with per-expert counts "
    "(the Ascend kernels) or masked 3-D, max tokens x ranks rows per local expert (DeepEP CUDA)",
    LAYOUTS)
TRANSPORT = Param.flat(
    "transport", "str", "memory", "how a write reaches a peer's window: the AIV's own store "
    "(memory semantics, the published kernels) or, a what-if, one URMA work request per "
    "(token, expert)", TRANSPORTS)
FORM = Param.flat(
    "form", "str", "chains", "chains: every AIV's writes ahead of the clock, sharing their edge "
    "links, one flow per (rank, peer) (fast); per_write: every write its own flow (exact, "
    "~1000 R flows)", FORMS)
#: the member's own fields, composed by its kinds
FIELDS = (MAX_TOKENS_PER_RANK, OUTPUT_LAYOUT, TRANSPORT, FORM)


@dataclass
class _Kernel:
    """One kernel's writes, precomputed (ns; chains are src x A + aiv)."""
    prologue_ns: float
    chain: np.ndarray             #: per write: its chain
    step: np.ndarray              #: per write: its position in the chain
    stage: np.ndarray             #: per write: its stage, stream and wait
    stream: np.ndarray
    wait: np.ndarray
    start: np.ndarray             #: [chains] when each chain starts after the prologue
    steps: int                    #: the longest chain's writes

    def grid(self, per_write: np.ndarray) -> np.ndarray:
        """``per_write`` as a [chains, steps] array (``walk``'s)."""
        return scatter(self.chain, self.step, (len(self.start), self.steps), per_write)


class LowLatencySim(SendForms, AivCopies, EPKernel):
    """Low-latency dispatch or combine on every rank; see the module docstring."""

    def __init__(self, topology, plan: LowLatencyPlan, costs: LowLatencyCosts, *,
                 transport: str = "memory", form: str = "chains", batch_window_ns: float = 0.0,
                 tracer=None, on_progress=None, fabric: Fabric | None = None, name: str = ""):
        if transport not in TRANSPORTS or form not in FORMS:
            raise ValueError(f"transport {transport!r} / form {form!r}: expected one of "
                             f"{TRANSPORTS} / {FORMS}")
        super().__init__(topology, plan, costs, batch_window_ns=batch_window_ns, tracer=tracer,
                         on_progress=on_progress, name=name)
        self.transport, self.form = transport, form
        self.st = StepTimes(costs, AivRates.from_chip(self.chip), plan.shape)
        if fabric is not None:
            self.use_fabric(fabric)

    # -- set-up ------------------------------------------------------------------------------
    def build(self) -> None:
        """A clock and network of its own, with the URMA engines for the URMA what-if only
        (memory-semantic stores never cross them)."""
        if self.transport == "urma":
            self.use_fabric(build_fabric(self.topo, self.plan.num_aiv, self.batch_window_ns))
            return
        # the chains form's flows record the load in one or two solves: no compiled engine
        env, net = new_network(self.spec, self.batch_window_ns,
                               compiled=False if self.form == "chains" else None)
        R = self.spec.num_ranks
        far = float(net.latency_ns(np.zeros(R, np.int64), np.arange(R)).max()) if R > 1 else 0.0
        self._attach(env, net, rank_hbm(net, self.chip), None, far)

    def use_fabric(self, fab: Fabric) -> None:
        """Post on ``fab`` from now on (a MoE layer's: its clock, network, HBM, URMA engines)."""
        self._attach(fab.env, fab.net, fab.ends.hbm, fab.ends, fab.max_latency_ns)

    def _attach(self, env, net, r_hbm, ends, max_latency_ns: float) -> None:
        self.attach(env, net, max_latency_ns)
        self._prepared = None
        self.ends, self.r_hbm = ends, r_hbm
        R = self.spec.num_ranks
        if self.form == "per_write":
            self.start_copies(net)                # every pair's path, for one flow per write
        else:
            src, dst = np.repeat(np.arange(R), R), np.tile(np.arange(R), R)
            self.one_way_ns = net.latency_ns(src, dst).reshape(R, R)
            self.pools = {}
        self._status_time = np.zeros(R)

    def chip_groups(self) -> list:
        groups = self.ends.groups() if self.transport == "urma" else [("hbm", self.r_hbm)]
        return groups + [(f"aiv_{k}", ids) for k, ids in self.pools.items()]

    @property
    def tag(self) -> str:
        """This instance's name in its counted events (a MoE layer runs several)."""
        return self.name or "ll"

    def _peers(self, kind: str) -> np.ndarray:
        """[R] peers each rank writes to in ``kind`` (the what-if stalls' count)."""
        pair = self.plan.pair if kind == "dispatch" else self.plan.pair.T
        return ((pair > 0) & ~np.eye(len(pair), dtype=bool)).sum(axis=1)

    def prepare(self, kind: str) -> None:
        """Each write's stage, stream and wait, and the fixed steps around them."""
        p, st, c, s = self.plan, self.st, self.costs, self.plan.shape
        R, A = s.num_ranks, s.num_aiv
        w = p.dispatch if kind == "dispatch" else p.combine_writes()
        self._writes = w
        chain, step, J = dense(w.src, w.aiv, w.order, R, A)
        remote = w.remote
        ow = self.one_way_ns[w.src, w.dst]
        self._stall_peers = self._peers(kind)
        # the what-if cost of a remote write per rank (0 unless a peer cache or per-peer cost is set)
        stall = np.array([c.stall_ns(int(n), True) for n in self._stall_peers])[w.src]
        urma = self.transport == "urma"
        wqe = float(self.spec.wqebb_bytes)
        if kind == "dispatch":
            nbytes = float(s.record_bytes)
            slot = np.where(w.token > 0, w.token * s.top_k + w.k, 0)     # pairs before it
            calls = c.slot_count_calls
            stage = np.where(slot > 0, st.vector_ns(calls * slot, calls), 0.0) \
                + st.mte2_ns(2 * s.hidden) + st.quant_ns()
            prologue = st.mte2_ns(STATUS_BYTES) + st.mte3_ns(STATUS_BYTES) \
                + st.mte2_ns(4 * s.tokens_per_rank * s.top_k)
            start = np.zeros(R * A)
            after = 0.0
        else:
            nbytes = float(s.combine_row_bytes)
            # URMA reads a remote row where it lies; a local one the AIV copies itself
            stage = np.where(remote & urma, 0.0, st.combine_stage_ns())
            prologue = st.mte2_ns(STATUS_BYTES) + st.mte3_ns(STATUS_BYTES) + c.scalar_gm_ns
            rows = np.bincount(chain, minlength=R * A)
            start = np.where(rows > 0, st.mte2_ns(TRIPLE_BYTES * rows), 0.0)   # the rows' triples
            after = 0.0 if urma else st.status_issue_ns(1)                     # the row's status
            self._rows_per_chain = rows
        if urma:
            stream = np.where(remote, st.post_ns(nbytes if kind == "dispatch" else 0.0, wqe),
                              st.mte3_ns(nbytes))
            wait = np.zeros(len(w))
        else:
            stream = np.full(len(w), st.mte3_ns(nbytes))
            wait = np.where(remote, c.remote_write_ns + stall + 2 * ow, 0.0) + after
        stage = np.broadcast_to(stage, (len(w),))
        self._k = _Kernel(prologue, chain, step, stage, stream, wait, start, J)
        self._nbytes = nbytes
        if kind == "dispatch":
            self._prepare_receive()
        else:
            self._prepare_reduce()
        if self.form == "chains":
            self.prepare_chains()
        else:
            self.prepare_per_write()
        self._prepared = kind

    # -- dispatch --------------------------------------------------------------------------------
    def _prepare_receive(self) -> None:
        """The statuses' fixed steps: per AIV its experts' counts and status writes, each
        receiver AIV's polling, clearing and copying."""
        p, st, c, s = self.plan, self.st, self.costs, self.plan.shape
        R, A, E, E_l = s.num_ranks, s.num_aiv, s.num_experts, s.experts_per_rank
        n_exp = split(E, A)
        self._count = np.array([st.status_count_ns(int(n)) for n in n_exp])
        self._status_stream = np.array([st.status_issue_ns(int(n)) for n in n_exp])
        self._writer = p.status_writers()
        ow = self.one_way_ns
        owner = np.arange(E) // E_l
        wait = np.zeros((R, A))                 # [s, a]: until a's status writes are complete
        lo_e = np.concatenate([[0], np.cumsum(n_exp)[:-1]])
        for a in range(A):
            dsts = np.unique(owner[lo_e[a]:lo_e[a] + n_exp[a]])
            if len(dsts):
                lat = c.remote_store_ns + 2 * ow[:, dsts]
                lat[dsts[None, :] == np.arange(R)[:, None]] = 0.0
                wait[:, a] = lat.max(axis=1)
        self._own_wait = wait
        self._land_lat = np.where(np.eye(R, dtype=bool), 0.0, c.remote_store_ns + ow)   # [s, d]
        rng = p.poll_ranges()
        n = rng[:, 1] - rng[:, 0]
        self._poll_lo, self._poll_n = rng[:, 0], n
        self._poll = np.array([st.poll_ns(int(m)) for m in n])
        self._after = np.array([st.mte3_ns(int(m) * STATUS_BYTES) + st.vector_ns(2 * int(m), 2)
                                + st.mte3_ns(A * STATUS_BYTES) for m in n])
        i = np.arange(E)
        self._i_le, self._i_src = i // R, i % R
        self._copy = st.mte2_ns(A * STATUS_BYTES) + st.vector_ns(2 * A, 2) \
            + p.copy_rows() * st.copy_row_ns() + st.mte3_ns(4)          # [R, A]
        # the copy reads each record and writes its row, scale and triple
        self._copy_hbm = p.recv_rows() * float(s.record_bytes + st.copy_out_bytes())
        self._tail = (c.sync_all_ns if E_l > 1 else 0.0) + st.update_counts_ns()

    def _ready(self, kind: str) -> None:
        """Prepare ``kind`` once (``run`` does it first; a MoE layer driving the ranks itself
        gets it at the first rank's start)."""
        if getattr(self, "_prepared", None) != kind:
            self.prepare(kind)

    def dispatch_rank(self, r: int, t):
        env, c, R = self.env, self.costs, self.spec.num_ranks
        self._ready("dispatch")
        yield from self.kernel_start("dispatch", r, t)
        yield env.timeout(self._k.prologue_ns)
        t0 = env.now
        ends, exposed = yield from self.send(r, "dispatch")
        slow = int(np.argmax(ends))
        send_end = float(ends[slow])
        sync1 = float((ends + self._count).max()) + c.sync_all_ns
        own_done = sync1 + self._status_stream + self._own_wait[r]        # [A]
        yield env.timeout(sync1 - env.now)
        self._status_time[r] = sync1
        yield self.arrive(f"{self.tag}.dispatch.status", R)     # every source's statuses issued
        # when each status lands at r: status i = (local expert i // R, source i % R)
        E_l = self.plan.shape.experts_per_rank
        src = self._i_src
        land = self._status_time[src] + self._status_stream[self._writer[r * E_l + self._i_le]] \
            + self._land_lat[src, r]
        has = self._poll_n > 0
        last = np.full(len(has), -np.inf)
        last[has] = np.maximum.reduceat(land, self._poll_lo[has])
        start = own_done + self.st.mte2_ns(0)
        # polling finds a landed status half a round later on average, then one more round
        after = np.where(has, np.maximum(start, last) + 1.5 * self._poll + self._after, own_done)
        sync2 = float(after.max()) + c.sync_all_ns
        flags_from = float(own_done.max())
        yield env.timeout(max(sync2 - env.now, 0.0))
        self.barrier_wait_ns[r] += max(float(last.max()) - flags_from, 0.0)
        copy = float(self._copy[r].max())
        if self._copy_hbm[r] > 0:             # the die's HBM may not keep up with its AIVs
            yield self.net.share.start(self._copy_hbm[r], (int(self.r_hbm[r]),),
                                       cap=self._copy_hbm[r] / copy)
        yield env.timeout(max(sync2 + copy - env.now, 0.0) + self._tail)
        end = env.now
        quantized = t0 + float(exposed[slow])
        for name, a, b in (("launch", t.start_ns, t0), ("quantize", t0, quantized),
                           ("write", quantized, send_end), ("status", send_end, flags_from),
                           ("wait for status flags", flags_from, sync2), ("copy out", sync2, end)):
            t.mark(name, a, b)
        yield from self.kernel_end("dispatch", r, t)

    # -- combine ---------------------------------------------------------------------------------
    def _prepare_reduce(self) -> None:
        """Where each write-back lands at its source and the sources' sums."""
        p, st, s = self.plan, self.st, self.plan.shape
        R, T, A = s.num_ranks, s.tokens_per_rank, s.num_aiv
        w = self._writes
        self._land = np.zeros(len(w))
        self._land_lat_rows = np.where(w.remote, self.costs.remote_store_ns
                                       + self.one_way_ns[w.src, w.dst], 0.0)
        order = np.argsort(w.src, kind="stable")
        self._of_rank = np.split(order, np.cumsum(np.bincount(w.src, minlength=R))[:-1])
        order = np.argsort(w.dst, kind="stable")
        self._to_rank = np.split(order, np.cumsum(np.bincount(w.dst, minlength=R))[:-1])
        valid = (p.topk >= 0).sum(axis=2)                      # [R, T] rows per token
        self._tok_split = split(T, A)
        self._tok_first = np.concatenate([[0], np.cumsum(self._tok_split)[:-1]]).astype(np.int64)
        # each source's rows are final once every owner holding some has posted them
        self._sources = [np.flatnonzero(p.pair[:, d]) for d in range(R)]   # [d] sources it serves
        self._owners_left = (p.pair > 0).sum(axis=1)
        self._all_owners = [self.env.event() for _ in range(R)]
        per = {int(k): st.mte3_ns(4) + st.reduce_token_ns(int(k)) for k in np.unique(valid)}
        self._per_token = np.vectorize(per.get, otypes=[float])(valid)          # [R, T]
        self._poll_k = st.poll_ns(s.top_k)
        # the sums read every row and write every token's sum
        self._reduce_hbm = (valid.sum(axis=1) + T) * float(s.combine_row_bytes)
        if self.form == "per_write":
            self._token_left = valid.astype(np.int64).copy()
            self._token_event = {}

    def combine_rank(self, r: int, t):
        env, A = self.env, self.plan.num_aiv
        self._ready("combine")
        yield from self.kernel_start("combine", r, t)
        yield env.timeout(self._k.prologue_ns)
        t0 = env.now
        if self.form == "chains":
            mine = self._of_rank[r]
            aiv = self._writes.aiv[mine]
            ends, _ = yield from self.send(r, "combine")
            status = self._urma_status(r)
            if self.transport == "urma":          # the rows' statuses after the completions
                land = ends[aiv] + status[aiv]
            else:
                land = t0 + self._rel_done[mine]
            self._land[mine] = land + self._land_lat_rows[mine]
            self._posted(self._sources[r])
            own_end = ends + status
            yield self._all_owners[r]
            tok_land = np.full(self.plan.shape.tokens_per_rank, -np.inf)
            rows = self._to_rank[r]
            np.maximum.at(tok_land, self._writes.token[rows], self._land[rows])
            end_b = reduce_ends(own_end, tok_land, self._tok_split, self._poll_k, self._per_token[r])
        else:
            own_end, end_b = np.zeros(A), np.zeros(A)
            yield env.all_of([env.process(self._aiv_combine(r, a, t0, own_end, end_b))
                              for a in range(A)])
        end_max = float(end_b.max())
        left = end_max - env.now
        if self._reduce_hbm[r] > 0 and left > 0:    # the sums' reads, if the HBM keeps up
            yield self.net.share.start(self._reduce_hbm[r], (int(self.r_hbm[r]),),
                                       cap=self._reduce_hbm[r] / left)
        yield env.timeout(max(end_max - env.now, 0.0))
        end = env.now
        b = int(np.argmax(end_b))
        first = self._tok_first[b]
        work = float(np.sum(self._poll_k + self._per_token[r, first:first + self._tok_split[b]]))
        written = float(own_end[b])
        waited = max(end - written - work, 0.0)
        self.barrier_wait_ns[r] += waited
        # the critical AIV's row statuses: after each row (memory) or after all (URMA)
        status = float(self._rows_per_chain[r * A + b] * self.st.status_issue_ns(1)) \
            if self.transport == "memory" else float(self._urma_status(r)[b])
        for name, a, b_ in (("launch", t.start_ns, t0), ("write back", t0, written - status),
                            ("row statuses", written - status, written),
                            ("wait for rows", written, written + waited),
                            ("weighted sum", written + waited, end)):
            t.mark(name, a, b_)
        yield from self.kernel_end("combine", r, t)

    def _aiv_combine(self, r: int, a: int, t0: float, own_end: np.ndarray, end_b: np.ndarray):
        """Per-write form: AIV a of r writes its rows back, then sums its tokens as their
        rows land (``reduce_ends``' formula, token by token)."""
        env, A = self.env, self.plan.num_aiv
        ends = np.zeros(A)
        urma = self.transport == "urma"
        posted = []
        yield from self.aiv_writes(r, a, t0, ends, np.zeros(A),
                                   on_done=(lambda i, _: posted.append(i)) if urma else self._landed)
        own = ends[a] + (self._urma_status(r)[a] if urma else 0.0)
        for i in posted:                          # URMA: statuses once every write is complete
            self._landed(i, own)
        own_end[a] = now = own
        for tok in range(self._tok_first[a], self._tok_first[a] + self._tok_split[a]):
            yield self._token_ev(r, tok)
            rows = self._to_rank[r][self._writes.token[self._to_rank[r]] == tok]
            land = float(self._land[rows].max())
            now = max(now, land + 0.5 * self._poll_k) + self._poll_k + self._per_token[r, tok]
            yield env.timeout(max(now - env.now, 0.0))
        end_b[a] = now

    def _posted(self, sources: np.ndarray) -> None:
        """An owner has posted its rows' landings for ``sources``: those it completes go on."""
        left = self._owners_left
        left[sources] -= 1
        for s in sources[left[sources] == 0]:
            self._all_owners[int(s)].succeed()

    def _landed(self, i: int, done: float) -> None:
        """Per-write form: row i's status, issued at ``done``, lands at its source."""
        self._land[i] = done + self._land_lat_rows[i]
        src, tok = int(self._writes.dst[i]), int(self._writes.token[i])
        self._token_left[src, tok] -= 1
        if self._token_left[src, tok] == 0:
            self._token_ev(src, tok).succeed()

    def _token_ev(self, src: int, tok: int):
        key = (src, tok)
        if key not in self._token_event:
            self._token_event[key] = self.env.event()
        return self._token_event[key]

    def _urma_status(self, r: int) -> np.ndarray:
        """[A] MTE3 time of each AIV's row statuses, issued back to back once its writes are
        complete (the URMA what-if; 0 over memory, where each follows its row)."""
        A = self.plan.num_aiv
        if self.transport == "memory":
            return np.zeros(A)
        rows = self._rows_per_chain[r * A:(r + 1) * A]
        return np.where(rows > 0, self.st.rates.mte3_base_ns
                        + rows * STATUS_BYTES / self.st.rates.mte3_GBps, 0.0)
