"""How each kernel of a decode step is timed: one table entry per operation, and a cache.

``TIMINGS`` maps a ``KernelCall.op`` to a ``Timing``: which simnode model times it at the
call's shape and how well that model fits the real operator (``model``):

- ``pipe-level``: simnode's own model of this kernel, run on the pipe-level engine;
- ``proxy``: a simnode kernel of a close operation, run on the pipe-level engine (the entry's
  ``note`` says what differs); with ``rest``, the roofline of what the proxy leaves out is
  added to it (the compressor: its two linears beside its state traffic);
- ``roofline``: no simnode model: the call's roofline at the chip's rates
  (``kernels.roofline_ns``).

Switching an operation to a new model is one entry, e.g. ``"sparse_attn": pipe(_sparse_attn_v4,
"sparse_mla_v4")`` with a ``schedule(chip, call)`` that builds the kernel's schedule from the
call's shape (``v4_attention_params``).

``profile(chip, call, cores)`` times a call once per (chip, operation, format, shape, cores)
in this process (``CACHE``) and returns a ``Profile``: its time alone, its HBM bytes, the AI
cores and AIVs its schedule uses (what it holds of the chip's core pool on the step's
clock), its bottleneck and its model. ``cores`` (0 = all) caps a stream's kernels: the call
runs on a chip with that many AI cores. A profile replays on the supernode clock as one task
whose HBM demand is spread evenly over its time (``simnode.decode.step``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable

from simnode.decode.kernels import CUBE_DTYPE, KernelCall, balanced_rows, roofline_ns

PIPE, PROXY, ROOFLINE = "pipe-level", "proxy", "roofline"
MODELS = (PIPE, PROXY, ROOFLINE)


@dataclass(frozen=True)
class Timing:
    """How one operation is timed (module docstring)."""
    model: str                       #: PIPE, PROXY or ROOFLINE
    source: str                      #: the simnode kernel ("gemm", "tile:tk_rope") or "roofline"
    schedule: Callable | None = None     #: schedule(chip, call) -> KernelSchedule
    rest: Callable | None = None     #: rest(call) -> the KernelCall whose roofline is added
    note: str = ""


@dataclass(frozen=True)
class Profile:
    """A call's cost on one chip, alone (module docstring)."""
    ns: float
    hbm_bytes: float
    aic: int                         #: AI cores' cubes its schedule uses
    aiv: int                         #: AIVs its schedule uses
    bottleneck: str
    model: str
    source: str


def pipe(schedule: Callable, source: str, note: str = "") -> Timing:
    return Timing(PIPE, source, schedule, None, note)


def proxy(schedule: Callable, source: str, note: str, rest: Callable | None = None) -> Timing:
    return Timing(PROXY, source, schedule, rest, note)


def roofline(note: str) -> Timing:
    return Timing(ROOFLINE, "roofline", None, None, note)


# -- schedules from a call's shape ---------------------------------------------------------

def _gemm(chip, c: KernelCall):
    from simnode.kernels.gemm import GemmParams, gemm_schedule
    s = c.dims()
    return gemm_schedule(chip, GemmParams(s["m"], s["n"], s["k"], CUBE_DTYPE[c.dtype]))


def _hadamard(chip, c: KernelCall):
    from simnode.kernels.gemm import GemmParams, gemm_schedule
    s = c.dims()
    return gemm_schedule(chip, GemmParams(s["rows"], s["width"], s["width"], "bf16"))


def _batch_gemm(chip, c: KernelCall):
    """A batch of equal GEMMs (every group ``max_rows`` rows), each with its own A and B."""
    from simnode.kernels.gemm import GemmParams, gemm_schedule
    s = c.dims()
    return gemm_schedule(chip, GemmParams(s["max_rows"], s["n"], s["k"], CUBE_DTYPE[c.dtype], gemms=s["groups"]))


