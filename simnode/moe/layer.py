"""One expert-parallel MoE layer on one clock: dispatch, expert GEMMs, SwiGLU, combine.

``MoELayerSim(topology, params, costs, routes_fn).run() -> LayerRun`` runs every rank's
part of the layer on one ``Fabric`` (``simnode.ep.deepep``): the DeepEP kernels and their
messages, and each rank's compute kernels as profiled tasks (``simnode.moe.profiles``) on
the same rank HBM the URMA traffic uses, so overlap, contention and stragglers are
outcomes of one run. Each rank has two streams: ``comm`` (its communication AIVs:
``comm_aivs`` of them run DeepEP) and ``compute`` (its AI cores: the cube, and the AIVs
communication leaves free).

Per rank (facts moe-layer 1-2; DeepEP facts 4.2-4.3):
- dispatch (the normal kernel), its copy epilogue (received tokens scattered into the
  m-grouped contiguous layout, each expert's segment padded to BLOCK_M: facts 4.2);
- grouped GEMM 1 (gate + up: [m_e x hidden] x [hidden x 2 I] per local expert), SwiGLU +
  per-token FP8 cast, grouped GEMM 2 ([m_e x I] x [I x hidden]);
- combine and its reduce epilogue (partial rows summed into the output, facts 4.3 step 6);
- the shared experts: the same three kernels on the rank's own tokens (one expert, m = T).

Overlap modes (``OVERLAPS``):
- ``sequential``: dispatch, epilogue, GEMM 1, SwiGLU, GEMM 2, combine, epilogue, then the
  shared experts; nothing overlaps (DeepEP uses all its AIVs).
- ``two_micro_batch``: the tokens split in two halves (DeepSeek's prefill overlap): comm
  runs D0, D1, C0, C1 while compute runs the shared experts (filling the gap before D0
  lands), then the experts of batch 0, then of batch 1; combine of a batch waits for its
  experts, experts of a batch for its dispatch.
- ``fused``: one kernel per rank as DeepGEMM's MegaMoE (facts moe-layer 2): one entry
  barrier, dispatch's prologue, then its trains sent in ``fused_chunks`` chunks in order;
  the experts' blocks of chunk j run once chunk j has arrived from every source, and its
  rows are reduced and sent back as soon as they are done; one exit barrier. What overlaps
  is decided by arrivals.

Cores (``comm_aivs``): DeepEP's kernels are pure vector kernels (facts 4.1); while they
run, compute kernels that need AIVs (SwiGLU, the FP4 weights' dequantization) get the AI
cores whose AIVs communication leaves free, and wait for communication to end if it holds
them all. FP8 GEMMs use the cubes only.

Decode (``comm = low_latency``, overlap sequential; DeepSeek-V4 on the 950, facts v4-decode
2): dispatch and combine are the EP family's low-latency kernels (``simnode.moe.comm``: no
epilogues, their copy-out and weighted sum are theirs), the expert kernels those of decode
shapes (``simnode.moe.layer_kernels``). The shared expert runs on a stream of its own when
``shared_aic`` > 0 ("the shared expert on the same card, on a second stream beside the
routed experts"): ``shared_aic`` AICs and ``shared_aiv`` AIVs are its, the rest the main
stream's (the what-if of the split); it starts with the layer, beside dispatch, and the
layer ends when both streams have. Each stream's GEMMs run on its AI cores that have both
their AIVs (a kernel launches as AIC + 2 AIV, mix 1:2), its SwiGLU on its AIVs, and the
low-latency kernels on the main stream's AIVs. Without a split the shared expert follows
combine on the one stream, as in the normal layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import simpy

from simnode.moe import comm, layer_kernels, profiles
from simnode.ep.deepep import DeepEPCosts, DeepEPSim, Fabric, build_fabric
from simnode.ep.deepep_plan import DeepEPParams, DeepEPPlan, build_plan
from simnode.ep.phase import RankTimes

OVERLAPS = ("sequential", "two_micro_batch", "fused")
COMMS = ("normal", "low_latency")
MAX_ARROWS = 2000                     # fused: sampled arrival arrows kept for the trace
ROW_SCALES_BYTES_PER_128 = 4          # FP8 rows carry fp32 scales per 128 values (facts 2.4)


@dataclass(frozen=True)
class LayerParams:
    num_ranks: int
    tokens_per_rank: int
    hidden: int
    intermediate: int                 #: expert FFN intermediate size
    num_experts: int
    top_k: int
    shared_experts: int
    shared_intermediate: int          #: the shared experts' intermediate size
    weight_dtype: str                 #: "fp8" or "fp4" (MXFP4, dequantized on the AIVs)
    overlap: str
    comm_aivs: int                    #: AIVs per rank that run DeepEP's kernels
    fused_chunks: int                 #: fused: chunks each dispatch train is sent in
    batch_window_ns: float
    comm: str                         #: "normal" (DeepEP's normal kernels) or "low_latency"
    shared_weight_dtype: str          #: the shared experts' weights ("" = weight_dtype)
    shared_aic: int                   #: AICs of the shared experts' own stream (0: no stream)
    shared_aiv: int                   #: AIVs of that stream
    swiglu_clamp: float               #: low_latency: SwiGLU's clamp limit (0 = none)
    dispatch_dtype: str = "fp8"
    combine_dtype: str = "bf16"


@dataclass
class Span:
    stream: str                       #: "comm" or "compute"
    name: str                         #: "dispatch", "gemm1", ... (with "mb0." in two_micro_batch)
    start_ns: float
    end_ns: float


@dataclass
class RankRecord:
    spans: list = field(default_factory=list)
    end_ns: float = 0.0
    barrier_wait_ns: float = 0.0
    flops: float = 0.0                #: useful FLOPs of its grouped GEMMs
    gemm_ns: float = 0.0              #: time in its grouped GEMMs
    computed_rows: int = 0
    valid_rows: int = 0

    def busy_ns(self, stream: str) -> float:
        return union_ns([(s.start_ns, s.end_ns) for s in self.spans if s.stream == stream])


def union_ns(intervals) -> float:
    """The length of the union of ``intervals`` [(start ns, end ns)]."""
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


@dataclass
class LayerRun:
    params: LayerParams
    ranks: list                       #: RankRecord per rank
    kernels: dict                     #: DeepEP instance name -> (DeepEPSim, [RankTimes])
    plans: list                       #: DeepEPPlan per micro-batch
    fabric: Fabric
    experts: np.ndarray               #: [rank, local expert] tokens routed (all micro-batches)
    arrows: list                      #: fused: (src, dst, sent ns, arrived ns, chunk) samples

    @property
    def layer_ns(self) -> float:
        return max(r.end_ns for r in self.ranks)


class MoELayerSim:
    """One MoE layer on every rank; see the module docstring."""

    def __init__(self, topology, params: LayerParams, costs: DeepEPCosts, routes_fn,
                 ll_costs=None):
        """``routes_fn(tokens_slice)``: each rank's [T, top_k] expert ids restricted to a
        slice of its tokens, in rank order (an iterator); ``ll_costs``: the low-latency
        kernels' costs (``comm.ll_costs``), for ``comm = low_latency``."""
        if params.overlap not in OVERLAPS:
            raise ValueError(f"overlap {params.overlap!r}: expected one of {OVERLAPS}")
        if params.comm not in COMMS:
            raise ValueError(f"comm {params.comm!r}: expected one of {COMMS}")
        self.topo, self.chip, self.spec = topology, topology.chip, topology.supernode
        self.p, self.costs, self.routes_fn = params, costs, routes_fn
        self.ll_costs = ll_costs

    @property
    def split(self) -> bool:
        """Whether the shared experts have a stream (and cores) of their own."""
        return self.p.shared_aic > 0

    def stream_cores(self, shared: bool) -> tuple[int, int]:
        """(GEMM cores, SwiGLU cores) of the main or the shared stream: its AI cores with both
        AIVs, and its AIVs' cores (module docstring)."""
        chip, p = self.chip, self.p
        aic, aiv = (p.shared_aic, p.shared_aiv) if shared else (
            chip.num_ai_cores - p.shared_aic, chip.num_ai_cores * chip.aiv_per_core - p.shared_aiv)
        return min(aic, aiv // chip.aiv_per_core), aiv // chip.aiv_per_core

    @property
    def comm_aivs(self) -> int:
        """AIVs per rank the communication kernels run on."""
        if self.p.comm == "low_latency" and self.split:
            return self.stream_cores(False)[1] * self.chip.aiv_per_core
        return self.p.comm_aivs

    # -- set-up --------------------------------------------------------------------------------
    def _plans(self) -> list[tuple[slice, DeepEPPlan]]:
        p, T = self.p, self.p.tokens_per_rank
        if p.comm == "low_latency":
            return [(slice(0, T), comm.ll_plan(self.routes_fn(slice(0, T)), p, self.comm_aivs))]
        parts = [slice(0, T)] if p.overlap != "two_micro_batch" else [
            slice(0, T // 2), slice(T // 2, T)]
        out = []
        for sl in parts:
            n = sl.stop - sl.start
            dp = DeepEPParams(p.num_ranks, n, p.hidden, p.top_k, p.num_experts, p.dispatch_dtype,
                              p.combine_dtype, num_aiv=p.comm_aivs,
                              wqebb_bytes=self.spec.wqebb_bytes)
            out.append((sl, build_plan(self.routes_fn(sl), dp, keep_aiv=False)))
        return out

    def _cores(self, needs_aiv: bool, concurrent: bool) -> int:
        """AI cores a compute kernel runs on: all of them, unless it needs AIVs while
        communication holds ``comm_aivs`` of them (0: it must wait for communication)."""
        chip = self.chip
        if not needs_aiv or not concurrent:
            return chip.num_ai_cores
        free = chip.num_ai_cores * chip.aiv_per_core - self.p.comm_aivs
        return free // chip.aiv_per_core

    # -- the compute kernels of one rank ---------------------------------------------------
    def _expert_kernels(self, counts: list, concurrent: bool, shared: bool = False) -> list:
        """GEMM 1, SwiGLU and GEMM 2 (``layer_kernels.ExpertKernel``) over experts with
        ``counts`` tokens (one expert of the rank's tokens per shared expert if ``shared``),
        on the cores communication leaves them."""
        wdt = (self.p.shared_weight_dtype or self.p.weight_dtype) if shared else self.p.weight_dtype
        return layer_kernels.expert_kernels(self.chip, self.p, counts,
                                            self._cores(wdt == "fp4", concurrent),
                                            self._cores(True, concurrent), shared)

    # -- processes -----------------------------------------------------------------------------
    def _task(self, r: int, stream: str, name: str, segments: list, rec: RankRecord,
              aiv_lock=None, gap_frac: float = 0.0):
        env = self.fab.env
        req = None
        if aiv_lock is not None:                 # needs the AIVs communication holds
            req = aiv_lock.request()
            yield req
        s = env.now
        yield from profiles.task(self.fab.net.share, int(self.fab.ends.hbm[r]), segments,
                                 int(self.hbm_kernels[r]), gap_frac)
        rec.spans.append(Span(stream, name, s, env.now))
        if req is not None:
            aiv_lock.release(req)

    def _compute(self, r: int, kernels: list, rec: RankRecord, tag: str = "", lock=None,
                 stream: str = "compute"):
        env = self.fab.env
        for k in kernels:
            s = env.now
            yield from self._task(r, stream, tag + k.name, k.segments, rec,
                                  lock if k.needs_aivs else None, k.gap_frac)
            if "gemm" in k.name and not k.name.startswith("shared"):
                rec.flops += k.flops
                rec.gemm_ns += env.now - s
                rec.computed_rows += k.computed
                rec.valid_rows += k.valid

    def _kernel(self, r: int, sim: DeepEPSim, kind: str, times: list, rec: RankRecord,
                name: str, lock=None):
        env = self.fab.env
        req = None
        if lock is not None:
            req = lock.request()
            yield req
        s = env.now
        body = sim.dispatch_rank if kind == "dispatch" else sim.combine_rank
        yield from body(r, times[r])
        rec.spans.append(Span("comm", name, s, env.now))
        yield from self._task(r, "comm", name + " epilogue", layer_kernels.epilogue_segments(
            self.chip, self.p, sim.plan, r, kind, self.costs.kernel_launch_ns), rec)
        if req is not None:
            lock.release(req)

    def _counts(self, plan, r: int) -> list:
        if self.p.comm == "low_latency":
            return comm.local_counts(plan, r)
        epr = self.p.num_experts // self.p.num_ranks
        return [int(x) for x in plan.expert_tokens[r * epr:(r + 1) * epr]]

    def _shared(self, r: int, tokens: int, concurrent: bool) -> list:
        if self.p.shared_experts == 0:
            return []
        one = self._expert_kernels([tokens], concurrent, shared=True)
        return one * self.p.shared_experts

    # sequential ---------------------------------------------------------------------------------
    def _rank_sequential(self, r: int):
        rec, env = self.records[r], self.fab.env
        (sim_d, td), (sim_c, tc) = self.kernels["dispatch"], self.kernels["combine"]
        plan = self.plans[0]
        yield from self._kernel(r, sim_d, "dispatch", td, rec, "dispatch")
        yield from self._compute(r, self._expert_kernels(self._counts(plan, r), False), rec)
        yield from self._kernel(r, sim_c, "combine", tc, rec, "combine")
        yield from self._compute(r, self._shared(r, self.p.tokens_per_rank, False), rec)
        rec.end_ns = env.now

    # decode: the low-latency kernels, the shared experts on their own stream ------------------------
    def _stream_kernels(self, counts: list, shared: bool) -> list:
        gemm, vec = self.stream_cores(shared) if self.split else (self.chip.num_ai_cores,) * 2
        kern = layer_kernels.expert_kernels(self.chip, self.p, counts, gemm, vec, shared)
        return kern * (self.p.shared_experts if shared else 1)

    def _ll_kernel(self, r: int, kind: str, rec: RankRecord):
        env = self.fab.env
        sim, times = self.kernels[kind]
        s = env.now
        yield from (sim.dispatch_rank if kind == "dispatch" else sim.combine_rank)(r, times[r])
        rec.spans.append(Span("comm", kind, s, env.now))

    def _rank_decode(self, r: int):
        env = self.fab.env
        rec = self.records[r]
        shared = self._stream_kernels([self.p.tokens_per_rank], True) if self.p.shared_experts else []
        side = env.process(self._compute(r, shared, rec, stream="shared")) if self.split else None
        yield from self._ll_kernel(r, "dispatch", rec)
        yield from self._compute(r, self._stream_kernels(self._counts(self.plans[0], r), False), rec)
        yield from self._ll_kernel(r, "combine", rec)
        if side is None:
            yield from self._compute(r, shared, rec)
        else:
            yield side
        rec.end_ns = env.now

    # two micro-batches ----------------------------------------------------------------------------
    def _rank_two_mb(self, r: int):
        env = self.fab.env
        rec = self.records[r]
        lock = simpy.Resource(env, 1) if self._cores(True, True) == 0 else None
        landed = [env.event(), env.event()]
        computed = [env.event(), env.event()]

        def comm():
            for mb in (0, 1):
                sim, times = self.kernels[f"mb{mb}.dispatch"]
                yield from self._kernel(r, sim, "dispatch", times, rec, f"mb{mb}.dispatch", lock)
                landed[mb].succeed()
            for mb in (0, 1):
                yield computed[mb]
                sim, times = self.kernels[f"mb{mb}.combine"]
                yield from self._kernel(r, sim, "combine", times, rec, f"mb{mb}.combine", lock)

        def compute():
            # the shared experts fill the gap before batch 0 has landed
            yield from self._compute(r, self._shared(r, self.p.tokens_per_rank, True), rec,
                                     lock=lock)
            for mb in (0, 1):
                yield landed[mb]
                kern = self._expert_kernels(self._counts(self.plans[mb], r), True)
                yield from self._compute(r, kern, rec, f"mb{mb}.", lock)
                computed[mb].succeed()

        a, b = env.process(comm()), env.process(compute())
        yield env.all_of([a, b])
        rec.end_ns = env.now

    # fused ---------------------------------------------------------------------------------------
    def _rank_fused(self, r: int):
        env = self.fab.env
        rec = self.records[r]
        sim, times = self.kernels["fused"]
        S = self.p.fused_chunks
        t = times[r]
        plan = self.plans[0]
        slice_ready = self.slice_ready[r]
        s0 = env.now
        yield from sim.kernel_start("fused", r, t)
        yield from sim.dispatch_prologue(r, t)
        rec.spans.append(Span("comm", "dispatch prologue", s0, env.now))

        def send_chunks():
            for j in range(S):
                s = env.now
                yield from sim.dispatch_sends(r, 1.0 / S,
                                              on_group=lambda g, j=j: self._note_arrivals(g, j))
                rec.spans.append(Span("comm", f"dispatch chunk {j}", s, env.now))

        def compute_and_return():
            yield from self._compute(r, self._shared(r, self.p.tokens_per_rank, True), rec)
            kern = self._expert_kernels(self._counts(plan, r), True)
            # chunk j carries rows [x j / S, x (j+1) / S) of each count: the chunks sum to it
            slices = [[k.share(j, S) for k in kern] for j in range(S)]
            returned = []
            fill = env.process(sim.combine_fill(r, t))
            for j in range(S):
                yield slice_ready[j]
                yield from self._compute(r, slices[j], rec, f"chunk{j}.")
                if j == 0:
                    yield fill
                work = sim.combine_reductions(r, 1.0 / S) + sim.combine_sends(r, 1.0 / S)
                returned.append(env.process(self._span_of(rec, f"combine chunk {j}", work)))
            yield env.all_of(returned)

        yield env.all_of([env.process(send_chunks()), env.process(compute_and_return())])
        s = env.now
        yield from sim.kernel_end("fused", r, t)
        rec.spans.append(Span("comm", "exit barrier", s, env.now))
        rec.end_ns = env.now

    def _span_of(self, rec: RankRecord, name: str, events: list):
        """Wait for ``events``; record their span on the comm stream."""
        env = self.fab.env
        s = env.now
        yield env.all_of(events)
        rec.spans.append(Span("comm", name, s, env.now))

    def _note_arrivals(self, group, chunk: int) -> None:
        """Watch a fused chunk's trains: when a receiver has its part from every source,
        its slice ``chunk`` is ready."""
        env = self.fab.env
        src, dst = group.tag

        def served(ks, served_ns):
            for k, t in zip(np.asarray(ks).tolist(), np.asarray(served_ns).tolist()):
                arrive = t + float(group.latency_ns[k])
                env.timeout(max(arrive - env.now, 0.0)).callbacks.append(
                    lambda _e, s=int(src[k]), d=int(dst[k]): self._landed(s, d, chunk,
                                                                          group.start_ns))
        group.on_served = served

    def _landed(self, src: int, dst: int, chunk: int, sent_ns: float) -> None:
        self.pending[dst][chunk] -= 1
        step = max(1, self.p.num_ranks * self.p.num_ranks * self.p.fused_chunks // MAX_ARROWS)
        if (src * self.p.num_ranks + dst + chunk) % step == 0:
            self.arrows.append((src, dst, sent_ns, self.fab.env.now, chunk))
        if self.pending[dst][chunk] == 0:
            self.slice_ready[dst][chunk].succeed()

    # -- run -------------------------------------------------------------------------------------
    def run(self) -> LayerRun:
        p = self.p
        R = p.num_ranks
        self.fab = build_fabric(self.topo, self.comm_aivs, p.batch_window_ns)
        share = self.fab.net.share
        # an unlimited shadow of each rank's HBM that counts what its kernels use (the rest of
        # the HBM's traffic is URMA's and the communication AIVs'): never binding
        self.hbm_kernels = np.asarray(share.add_resources(
            [f"rank{r}.hbm_kernels" for r in range(R)], [1e12] * R), dtype=np.int64)
        parts = self._plans()
        self.plans = [plan for _, plan in parts]
        self.records = [RankRecord() for _ in range(R)]
        self.kernels = {}
        self.arrows = []
        names = {"sequential": [("dispatch", 0), ("combine", 0)],
                 "two_micro_batch": [("mb0.dispatch", 0), ("mb1.dispatch", 1),
                                     ("mb0.combine", 0), ("mb1.combine", 1)],
                 "fused": [("fused", 0)]}[p.overlap]
        for name, mb in names:
            if p.comm == "low_latency":
                sim = comm.ll_kernel(self.topo, self.plans[mb], self.ll_costs, self.fab, name)
            else:
                sim = DeepEPSim(self.topo, self.plans[mb], self.costs, fabric=self.fab, name=name)
            self.kernels[name] = (sim, [RankTimes() for _ in range(R)])
        env = self.fab.env
        if p.overlap == "fused":
            plan = self.plans[0]
            senders = (plan.pair_tokens > 0) & ~np.eye(R, dtype=bool)
            self.pending = [[int(senders[:, d].sum())] * p.fused_chunks for d in range(R)]
            self.slice_ready = [[env.event() for _ in range(p.fused_chunks)] for _ in range(R)]
            for d in range(R):
                for j in range(p.fused_chunks):
                    if self.pending[d][j] == 0:
                        self.slice_ready[d][j].succeed()
        body = {"sequential": self._rank_sequential, "two_micro_batch": self._rank_two_mb,
                "fused": self._rank_fused}[p.overlap]
        if p.comm == "low_latency":
            body = self._rank_decode
        procs = [env.process(body(r)) for r in range(R)]
        env.run()
        if not all(pr.triggered for pr in procs):
            raise RuntimeError("moe layer: ranks did not finish (a barrier never completed)")
        for sim, _ in self.kernels.values():
            for r in range(R):
                self.records[r].barrier_wait_ns += float(sim.barrier_wait_ns[r])
        experts = np.zeros((R, p.num_experts // R), dtype=np.int64)
        for plan in self.plans:
            experts += np.array([self._counts(plan, r) for r in range(R)], dtype=np.int64)
        return LayerRun(p, self.records, self.kernels, self.plans, self.fab, experts,
                        self.arrows)

