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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import simpy

from simnode.moe import profiles
from simnode.ep.deepep import DeepEPCosts, DeepEPSim, Fabric, build_fabric
from simnode.ep.deepep_plan import DeepEPParams, DeepEPPlan, build_plan
from simnode.ep.phase import RankTimes

OVERLAPS = ("sequential", "two_micro_batch", "fused")
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
        return _union([(s.start_ns, s.end_ns) for s in self.spans if s.stream == stream])


def _union(intervals) -> float:
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

    def __init__(self, topology, params: LayerParams, costs: DeepEPCosts, routes_fn):
        """``routes_fn(tokens_slice)``: each rank's [T, top_k] expert ids restricted to a
        slice of its tokens, in rank order (an iterator)."""
        if params.overlap not in OVERLAPS:
            raise ValueError(f"overlap {params.overlap!r}: expected one of {OVERLAPS}")
        self.topo, self.chip, self.spec = topology, topology.chip, topology.supernode
        self.p, self.costs, self.routes_fn = params, costs, routes_fn

    # -- set-up --------------------------------------------------------------------------------
    def _plans(self) -> list[tuple[slice, DeepEPPlan]]:
        p, T = self.p, self.p.tokens_per_rank
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
        """[(name, segments, flops, computed rows, valid rows, needs AIVs)] of GEMM 1,
        SwiGLU and GEMM 2 over experts with ``counts`` tokens (one expert of the rank's
        tokens per shared expert if ``shared``)."""
        from simnode.kernels.grouped_gemm import (GroupedGemmParams, expert_blocks,
                                                  grouped_gemm_roofline, grouped_tiling)
        from simnode.kernels.swiglu import SwigluParams, swiglu_roofline
        p, chip = self.p, self.chip
        inter = p.shared_intermediate if shared else p.intermediate
        wdt = p.weight_dtype
        gemm_aiv = wdt == "fp4"              # MXFP4 weights are decoded on the AIVs (facts 3.5)
        g_cores = self._cores(gemm_aiv, concurrent)
        s_cores = self._cores(True, concurrent)
        if not counts or sum(counts) == 0:
            return []
        prefix = "shared " if shared else ""
        out = []
        for name, n, k in (("gemm1", 2 * inter, p.hidden), ("gemm2", p.hidden, inter)):
            cores = g_cores or chip.num_ai_cores
            gp = GroupedGemmParams(tuple(counts), n, k, "fp8", wdt, "bf16", "contiguous",
                                   num_cores=cores)
            prof = profiles.grouped_gemm_profile(chip, n, k, "fp8", wdt, "bf16", "contiguous",
                                                 cores)
            units = profiles.gemm_units(chip, gp)
            roof = grouped_gemm_roofline(chip, gp)
            blocks = expert_blocks(gp, grouped_tiling(chip, gp))
            flops = 2.0 * sum(counts) * n * k
            hbm = roof["hbm_ns"] * chip.memory.hbm_bandwidth_GBps
            out.append((prefix + name, profiles.with_hbm_bytes(prof.segments(units), hbm), flops,
                        sum(b.computed for b in blocks), sum(b.valid for b in blocks),
                        gemm_aiv and g_cores == 0))
            if name == "gemm1":
                sp = SwigluParams(sum(counts), inter, num_cores=s_cores or chip.num_ai_cores)
                sprof = profiles.swiglu_profile(chip, inter, s_cores or chip.num_ai_cores)
                sroof = swiglu_roofline(chip, sp)
                out.append((prefix + "swiglu", profiles.with_hbm_bytes(sprof.segments(sp.rows),
                                                         sroof["hbm_bytes"]), 0.0, 0, 0,
                            s_cores == 0))
        return out

    def _epilogue_segments(self, plan: DeepEPPlan, r: int, kind: str) -> list:
        """The DeepEP epilogue of rank r as one memory-bound task on its communication AIVs:
        ``dispatch``: received records scattered into the expert-major layout (facts 4.2,
        deferred epilogue); ``combine``: each token's partial rows summed (facts 4.3 step 6)."""
        chip, p, sz = self.chip, self.p, plan.sizes
        A = p.comm_aivs
        read_GBps = A * chip.paths["gm_to_ub"].bandwidth_B_per_cycle * chip.aic_freq_GHz
        write_GBps = A * chip.paths["ub_to_gm"].bandwidth_B_per_cycle * chip.aic_freq_GHz
        recv = int(plan.received()[r])
        if kind == "dispatch":
            epr = p.num_experts // p.num_ranks
            rows = int(plan.expert_tokens[r * epr:(r + 1) * epr].sum())
            read = recv * (sz.hidden_row_bytes + sz.metadata_bytes)
            write = rows * (sz.hidden_row_bytes + sz.scales_bytes)
        else:
            T = plan.params.tokens_per_rank
            partials = T * min(p.num_ranks, p.top_k)        # facts 4.3 step 5: <= min(R, k)
            read = partials * sz.combine_row_bytes
            write = T * sz.combine_row_bytes
        ns = self.costs.kernel_launch_ns + max(read / read_GBps, write / write_GBps)
        return [(ns, float(read + write))]

    # -- processes -----------------------------------------------------------------------------
    def _task(self, r: int, stream: str, name: str, segments: list, rec: RankRecord,
              aiv_lock=None):
        env = self.fab.env
        req = None
        if aiv_lock is not None:                 # needs the AIVs communication holds
            req = aiv_lock.request()
            yield req
        s = env.now
        yield from profiles.task(self.fab.net.share, int(self.fab.ends.hbm[r]), segments,
                                 int(self.hbm_kernels[r]))
        rec.spans.append(Span(stream, name, s, env.now))
        if req is not None:
            aiv_lock.release(req)

    def _compute(self, r: int, kernels: list, rec: RankRecord, tag: str = "", lock=None):
        env = self.fab.env
        for name, segs, flops, computed, valid, needs_lock in kernels:
            s = env.now
            yield from self._task(r, "compute", tag + name, segs, rec,
                                  lock if needs_lock else None)
            if "gemm" in name and not name.startswith("shared"):
                rec.flops += flops
                rec.gemm_ns += env.now - s
                rec.computed_rows += computed
                rec.valid_rows += valid

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
        plan = sim.plan
        yield from self._task(r, "comm", name + " epilogue",
                              self._epilogue_segments(plan, r, kind), rec)
        if req is not None:
            lock.release(req)

    def _counts(self, plan: DeepEPPlan, r: int) -> list:
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
            part = lambda x, j: x * (j + 1) // S - x * j // S
            slices = [[(n, [(ns / S, b / S) for ns, b in segs], f / S, part(c, j), part(v, j), lk)
                       for n, segs, f, c, v, lk in kern] for j in range(S)]
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
        self.fab = build_fabric(self.topo, p.comm_aivs, p.batch_window_ns)
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
        procs = [env.process(body(r)) for r in range(R)]
        env.run()
        if not all(pr.triggered for pr in procs):
            raise RuntimeError("moe layer: ranks did not finish (a barrier never completed)")
        for sim, _ in self.kernels.values():
            for r in range(R):
                self.records[r].barrier_wait_ns += float(sim.barrier_wait_ns[r])
        experts = np.zeros((R, p.num_experts // R), dtype=np.int64)
        for plan in self.plans:
            experts += np.asarray(plan.expert_tokens).reshape(R, -1)
        return LayerRun(p, self.records, self.kernels, self.plans, self.fab, experts,
                        self.arrows)