def _grouped(chip, c: KernelCall):
    from simnode.kernels.grouped_gemm import GroupedGemmParams, grouped_gemm_schedule
    s = c.dims()
    rows = balanced_rows(s["rows"], s["groups"])
    return grouped_gemm_schedule(chip, GroupedGemmParams(rows, s["n"], s["k"], "fp8", CUBE_DTYPE[c.dtype],
                                                         "bf16", "masked"))


#: the deployment's KV format (``deployment.KV_FORMATS``) -> (window cache, compressed cache)
#: row format of the v4 kernel (``sparse_mla.plan.KV_ROW_BYTES``): ascend_fp8 is the 640-B C8
#: entry; fmla_fp8 runs as simnode's 528-B FP8 row (FlashMLA V3.2's layout: the 584-B V4 row
#: differs by its RoPE part, not modeled); fp4_compressed, a what-if, reads FlashMLA's 288-B
#: FP4 rows through their dequant VF (the published op has no FP4 KV mode)
V4_KV_DTYPES = {"ascend_fp8": ("c8", "c8"), "fmla_fp8": ("fp8", "fp8"), "bf16": ("bf16", "bf16"),
                "fp4_compressed": ("c8", "fp4")}


def v4_attention_params(c: KernelCall):
    """The v4 kernel's ``SparseMlaParams`` of a sparse_attn call: its shape, the op's fixed
    tiling (``v4.OP_FIELDS``), the graph replay's cold start (``graph_replay``: the step is
    one npugraph_ex replay, facts v4-decode 2) and no launch of its own: the step puts its
    launch gap (``program.Gaps.launch_gap_ns``, the same S6 figure) before every kernel."""
    from simnode.kernels.sparse_mla import SparseMlaParams, v4
    s = c.dims()
    main, extra = V4_KV_DTYPES[c.dtype]
    ratio = {"csa": {"csa_ratio": s["ratio"]}, "hca": {"hca_ratio": s["ratio"]}}.get(s["layer"], {})
    return SparseMlaParams(**v4.OP_FIELDS, **ratio, layer=s["layer"], batch=s["batch"], s_q=s["s_q"],
                           heads=s["heads"], d_qk=s["dim"], d_v=s["dim"], context_len=s["context"],
                           window=s["window"], topk_extra=max(1, s["topk"]), main_dtype=main,
                           extra_dtype=extra, graph_replay=True, kernel_launch_ns=0.0)


def _sparse_attn_v4(chip, c: KernelCall):
    from simnode.kernels.sparse_mla import sparse_mla_schedule
    return sparse_mla_schedule(chip, v4_attention_params(c))


def _sampler(chip, c: KernelCall):
    from simnode.kernels.topk import TopkParams, topk_schedule
    s = c.dims()
    return topk_schedule(chip, TopkParams(s["rows"], s["vocab"], 1))


def _indexer(chip, c: KernelCall):
    """CANN's quant_lightning_indexer (the op CR calls on the 950), its top-k fused."""
    from simnode.kernels.indexer import IndexerParams, indexer_schedule
    s = c.dims()
    return indexer_schedule(chip, IndexerParams(
        kernel="cann", batch=s["batch"], q_per_seq=s["s_q"], context=s["context"], compress_ratio=s["ratio"],
        heads=s["heads"], head_dim=s["dim"], topk=s["topk"]))


def _swiglu(chip, c: KernelCall):
    from simnode.kernels.swiglu import SwigluParams, swiglu_schedule
    s = c.dims()
    return swiglu_schedule(chip, SwigluParams(s["rows"], s["width"], sf_dtype="ue8m0", scale_block=32))


@lru_cache(maxsize=None)
def _program(name: str):
    from simnode import tile
    from simnode.tile import program as programs
    path = Path(tile.__file__).parent / "programs" / f"{name}.py"
    return programs.load(path, f"simnode.decode.timing ({name})")


