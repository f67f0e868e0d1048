"""Grouped GEMM of MoE experts after DeepGEMM-Ascend's m-grouped kernels (facts 3.5, S3):
C_e[m_e, n] = A_e[m_e, k] x B_e[k, n] for every local expert e, in one launch.

``GroupedGemmParams`` names the shape (tokens per expert, n, k), the dtypes and the layout;
``grouped_tiling`` the tiles; ``expert_blocks`` the m-blocks each expert is cut into (what
is loaded, what holds tokens, what the cube computes); ``grouped_gemm_schedule`` the
per-core programs; ``grouped_gemm_roofline`` the lower bounds. Pure functions: no SimPy.

Layouts (moe-layer facts 2):

- ``contiguous`` (normal dispatch's output): the experts' rows in one buffer, each expert's
  segment padded up to BLOCK_M. S3's m-grouped kernel computes every block at full BLOCK_M
  (``Scheduler::get_actual_m`` returns BLOCK_M for MGroupedContiguousWithPsumLayout), so the
  padding rows of a segment's last block are loaded, multiplied and stored.
- ``masked`` (low-latency dispatch's output): a buffer of ``max_m`` rows per expert and a
  valid count m_e. As DeepGEMM's masked scheduler does (S3 has no masked kernel; its CUDA
  parent deepseek-ai/DeepGEMM ``scheduler.cuh``), an expert gets ceil(m_e / BLOCK_M)
  m-blocks: blocks past its count are never scheduled (no load, no MMAD, no store). In its
  last block the full tile is loaded and stored, and a MAD sub-tile whose rows all lie past
  m_e skips its MMADs (``is_computation_valid(m_block_idx, m_offset)``).

- ``packed`` (the low-latency dispatch's 2-D output with per-expert counts, facts v4-decode
  3, fed to CANN's GroupedMatmul with a group list of counts): the experts' rows back to back
  with no padding; only with ``impl = cann``, whose blocks load, multiply and store exactly
  their rows.

Blocks are dealt as S3's scheduler deals them: expert after expert, each expert's m x n
blocks swizzled as the dense GEMM's, block i to core i mod cores. Each expert's B_e is its
own GM region, so L2 reuse of B is per expert.

Kernels (``impl``): ``deepgemm`` is S3's, as above. ``cann`` is the kernel DeepSeek-V4 runs
for its MXFP4 routed experts on the 950 (CR module/quantization/mxfp4.py: torch_npu
``npu_grouped_matmul`` with FP8 x and ``float4_e2m1fn_x2`` weights plus E8M0 antiquant
scales), CANN's weight-quant grouped matmul (hicann/ops-transformer gmm/grouped_matmul,
op_kernel/arch35/weight_quant_basic_block and op_tiling/arch35/grouped_weight_quant_batch_
matmul_tiling): the 950 cube has no MXFP8 x MXFP4 MMAD (the GroupedMatmul MX table pairs FP8
with FP8 and FP4 with FP4 only), so the AIVs decode FP4 to FP8 and the cube runs MX FP8.
Its choices, each from that source: basic blocks of baseM = 256 rows (an expert of 257..512
rows is cut in 2 equal blocks, of 513..1023 in 4: the controller's rule) by baseN = 256
columns, 128 when n < 256 x cores; K steps of baseK 64 and L1 tiles of 4 of them (256); the
weight tile double-buffered in L1; blocks dealt expert after expert, m-block major, n-block
minor, round robin over the cores across experts; BOTH AIVs of a core decode ("c:v 1:2, the
cube's data comes from two vector cores"), each half of every tile, with 4 UB buffers
(MTE2_INNER_SIZE_256_BUF_NUM_4) and the bit-op VF (``gemm.core.DEQUANT_VFS``); C leaves
L0C straight to GM. Each basic block decodes its B over all of K, so an expert's B is decoded
once per m-block: once for up to 256 rows.

Dtypes: BF16 x BF16 and FP8 x FP8 run the cube at their own rate. FP8 activations with
FP4 (MXFP4) weights take S3's Dequant-B path: AIV0 of each core loads B as packed FP4,
decodes it to FP8 on the vector unit and pushes it UB -> L1; the cube runs FP8. FP8/FP4
operands carry MX scales (one UE8M0 byte per 32 K elements, facts 1.1); activations
quantized per 128 channels (SwiGLU + cast, dispatch) are turned into that layout by S3's
``transform_sf`` before the GEMM, which is not part of this kernel. C is written through
the UB of AIV1 (S3 ``can_direct_store`` allows the direct L0C -> GM store only for
GemmType::Normal).
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from dataclasses import dataclass

from simnode.config.chip import ChipSpec
from simnode.config.params import param
from simnode.errors import ScheduleError
from simnode.kernels import num_cores_param, unchosen
from simnode.kernels.gemm.core import (MX_SCALE_K_PER_BYTE, BlockTask, DequantB, GemmTiling,
                                       buffer_plan, core_program, decode_vf, dequant_ub_stages,
                                       dtype_bytes,
                                       fit_block_k, is_scaled, l0_k_step, l0c_split, max_l1_stages,
                                       stage_bytes, sub_tiles, swizzle, tile_cost_cycles, ub_epilogue,
                                       up16, live_sub_tiles)
from simnode.instr.schedule import CoreProgram, KernelSchedule

LAYOUTS = ("contiguous", "masked", "packed")
#: which published kernel (module docstring): DeepGEMM-Ascend's (S3) or CANN's weight-quant
#: grouped matmul (FP8 x MXFP4 only)
IMPLS = ("deepgemm", "cann")
#: CANN's weight-quant grouped matmul tiling (op_tiling/arch35/grouped_weight_quant_batch_
#: matmul_tiling.h: BASIC_BLOCK_BASE_M 256, BASIC_BLOCK_BASE_N 256, BASIC_BLOCK_BASE_K 64,
#: STEP_K_4); its UB buffers per AIV (Mte2Configuration MTE2_INNER_SIZE_256_BUF_NUM_4) and its
#: double-buffered L1 weight tile (weight_quant_basic_block.h: cvLoopIdx & 1)
CANN_BASE_M = 256
CANN_BASE_N = 256
CANN_BASE_K = 64
CANN_STEP_K = 4
CANN_UB_BUFFERS = 4
CANN_L1_STAGES = 2
#: (activation dtype, weight dtype) -> the cube's input dtype. S3 get_gemm_dtype: BF16 x BF16,
#: FP8 x FP8, and FP8 x packed FP4, whose B is dequantized to FP8 before the cube (dequant_b)
CUBE_DTYPE = {("bf16", "bf16"): "bf16", ("fp8", "fp8"): "fp8", ("fp8", "fp4"): "fp8"}
#: S3 dtype_to_cd_kernel_type: BF16 or FP32 C (an FP8 C needs the QuantizeToFP8 epilogue and
#: its scale output, not modeled here)
OUT_DTYPES = ("bf16", "fp32")
#: S3 Runtime::kMkAlignment: the m-grouped contiguous layout aligns each expert's segment,
#: and fixes BLOCK_M, to 256 (make_gemm_candidate rejects any other BLOCK_M)
CONTIGUOUS_BLOCK_M = 256
#: DeepGEMM's masked kernels pick BLOCK_M from {64, 128} (deepseek-ai/DeepGEMM heuristics,
#: GemmType::MGroupedMasked); S3 has no masked kernel, so the choice here minimizes the same
#: per-wave estimate the dense heuristic minimizes
MASKED_BLOCK_M_CANDIDATES = (64, 128)
#: S3 make_gemm_candidate: the dequant kernel takes BLOCK_K <= 512, with B rows of 256 or 512
#: FP4 values (K-major B: a row is BLOCK_K long)
DEQUANT_BLOCK_K = (256, 512)


@dataclass(frozen=True)
class GroupedGemmParams:
    """The grouped GEMM's parameters, declared once here (``simnode.config.params``); the
    ``grouped_gemm`` workload adds how ``m_per_expert`` is made (given or routed)."""
    m_per_expert: tuple          #: tokens (rows) routed to each local expert (filled by the caller)
    n: int = param(doc="output columns per expert (e.g. 2 x intermediate: gate + up)", unit="columns",
                   min=1)
    k: int = param(doc="reduction length (e.g. hidden)", unit="elements", min=1)
    act_dtype: str = param("fp8", "A dtype: bf16 or fp8 (with MX scales)",
                           choices=tuple(sorted({a for a, _ in CUBE_DTYPE})))
    weight_dtype: str = param("fp8", "B dtype: bf16, fp8, or fp4 (MXFP4, dequantized on AIV0)",
                              choices=tuple(sorted({w for _, w in CUBE_DTYPE})))
    out_dtype: str = param("bf16", "C dtype", choices=OUT_DTYPES)
    layout: str = param("contiguous", "contiguous (normal dispatch), masked (DeepEP CUDA's low "
                        "latency) or packed (DeepEP-Ascend's low latency; impl cann)",
                        choices=LAYOUTS)
    max_m: int = param(0, "masked: rows per expert in the buffer (0 = the largest count)",
                       unit="rows", min=0)
    block_m: int = param(0, "BLOCK_M (0 = 256 contiguous, 64/128 by estimate masked)", unit="rows",
                         min=0)
    block_n: int = param(0, "BLOCK_N (0 = as much of L0C as BLOCK_M leaves, S3)", unit="columns",
                         min=0)
    block_k: int = param(0, "BLOCK_K per L1 stage (0 = 256 B of K, doubled while 3 L1 stages fit)",
                         unit="elements", min=0)
    l1_stages: int = param(0, "L1 buffering stages (0 = as many as fit, <= 4 with scales)",
                           unit="stages", min=0)
    swizzle_rows: int = param(4, "block-rows per swizzle group (facts 3.5)", unit="block-rows", min=1)
    num_cores: int = num_cores_param()
    impl: str = param("deepgemm", "kernel: deepgemm (DeepGEMM-Ascend, S3) or cann (CANN's "
                      "weight-quant grouped matmul: FP8 x FP4, packed layout)", choices=IMPLS)

    def __post_init__(self):
        # counts may come as NumPy integers (routing); keep plain ints (hashing, JSON meta)
        object.__setattr__(self, "m_per_expert", tuple(
            int(m) if isinstance(m, numbers.Integral) and not isinstance(m, bool) else m
            for m in self.m_per_expert))

    @property
    def cube_dtype(self) -> str:
        return CUBE_DTYPE[(self.act_dtype, self.weight_dtype)]

    @property
    def dequant_b(self) -> bool:
        return self.weight_dtype == "fp4"

    @property
    def tokens(self) -> int:
        return sum(self.m_per_expert)

    @property
    def buffer_m(self) -> int:
        """Rows per expert in the masked buffer."""
        return self.max_m or max(self.m_per_expert, default=0)


@dataclass(frozen=True)
class ExpertBlock:
    """One m-block of one expert (every n-block of it alike)."""
    expert: int
    index: int          #: m-block within the expert
    row0: int           #: first expert-local row
    rows: int           #: rows loaded from A and stored to C
    valid: int          #: rows that hold tokens
    computed: int       #: rows the cube multiplies (rows of the MAD sub-tiles it runs)
    a_tag: object       #: names the A rows in GM (the L2 model's region)


def _err(p: GroupedGemmParams, msg: str) -> ScheduleError:
    return ScheduleError(f"grouped GEMM ({len(p.m_per_expert)} experts, n={p.n}, k={p.k}): {msg}")


def _validate(p: GroupedGemmParams) -> None:
    if not p.m_per_expert:
        raise _err(p, "m_per_expert is empty; expected a token count per local expert.")
    for e, m in enumerate(p.m_per_expert):
        if isinstance(m, bool) or not isinstance(m, int) or m < 0:
            raise _err(p, f"m_per_expert[{e}] = {m!r}: expected an integer >= 0.")
    for name in ("n", "k"):
        if getattr(p, name) <= 0:
            raise _err(p, f"{name} = {getattr(p, name)}: expected a positive size.")
    if (p.act_dtype, p.weight_dtype) not in CUBE_DTYPE:
        pairs = ", ".join(f"{a} x {w}" for a, w in CUBE_DTYPE)
        raise _err(p, f"activations {p.act_dtype} x weights {p.weight_dtype}: expected one of {pairs}.")
    bad = unchosen(p, out_dtype=OUT_DTYPES, layout=LAYOUTS, impl=IMPLS)
    if bad:
        raise _err(p, bad)
    if p.impl == "cann" and (p.act_dtype, p.weight_dtype, p.layout) != ("fp8", "fp4", "packed"):
        raise _err(p, f"impl cann is CANN's weight-quant grouped matmul: FP8 activations x FP4 "
                      f"weights in the packed layout, not {p.act_dtype} x {p.weight_dtype} "
                      f"{p.layout} (its MX FP8 x FP8 kernel is not modeled: use impl deepgemm).")
    if p.layout == "packed" and p.impl != "cann":
        raise _err(p, "layout packed is the input of CANN's grouped matmul: set impl cann.")
    if p.layout == "masked" and p.max_m and p.max_m < max(p.m_per_expert):
        raise _err(p, f"max_m = {p.max_m} is below the largest expert count "
                      f"{max(p.m_per_expert)}: the masked buffer holds max_m rows per expert.")
    for name in ("block_m", "block_n"):
        v = getattr(p, name)
        if v < 0 or v % 16:
            raise _err(p, f"{name} = {v}: expected 0 (heuristic) or a multiple of 16 (the "
                          f"16-row NZ fractal, facts 1.3).")


def _block_n(chip: ChipSpec, p: GroupedGemmParams, bm: int) -> int:
    """S3 select_gemm_config, m-grouped: BLOCK_N = what L0C leaves beside BLOCK_M (fp32),
    at most the padded n, and (facts 3.5) at most 512, or 256 for FP4 / dequant-B."""
    cap = 256 if p.dequant_b or p.cube_dtype == "fp4" else 512
    fill = chip.buffers.capacity_bytes("l0c") // (4 * bm) // 16 * 16
    return max(16, min(cap, fill, up16(p.n)))


def _block_k(chip: ChipSpec, p: GroupedGemmParams, bm: int, bn: int) -> tuple[int, int]:
    dt = p.cube_dtype
    if p.block_k:
        return p.block_k, min(max_l1_stages(dt), chip.buffers.capacity_bytes("l1")
                              // stage_bytes(bm, bn, p.block_k, dt))
    return fit_block_k(chip, bm, bn, p.k, dt, max(DEQUANT_BLOCK_K) if p.dequant_b else 0)


def _num_m_blocks(p: GroupedGemmParams, bm: int) -> int:
    if p.layout == "contiguous":
        return sum(-(-m // bm) for m in p.m_per_expert)
    return sum(-(-min(m, p.buffer_m) // bm) for m in p.m_per_expert)


def _masked_block_m(chip: ChipSpec, p: GroupedGemmParams, cores: int) -> int:
    best = None
    for bm in MASKED_BLOCK_M_CANDIDATES:
        bn = p.block_n or _block_n(chip, p, bm)
        bk, stages = _block_k(chip, p, bm, bn)
        if bm * bn * 4 > chip.buffers.capacity_bytes("l0c") or stages < 2:
            continue
        blocks = _num_m_blocks(p, bm) * math.ceil(p.n / bn)
        active = max(1, min(blocks, cores))
        est = math.ceil(blocks / cores) * tile_cost_cycles(chip, bm, bn, p.k, p.cube_dtype, active)
        if best is None or (est, -bm) < best[0]:
            best = ((est, -bm), bm)
    if best is None:
        raise _err(p, f"no masked BLOCK_M of {MASKED_BLOCK_M_CANDIDATES} fits the buffers of "
                      f"'{chip.name}'.")
    return best[1]


def cann_block_m(m: int, base: int = CANN_BASE_M) -> int:
    """Rows of an expert's basic blocks in CANN's grouped matmul (its controller: baseM, or
    the expert cut in 2 or 4 equal blocks when it holds base+1 .. 4 base - 1 rows)."""
    if m <= base or m >= 4 * base:
        return base
    return -(-m // 2) if m <= 2 * base else -(-m // 4)


def _cann_tiling(chip: ChipSpec, p: GroupedGemmParams, cores: int) -> GemmTiling:
    """CANN's tiles (module docstring): baseN halved when n < baseN x cores."""
    bm = p.block_m or CANN_BASE_M
    bn = p.block_n or (CANN_BASE_N if p.n >= CANN_BASE_N * cores else CANN_BASE_N // 2)
    bk = p.block_k or CANN_BASE_K * CANN_STEP_K
    sub_m, sub_n = l0c_split(chip, bm, bn)
    return GemmTiling(bm, bn, bk, CANN_BASE_K, p.l1_stages or CANN_L1_STAGES, sub_m, sub_n, cores)


def grouped_tiling(chip: ChipSpec, p: GroupedGemmParams) -> GemmTiling:
    """Tiles of a grouped GEMM: BLOCK_M fixed for the layout (facts 3.5: m-grouped GEMM uses
    a fixed BLOCK_M), BLOCK_N from L0C (S3), BLOCK_K and L1 stages by the dense rules; CANN's
    tiles for ``impl = cann``."""
    _validate(p)
    cores = p.num_cores or chip.num_ai_cores
    if p.impl == "cann":
        return _cann_tiling(chip, p, cores)
    dt = p.cube_dtype
    if p.block_m:
        bm = p.block_m
    elif p.layout == "contiguous":
        bm = CONTIGUOUS_BLOCK_M
    else:
        bm = _masked_block_m(chip, p, cores)
    bn = p.block_n or _block_n(chip, p, bm)
    if bm * bn * 4 > chip.buffers.capacity_bytes("l0c"):
        raise _err(p, f"block {bm}x{bn}: its fp32 accumulator ({bm * bn * 4} B) exceeds L0C "
                      f"({chip.buffers.capacity_bytes('l0c')} B) of '{chip.name}'.")
    bk, stages = _block_k(chip, p, bm, bn)
    stages = p.l1_stages or stages
    if p.dequant_b and (bk not in DEQUANT_BLOCK_K or bn % 2):
        raise _err(p, f"FP4 weights: BLOCK_K = {bk}: the dequant kernel takes BLOCK_K of "
                      f"{' or '.join(map(str, DEQUANT_BLOCK_K))} and an even BLOCK_N (S3).")
    if stages < 2:
        raise _err(p, f"tiles {bm}x{bn}x{bk} {dt}: fewer than 2 L1 stages fit the L1 of "
                      f"'{chip.name}'.")
    kl0 = l0_k_step(chip, bm, bn, bk, dt)
    if kl0 == 0:
        raise _err(p, f"tiles {bm}x{bn}x{bk} {dt}: no L0 k-step fits half of L0A/L0B of "
                      f"'{chip.name}'.")
    sub_m, sub_n = l0c_split(chip, bm, bn)
    return GemmTiling(bm, bn, bk, kl0, stages, sub_m, sub_n, cores)


def expert_blocks(p: GroupedGemmParams, t: GemmTiling) -> list[ExpertBlock]:
    """Each expert's m-blocks in order; an expert without tokens has none."""
    bm = t.block_m
    out = []
    mb = 0                                   # contiguous: m-block index in the shared buffer
    cap = p.buffer_m
    for e, m in enumerate(p.m_per_expert):
        if p.layout == "packed":                 # CANN: blocks of exactly their rows
            bme = cann_block_m(m, bm)
            for j in range(-(-m // bme)):
                rows = min(bme, m - j * bme)
                out.append(ExpertBlock(e, j, j * bme, rows, rows, rows, (e, j)))
            continue
        for j in range(-(-m // bm)):
            row0 = j * bm
            valid = min(bm, m - row0)
            if p.layout == "contiguous":
                rows, computed, tag = bm, bm, mb
            else:
                rows = min(bm, cap - row0)
                subs = sub_tiles(rows, 1, t)
                live = live_sub_tiles(subs, valid, t)
                computed = sum(sm for (sm, _), on in zip(subs, live) if on)
                tag = (e, j)
            out.append(ExpertBlock(e, j, row0, rows, valid, computed, tag))
            mb += 1
    return out


def padding_frac(blocks: list[ExpertBlock]) -> float:
    """Rows the cube computes without a token in them, over all rows it computes."""
    computed = sum(b.computed for b in blocks)
    return 1.0 - sum(b.valid for b in blocks) / computed if computed else 0.0


def grouped_gemm_schedule(chip: ChipSpec, p: GroupedGemmParams) -> KernelSchedule:
    """The per-core programs of one grouped GEMM; raises ScheduleError for shapes or tiles
    the hardware cannot run. ``flops`` counts useful work only: 2 x sum_e m_e x n x k."""
    t = grouped_tiling(chip, p)
    eblocks = expert_blocks(p, t)
    nbs = math.ceil(p.n / t.block_n)
    tasks = []
    masked = p.layout == "masked"
    first = 0
    while first < len(eblocks):
        last = first
        while last < len(eblocks) and eblocks[last].expert == eblocks[first].expert:
            last += 1
        group = eblocks[first:last]
        order = ([(j, nb) for j in range(len(group)) for nb in range(nbs)] if p.impl == "cann"
                 else swizzle(len(group), nbs, p.swizzle_rows))
        for j, nb in order:
            b = group[j]
            c_tag = (b.expert, b.index, nb) if masked else (b.a_tag, nb)
            tasks.append(BlockTask(b.rows, min(t.block_n, p.n - nb * t.block_n), b.a_tag,
                                   (b.expert, nb), c_tag, b.valid if masked else -1))
        first = last
    dt = p.cube_dtype
    # CANN's C leaves L0C straight to GM (its matmul's C is a GM tensor); S3's m-grouped C
    # through AIV1's UB
    epilogue = None if p.impl == "cann" else ub_epilogue(chip, t, p.out_dtype, len(tasks))
    dequant, dq_stage = None, 0
    if p.impl == "cann":
        dq_stage = dequant_ub_stages(chip, t.block_n, t.block_k)[1]
        dequant = DequantB(CANN_UB_BUFFERS, t.block_n // 2, units=("aiv0", "aiv1"), vf="bitops")
    elif p.dequant_b:
        ub_stages, dq_stage = dequant_ub_stages(chip, t.block_n, t.block_k)
        if ub_stages < 1:
            raise _err(p, f"FP4 weights: one dequant stage ({dq_stage} B) does not fit the UB "
                          f"of '{chip.name}'.")
        dequant = DequantB(ub_stages, t.block_n // 2)
    cores = [CoreProgram(c) for c in range(min(t.num_cores, len(tasks)))]
    loads: dict = {}                    # tile loads shared by the cores
    for c, prog in enumerate(cores):
        core_program(prog, tasks[c::t.num_cores], p.k, dt, p.out_dtype, t, epilogue, dequant,
                     loads)
        prog.buffers = buffer_plan(dt, t, epilogue, dequant, p.out_dtype, dq_stage)
    flops = 2.0 * p.tokens * p.n * p.k
    meta = {"kind": "grouped_gemm", "impl": p.impl, "layout": p.layout, "experts": len(p.m_per_expert),
            "tokens": p.tokens, "n": p.n, "k": p.k, "act_dtype": p.act_dtype,
            "weight_dtype": p.weight_dtype, "block_m": t.block_m, "block_n": t.block_n,
            "block_k": t.block_k, "k_l0": t.k_l0, "l1_stages": t.l1_stages,
            "sub_tile": f"{t.sub_m}x{t.sub_n}", "epilogue_stages": epilogue.stages if epilogue else 0,
            "m_blocks": len(eblocks), "num_blocks": len(tasks),
            "waves": math.ceil(len(tasks) / t.num_cores),
            "rows_computed": sum(b.computed for b in eblocks),
            "padding_frac": padding_frac(eblocks)}
    if dequant is not None:
        meta["dequant_ub_stages"] = dequant.ub_stages
    sched = KernelSchedule(f"grouped_gemm_{len(p.m_per_expert)}x{p.n}x{p.k}_{p.act_dtype}x"
                           f"{p.weight_dtype}_{p.layout}", cores, flops, meta)
    sched.check_buffers(chip)
    return sched


def grouped_gemm_roofline(chip: ChipSpec, p: GroupedGemmParams, sched: KernelSchedule | None = None) -> dict:
    """Lower bounds in ns: the cube at peak over the computed (padded) rows, unique bytes over
    HBM, every GM load over L2, and (FP4 weights) the decoder of the AIV that dequantizes.
    ``sched`` is not read: the bounds follow from the params and the tiling."""
    t = grouped_tiling(chip, p)
    eblocks = expert_blocks(p, t)
    dt = p.cube_dtype
    nbs = math.ceil(p.n / t.block_n)
    computed = sum(b.computed for b in eblocks)
    # the cores the kernel may use: fewer than the chip's when communication holds some
    peak_flop_per_ns = 2 * chip.cube.macs_per_cycle[dt] * chip.aic_freq_GHz * t.num_cores
    compute_ns = 2.0 * computed * p.n * p.k / peak_flop_per_ns
    a_rows = sum(b.rows for b in eblocks)
    used = len({b.expert for b in eblocks})
    sf = (lambda rows: rows * p.k // MX_SCALE_K_PER_BYTE) if is_scaled(dt) else (lambda rows: 0)
    unique = (dtype_bytes(a_rows * p.k, p.act_dtype) + sf(a_rows)
              + used * (dtype_bytes(p.n * p.k, p.weight_dtype) + sf(p.n))
              + dtype_bytes(a_rows * p.n, p.out_dtype))
    hbm_ns = unique / chip.memory.hbm_bandwidth_GBps
    # loads: every (m-block, n-block) task reads its A and B (and scale) tiles once per K
    # block; tasks with the same rows read the same bytes, so each row count is summed once
    kbs = [min(t.block_k, p.k - kb * t.block_k) for kb in range(math.ceil(p.k / t.block_k))]
    cols = [min(t.block_n, p.n - nb * t.block_n) for nb in range(nbs)]
    R = t.block_n // 2
    b_bytes = 0                              # B (and its scales) of one m-block's n-blocks
    for c in cols:
        for kk in kbs:
            if p.dequant_b:
                b_bytes += sum(min(c - h * R, R) * -(-kk // 2) for h in range(-(-c // R)))
            else:
                b_bytes += dtype_bytes(kk * c, dt)
            if is_scaled(dt):
                b_bytes += max(1, c * kk // MX_SCALE_K_PER_BYTE)
    load_bytes = len(eblocks) * b_bytes
    for rows, count in Counter(b.rows for b in eblocks).items():
        a_bytes = sum(dtype_bytes(rows * kk, dt) + (max(1, rows * kk // MX_SCALE_K_PER_BYTE)
                                                     if is_scaled(dt) else 0) for kk in kbs)
        load_bytes += count * nbs * a_bytes
    l2_ns = load_bytes / chip.memory.l2_bandwidth_GBps
    out = {"compute_ns": compute_ns, "hbm_ns": hbm_ns, "l2_ns": l2_ns}
    if p.dequant_b:
        # S3: one AIV per core decodes (kDequantAIVId; dual decode is for Normal GEMMs only);
        # CANN: both. Each decodes a whole stage template of R rows x BLOCK_K per stage
        stages = len(eblocks) * sum(-(-c // R) for c in cols) * len(kbs)
        if p.impl == "cann":
            vf = decode_vf(DequantB(1, R, vf="bitops"), R * t.block_k // 2, R * t.block_k)
            out["decode_ns"] = stages * chip.vector.cycles(vf) / (2 * t.num_cores * chip.aiv_freq_GHz)
        else:
            decoded = stages * R * t.block_k
            rate_per_ns = chip.vector.fp4_decode_B_per_cycle * chip.aiv_freq_GHz * t.num_cores
            out["decode_ns"] = decoded / rate_per_ns
    out["bound_ns"] = max(out.values())
    return out
