"""A decode layer's MoE block (dispatch, routed experts, combine) from a MoE model's run.

The step replays each layer's MoE block on its clock (``simnode.decode.step``) from a
``MoeRun``: per EP rank, its ``MoePhase`` records in order, each with its time alone, its
HBM bytes, the AI cores and AIVs it holds, and whether it is ``collective`` (an EP kernel:
it starts with an entry barrier over every rank of the EP group, so on the step's clock it
ends no earlier than the last rank's arrival plus its own time). A MoE model is a function
``(topology, model, deployment, routes, costs, batch_window_ns) -> MoeRun`` in ``MOE_MODELS``;
the decode MoE layer (low-latency dispatch and combine, W4A8 experts) is one more entry.

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
LAYER_SIM_NOTE = ("MoE: simnode's MoE layer as it is (NORMAL DeepEP dispatch / combine, experts in "
                  "the contiguous padded layout) until the decode MoE layer (low-latency dispatch / "
                  "combine, W4A8 experts) lands")


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


def routes_for(m: ModelSpec, d: Deployment, routing: dict) -> list[np.ndarray]:
    """Each EP rank's routes for one MoE layer (module docstring); ``routing``: the EP
    family's routing fields plus ``forced_eplb``."""
    if routing["forced_eplb"]:
        return forced_eplb(d.moe_ep, d.tokens_per_chip, m.num_experts, m.top_k)
    from simnode.ep.fields import routes
    params = {**routing, "tokens_per_rank": d.tokens_per_chip, "num_experts": m.num_experts,
              "top_k": m.top_k}
    return [np.asarray(r) for r in routes(params, d.moe_ep)]


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
    run = MoELayerSim(topology, lp, costs, lambda sl: (r[sl] for r in routes)).run()
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
    return MoeRun(tuple(phases), rows, LAYER_SIM_NOTE)


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


#: name -> MoE model (module docstring)
MOE_MODELS = {"layer_sim": layer_sim}