def tile_program(name: str, fixed: dict | None = None, **dims: str) -> Callable:
    """A schedule builder for the tile program ``name`` whose parameters take the call's
    dimensions (``num_tokens="rows"``), or a fixed value (an int, or any value in ``fixed``)."""
    def schedule(chip, c: KernelCall):
        from simnode.tile import lower
        from simnode.tile import program as programs
        s = c.dims()
        args = {p: (s[v] if isinstance(v, str) else v) for p, v in dims.items()} | (fixed or {})
        return lower.to_schedule(programs.build(_program(name), chip, args), name)
    return schedule


def _compressor_rest(c: KernelCall) -> KernelCall:
    """What the compressor's two linears leave out: its state traffic and vector work."""
    s = c.dims()
    linears = s["n"] * s["k"] * 2 + s["m"] * s["k"] * 2
    return replace(c, flops=0.0, hbm_bytes=max(c.hbm_bytes - linears, 0.0))


#: operation -> how it is timed (module docstring). An entry marked proxy or roofline is
#: waiting for its kernel model: when one lands, its entry changes here and nowhere else.
TIMINGS = {
    "gemm": pipe(_gemm, "gemm", "MXFP8 / BF16 GEMM at decode M"),
    "compressor": proxy(_gemm, "gemm", "its two BF16 linears as one GEMM; the state update, gated "
                        "pooling, norm and RoPE as a roofline", _compressor_rest),
    "hadamard": proxy(_hadamard, "gemm", "x @ Hadamard as a BF16 GEMM"),
    "rmsnorm": proxy(tile_program("tk_rmsnorm_cast", num_tokens="rows", hidden="width"),
                     "tile:tk_rmsnorm_cast", "TileKernels RMSNorm + per-token FP8 cast (CR's writes BF16)"),
    "mx_quant": proxy(tile_program("tk_per_token_cast", num_tokens="rows", hidden="width"),
                      "tile:tk_per_token_cast", "TileKernels per-token FP8 cast (MX: a scale per 32)"),
    "rope": proxy(tile_program("tk_rope", seqlen="rows", nheads="heads", rot_dim="rot_dim"),
                  "tile:tk_rope", "TileKernels RoPE on rot_dim of each head"),
    "hc_pre": pipe(tile_program("v4_hc_pre", num_tokens="rows", hidden="hidden", lanes="lanes", iters="iters"),
                   "tile:v4_hc_pre", "CR's fused npu_hc_pre, its mix GEMM in HF32"),
    "hc_post": pipe(tile_program("v4_hc_post", num_tokens="rows", hidden="hidden", lanes="lanes"),
                    "tile:v4_hc_post", "CR's fused npu_hc_post"),
    "hc_head": proxy(tile_program("v4_hc_pre", {"head": True, "mode": "fp32"}, num_tokens="rows",
                                  hidden="hidden", lanes="lanes"), "tile:v4_hc_pre",
                     "hc_head as npu_hc_pre's kernel without post / comb: split-K FP32 mix (torch_npu "
                     "matmul.allow_hf32 defaults to False), gate, lane sum; CR's op form not known"),
    # the four below stay rooflines: together under 0.5 % of either published step (kv / indexer
    # epilogs 0.03-0.2 us, embedding 0.05-4 us, add 0.03-2.5 us a launch); a few rows at M = 4
    # leave them latency-bound (a GM load and a store, ~0.5 us as the tile proxies show), which
    # a roofline does not see: ~0.1 ms over a step's ~200 such launches
    "kv_epilog": roofline("kv_compress_epilog: no simnode model"),
    "indexer_epilog": roofline("indexer_compress_epilog: no simnode model"),
    "embedding": roofline("embedding gather: no simnode model"),
    "add": roofline("elementwise add: no simnode model"),
    "lightning_indexer": pipe(_indexer, "lightning_indexer", "CANN's quant_lightning_indexer, top-k fused"),
    "sampler": proxy(_sampler, "topk", "DeepSelect top-1 over the vocabulary"),
    "sparse_attn": pipe(_sparse_attn_v4, "sparse_mla_v4", "npu_kv_quant_sparse_attn_sharedkv: the window "
                        "and the compressed entries as 640-B C8 rows, MTP rows causal, dealt by its "
                        "metadata op; graph-replay cold start, the launch is the step's gap"),
    "batch_gemm": pipe(_batch_gemm, "gemm", "npu_transpose_quant_batchmatmul: o_groups MXFP8 GEMMs "
                       "of M rows, each its own A and B, their blocks dealt together"),
    "grouped_gemm": pipe(_grouped, "grouped_gemm", "masked grouped GEMM, MXFP4 weights decoded on AIV0"),
    "swiglu_quant": pipe(_swiglu, "swiglu", "SwiGLU + MX FP8 cast"),
    "gate_topk": proxy(tile_program("tk_topk_gate", num_tokens="rows", num_experts="experts",
                                    num_topk="top_k"), "tile:tk_topk_gate", "TileKernels top-k gate"),
}

