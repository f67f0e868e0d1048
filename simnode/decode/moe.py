"""A decode layer's MoE block (dispatch, routed experts, combine) from a MoE model's run.

The step replays each layer's MoE block on its clock (``simnode.decode.step``) from a
``MoeRun``: per EP rank, its ``MoePhase`` records in order, each with its time alone, its
HBM bytes, the AI cores and AIVs it holds, and whether it is ``collective`` (an EP kernel:
it starts with an entry barrier over every rank of the EP group, so on the step's clock it
ends no earlier than the last rank's arrival plus its own time). A MoE model is a function
``(topology, model, deployment, routes, costs, batch_window_ns) -> MoeRun`` in ``MOE_MODELS``,
``costs`` a ``MoeCosts`` (the EP family's normal and low-latency members' constants).

``decode_layer`` (what CR's decode runs, facts v4-decode 2): simnode's MoE layer with
``comm = low_latency`` (``simnode.moe.layer``): the EP family's low-latency dispatch (MXFP8
rows into the peers' windows, status, polling, the copy into the packed 2-D output) and
combine (BF16 rows back, the weighted top-k sum at the source), the routed experts on the
packed rows with per-expert counts (W4A8: CANN's weight-quant grouped matmul; W8A8: the masked
kernel), SwiGLU with the model's clamp and MX FP8 scales; run once on its own supernode clock
with the shared expert left out (the step runs it on its own stream). Phase times are each
kernel's span on its rank, but a low-latency kernel's span holds its flag wait, and a rank
that reached combine early waits there for the ranks still in their experts: the step's own
barrier puts that wait back from the step's arrivals, so a collective's time is counted from
the last rank's arrival at it in the layer's run (its end less that arrival), as
``layer_sim`` takes out the entry barrier's wait.

``layer_sim``: simnode's MoE layer as it is (``simnode.moe.layer.MoELayerSim``, overlap
``sequential``), run once on its own supernode clock with the shared expert left out (the
step runs it on its own stream). Its communication is DeepEP's NORMAL dispatch and combine
(flow-level, every AIV of the chip) and its experts the contiguous layout of normal
dispatch (each expert's rows padded to BLOCK_M), not the low-latency kernels CR's decode
runs: ``LAYER_SIM_NOTE`` says so in every result. Phase times: a kernel's span on its rank
(its epilogue included; a collective's wait at its entry barrier taken out, the step's own
barrier puts it back); HBM bytes are the phases' roofline bytes (``simnode.decode.kernels``).

``routes_for(dep, model, routing, seed)``: each rank's [tokens, top_k] expert ids:
``forced_eplb`` is the benchmarks' forced EPLB, a round-robin, perfectly balanced top-k
(facts v4-decode 2: CR module/utils.py build_force_eplb_topk); otherwise the EP family's
routing policies (``simnode.ep.fields.routes``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simnode.decode import kernels as K
from simnode.decode.deployment import Deployment, quantization
from simnode.decode.model import ModelSpec

FLOW = "flow-level"
DECODE_LAYER_NOTE = ("MoE: simnode's decode MoE layer (low-latency dispatch / combine, experts on "
                     "the packed rows), the shared expert on the step's own stream")
LAYER_SIM_NOTE = ("MoE: simnode's normal MoE layer (what-if: NORMAL DeepEP dispatch / combine, experts "
                  "in the contiguous padded layout), not the low-latency path the decode runs")


@dataclass(frozen=True)
class MoeCosts:
    """The EP family's constants a MoE model reads: the normal member's (``DeepEPCosts``) and
    the low-latency member's (``LowLatencyCosts``)."""
    deepep: object
    low_latency: object


@dataclass(frozen=True)
class MoePhase:
    """One kernel of a rank's MoE block (module docstring)."""
    name: str                    #: a name of ``kernels.MOE_BLOCK``
    ns: float
    hbm_bytes: float
    aic: int
    aiv: int
    collective: bool
    bottleneck: str
    model: str                   #: FLOW or ``timing.PIPE``