#: profiles timed in this process: (chip, op, dtype, shape, cores, timing) -> Profile
CACHE: dict = {}


def timing_of(call: KernelCall) -> Timing:
    if call.op not in TIMINGS:
        raise KeyError(f"no timing for operation '{call.op}' ({call.name}): add it to TIMINGS")
    return TIMINGS[call.op]


def profile(chip, call: KernelCall, cores: int = 0) -> Profile:
    """The call's ``Profile`` on ``chip`` with at most ``cores`` AI cores (0 = all)."""
    t = timing_of(call)
    key = (repr(chip), call.op, call.dtype, call.shape, cores, t)
    if key not in CACHE:
        CACHE[key] = _measure(chip, call, cores, t)
    return CACHE[key]


def _measure(chip, call: KernelCall, cores: int, t: Timing) -> Profile:
    if cores and cores < chip.num_ai_cores:
        chip = replace(chip, num_ai_cores=cores)
    if t.schedule is None:
        ns, bound = roofline_ns(call, chip)
        aic = chip.num_ai_cores if call.flops else 0
        aiv = chip.num_ai_cores * chip.aiv_per_core if (call.vector_ops or not call.flops) else 0
        return Profile(ns, call.hbm_bytes, aic, aiv, f"roofline: {bound}", t.model, t.source)
    sched = t.schedule(chip, call)
    ns, hbm_bytes, bottleneck = run_schedule(chip, sched)
    aic, aiv = cores_used(sched)
    if t.rest is not None:
        rest_ns, bound = roofline_ns(t.rest(call), chip)
        ns += rest_ns
        hbm_bytes += t.rest(call).hbm_bytes
        bottleneck += f" + roofline: {bound}"
    return Profile(ns, hbm_bytes, aic, aiv, bottleneck, t.model, t.source)


def run_schedule(chip, sched) -> tuple[float, float, str]:
    """(makespan ns, HBM bytes, busiest resource) of a schedule alone on the pipe-level engine."""
    from simnode.hardware.chip import ChipSim
    from simnode.instr import isa
    run = ChipSim(chip).run(sched)
    span = run.makespan_ns or 1.0
    cands = [(v, isa.PIPE_NAMES.get(k, k)) for k, v in run.busy_frac().items()]
    cands += [(run.l2_bytes / span / chip.memory.l2_bandwidth_GBps, "L2 bandwidth"),
              (run.hbm_bytes / span / chip.memory.hbm_bandwidth_GBps, "HBM bandwidth")]
    return run.makespan_ns, run.hbm_bytes, min(cands, key=lambda c: (-c[0], c[1]))[1]


def cores_used(sched) -> tuple[int, int]:
    """(AICs, AIVs) that have instructions in a schedule."""
    aic = aiv = 0
    for prog in sched.cores:
        units = {unit for (unit, _), instrs in prog.pipes.items() if instrs}
        aic += "aic" in units
        aiv += sum(1 for u in units if u != "aic")
    return aic, aiv