@dataclass(frozen=True)
class MoeRun:
    """Every EP rank's MoE block, as its model ran it."""
    phases: tuple                #: per rank: (MoePhase, ...) in order
    routed_rows: tuple           #: per rank: (token, expert) rows its experts received
    note: str
    #: per rank: {"dispatch": bytes to each rank, "combine": ...} (the variable all-to-all)
    peer_bytes: tuple = ()

    def signature(self, rank: int) -> tuple:
        """What makes two ranks' blocks the same on the step's clock."""
        return tuple((p.name, round(p.ns, 3), round(p.hbm_bytes), p.aic, p.aiv) for p in self.phases[rank])


def forced_eplb(num_ranks: int, tokens: int, num_experts: int, top_k: int) -> list[np.ndarray]:
    """Forced EPLB (module docstring): each rank's [tokens, top_k] expert ids. The EP group's
    (token, k) pairs, rank by rank, are dealt over the ranks in turn and each rank's over its
    experts in turn, so every rank and every local expert receive the same rows (+-1)."""
    per_rank = num_experts // num_ranks
    out = []
    for r in range(num_ranks):
        cursor = np.arange(r * tokens * top_k, (r + 1) * tokens * top_k, dtype=np.int64)
        expert = (cursor // num_ranks) % per_rank + (cursor % num_ranks) * per_rank
        out.append(expert.reshape(tokens, top_k).astype(np.int32))
    return out


def routes_for(m: ModelSpec, d: Deployment, routing: dict, hashed: bool = False) -> list[np.ndarray]:
    """Each EP rank's routes for one MoE layer (module docstring); ``routing``: the EP
    family's routing fields plus ``forced_eplb``; ``hashed``: a hash-routed layer's (V4's
    first layers look each token id up in a fixed table: the EP family's ``hash`` policy),
    unless forced EPLB routes every layer."""
    if routing["forced_eplb"]:
        return forced_eplb(d.moe_ep, d.tokens_per_chip, m.num_experts, m.top_k)
    from simnode.ep.fields import routes
    params = {**routing, "tokens_per_rank": d.tokens_per_chip, "num_experts": m.num_experts,
              "top_k": m.top_k}
    if hashed:
        params["routing"] = "hash"
    return [np.asarray(r) for r in routes(params, d.moe_ep)]


def hash_routed(segment) -> bool:
    """Whether a step segment (``kernels.Segment``) is a hash-routed layer (``kernels.layer_name``)."""
    return segment.name.endswith(" hash")


def hash_differs(routing: dict) -> bool:
    """Whether hash-routed layers route otherwise than the others under ``routing``."""
    return not routing["forced_eplb"] and routing["routing"] != "hash"


def layer_sim(topology, m: ModelSpec, d: Deployment, routes: list, costs, batch_window_ns: float) -> MoeRun:
    """The MoE block from ``MoELayerSim`` (module docstring); ``topology`` has the EP group's
    ranks."""
    from simnode.moe.layer import LayerParams, MoELayerSim
    chip = topology.chip
    aivs = chip.num_ai_cores * chip.aiv_per_core
    fmt = quantization(d)["routed_experts"]
    lp = LayerParams(d.moe_ep, d.tokens_per_chip, m.hidden, m.moe_intermediate, m.num_experts, m.top_k,
                     0, m.moe_intermediate, "fp4" if fmt == "mxfp4" else "fp8", "sequential", aivs, 1,
                     batch_window_ns, comm="normal", shared_weight_dtype="", shared_aic=0,
                     shared_aiv=0, swiglu_clamp=0.0)
    run = MoELayerSim(topology, lp, costs.deepep, lambda sl: (r[sl] for r in routes)).run()
    entry = {name: sim.entry_wait_ns for name, (sim, _) in run.kernels.items()}
    calls = {c.name: c for c in K.moe_kernels(m, d, False)}
    gemm_aiv = chip.num_ai_cores if fmt == "mxfp4" else 0        # FP4 decoded on AIV0 of each core
    held = {"dispatch": (0, aivs), "gmm_w13": (chip.num_ai_cores, gemm_aiv), "swiglu_quant": (0, aivs),
            "gmm_w2": (chip.num_ai_cores, gemm_aiv), "combine": (0, aivs)}
    spans = {"dispatch": ("dispatch", "dispatch epilogue"), "gmm_w13": ("gemm1",),
             "swiglu_quant": ("swiglu",), "gmm_w2": ("gemm2",), "combine": ("combine", "combine epilogue")}
    bottleneck = _expert_bottlenecks(chip, m, lp.weight_dtype)
    phases = []
    for r, rec in enumerate(run.ranks):
        took: dict = {}
        for sp in rec.spans:
            took[sp.name] = took.get(sp.name, 0.0) + sp.end_ns - sp.start_ns
        out = []
        for name in K.MOE_BLOCK:
            collective = name in ("dispatch", "combine")
            ns = sum(took.get(s, 0.0) for s in spans[name])
            if collective:
                ns -= float(entry[name][r])
            out.append(MoePhase(name, ns, calls[name].hbm_bytes, *held[name], collective,
                                bottleneck.get(name, "network + AIVs (DeepEP normal)"),
                                FLOW if collective else "pipe-level"))
        phases.append(tuple(out))
    rows = tuple(int(x) for x in run.experts.sum(axis=1))
    return MoeRun(tuple(phases), rows, LAYER_SIM_NOTE, peer_bytes(run))


def _expert_bottlenecks(chip, m: ModelSpec, weight_dtype: str) -> dict:
    """The busiest resource of each expert kernel's pipe-level profile, as MoELayerSim ran
    it (the profiles are memoized: reading them runs nothing again)."""
    from simnode.instr.isa import PIPE_NAMES
    from simnode.moe import profiles
    cores = chip.num_ai_cores
    h, i = m.hidden, m.moe_intermediate
    out = {"gmm_w13": profiles.grouped_gemm_profile(chip, 2 * i, h, "fp8", weight_dtype, "bf16", "contiguous", cores),
           "swiglu_quant": profiles.swiglu_profile(chip, i, cores),
           "gmm_w2": profiles.grouped_gemm_profile(chip, h, i, "fp8", weight_dtype, "bf16", "contiguous", cores)}
    return {k: PIPE_NAMES.get(p.bottleneck, p.bottleneck) for k, p in out.items()}


#: the decode layer's expert kernels by the layer's span names (``layer_kernels``)
_DECODE_SPANS = {"dispatch": "dispatch", "gemm1": "gmm_w13", "swiglu": "swiglu_quant",
                 "gemm2": "gmm_w2", "combine": "combine"}


def decode_layer(topology, m: ModelSpec, d: Deployment, routes: list, costs: MoeCosts,
                 batch_window_ns: float) -> MoeRun:
    """The MoE block from the decode MoE layer (module docstring); ``topology`` has the EP
    group's ranks."""
    from simnode.moe.layer import LayerParams, MoELayerSim
    chip = topology.chip
    cores, aivs = chip.num_ai_cores, chip.num_ai_cores * chip.aiv_per_core
    fmt = quantization(d)["routed_experts"]
    wdt = "fp4" if fmt == "mxfp4" else "fp8"
    lp = LayerParams(d.moe_ep, d.tokens_per_chip, m.hidden, m.moe_intermediate, m.num_experts, m.top_k,
                     0, m.moe_intermediate, wdt, "sequential", aivs, 1, batch_window_ns,
                     comm="low_latency", shared_weight_dtype="", shared_aic=0, shared_aiv=0,
                     swiglu_clamp=m.swiglu_clamp)
    run = MoELayerSim(topology, lp, costs.deepep, lambda sl: (r[sl] for r in routes), costs.low_latency).run()
    calls = {c.name: c for c in K.moe_kernels(m, d, False)}
    # CANN's W4A8 kernel launches AIC + 2 AIV (mix 1:2: both AIVs decode MXFP4); S3's masked
    # W8A8 kernel uses the cubes only; SwiGLU and the low-latency kernels every AIV
    gemm_aiv = aivs if wdt == "fp4" else 0
    held = {"dispatch": (0, aivs), "gmm_w13": (cores, gemm_aiv), "swiglu_quant": (0, aivs),
            "gmm_w2": (cores, gemm_aiv), "combine": (0, aivs)}
    rows = [int(x) for x in run.experts.sum(axis=1)]
    steps = {k: _largest_step(run.kernels[k][1], k) for k in ("dispatch", "combine")}
    last = {k: max(sp.start_ns for rec in run.ranks for sp in rec.spans if sp.name == k)
            for k in ("dispatch", "combine")}
    phases, bounds = [], {}                  # bounds: per-expert rows -> the GEMMs' bottlenecks
    for r, rec in enumerate(run.ranks):
        took: dict = {}
        for sp in rec.spans:
            name = _DECODE_SPANS[sp.name]
            begin = max(sp.start_ns, last[sp.name]) if sp.name in last else sp.start_ns
            took[name] = took.get(name, 0.0) + max(sp.end_ns - begin, 0.0)
        counts = tuple(int(x) for x in run.experts[r])
        if counts not in bounds:
            bounds[counts] = {**_decode_bottlenecks(chip, m, wdt, list(counts)), **steps}
        out = []
        for name in K.MOE_BLOCK:
            collective = name in ("dispatch", "combine")
            out.append(MoePhase(name, took.get(name, 0.0), calls[name].hbm_bytes, *held[name], collective,
                                bounds[counts][name], FLOW if collective else "pipe-level"))
        phases.append(tuple(out))
    return MoeRun(tuple(phases), tuple(rows), DECODE_LAYER_NOTE, peer_bytes(run))


def peer_bytes(run) -> tuple:
    """Per rank of a MoE layer run, the payload bytes its dispatch and combine send to each
    rank (the EP plan's traffic: its own rows left out)."""
    out = []
    for r in range(len(run.ranks)):
        out.append({k: tuple(int(b) for b in np.asarray(run.kernels[k][0].plan.traffic(k)[r], dtype=np.int64))
                    for k in ("dispatch", "combine")})
    return tuple(out)


def _largest_step(times: list, kind: str) -> str:
    """A low-latency kernel's largest step (``comm.steps_us``: launch, quantize, write, status,
    wait, copy, reduce; mean over ranks) and its share of the steps' sum."""
    from simnode.moe import comm
    steps = comm.steps_us(times, kind)
    total = sum(steps.values())
    name = max(steps, key=lambda k: (steps[k], k))
    return f"low-latency {name} ({100 * steps[name] / total:.0f}% of its steps)" if total else "low-latency"


def _decode_bottlenecks(chip, m: ModelSpec, wdt: str, counts: list) -> dict:
    """Each decode expert GEMM's binding bound by its roofline terms (compute, HBM, L2, the
    MXFP4 decode) at the rank's per-expert rows; SwiGLU is vector work."""
    from simnode.kernels.grouped_gemm import GroupedGemmParams, grouped_gemm_roofline
    out = {"swiglu_quant": "vector (AIV)"}
    if not sum(counts):
        return out
    names = {"compute_ns": "cube", "hbm_ns": "HBM bandwidth", "l2_ns": "L2 bandwidth",
             "decode_ns": "AIV MXFP4 decode"}
    h, i = m.hidden, m.moe_intermediate
    layout, impl = ("packed", "cann") if wdt == "fp4" else ("masked", "deepgemm")
    for name, n, k in (("gmm_w13", 2 * i, h), ("gmm_w2", h, i)):
        terms = grouped_gemm_roofline(chip, GroupedGemmParams(tuple(counts), n, k, "fp8", wdt, "bf16",
                                                              layout, impl=impl))
        key = max((v, k2) for k2, v in terms.items() if k2 in names)[1]
        out[name] = names[key] + " (roofline)"
    return out


#: name -> MoE model (module docstring)
MOE_MODELS = {"decode_layer": decode_layer, "layer_sim": layer_sim}
