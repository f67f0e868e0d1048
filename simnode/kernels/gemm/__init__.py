"""Tiled GEMM schedule after DeepGEMM-Ascend (facts 3.5), C[m,n] = A[m,k] x B[k,n].

``choose_tiling(chip, m, n, k, dtype)`` is the tile heuristic; ``gemm_schedule(chip,
GemmParams)`` builds the per-core programs; ``gemm_roofline(chip, params, tiling)``
gives the lower bound a run can never beat. Pure functions: no SimPy.

The output blocks BLOCK_M x BLOCK_N are dealt to the cores in waves, in an order swizzled
in groups of ``swizzle_rows`` block-rows so that the blocks of one wave share A rows and B
columns and re-read them from L2 (facts 3.5). Each core runs its blocks through the
program of ``gemm.core`` (multi-stage L1, two L0 stages, two L0C halves), storing C
straight from L0C to GM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simnode.config.chip import DTYPE_BITS, ChipSpec
from simnode.config.params import param
from simnode.errors import ScheduleError
from simnode.instr import isa
from simnode.kernels import builds_records
from simnode.kernels.gemm.core import (MX_SCALE_K_PER_BYTE, GemmTiling, BlockTask, buffer_plan,
                                       core_program, dtype_bytes, fit_block_k, l0_k_step,
                                       l0c_split, max_l1_stages, stage_bytes, swizzle,
                                       tile_cost_cycles, ub_epilogue, up16)
from simnode.instr.schedule import CoreProgram, KernelSchedule, lockstep_groups
from simnode.kernels import num_cores_param

#: the GEMM's input dtypes: the cube's (``chip.CUBE_DTYPES``: fp32 and hf32 operands are
#: FP32 in GM, 4 B an element, no MX scales)
DTYPES = ("bf16", "fp16", "fp8", "fp4", "fp32", "hf32")

__all__ = ["DTYPES", "GemmParams", "GemmTiling", "MX_SCALE_K_PER_BYTE", "block_order", "choose_tiling",
           "gemm_roofline", "gemm_schedule", "with_overrides"]


@dataclass(frozen=True)
class GemmParams:
    """The ``gemm`` workload's fields: each declared once here (``simnode.config.params``)."""
    m: int = param(doc="rows of A and C", unit="rows", min=1)
    n: int = param(doc="columns of B and C", unit="columns", min=1)
    k: int = param(doc="reduction length", unit="elements", min=1)
    dtype: str = param("bf16", "input dtype of A and B (fp32: FP32 with HF32 off; hf32: FP32 "
                       "operands multiplied in HF32 mode)", choices=DTYPES)
    out_dtype: str = param("bf16", "dtype of C, written by FixPipe", choices=("bf16", "fp16", "fp32"))
    block_m: int = param(0, "BLOCK_M (0 = the heuristic's)", unit="rows", min=0)
    block_n: int = param(0, "BLOCK_N (0 = the heuristic's)", unit="columns", min=0)
    block_k: int = param(0, "BLOCK_K per L1 stage (0 = the heuristic's)", unit="elements", min=0)
    l1_stages: int = param(0, "L1 buffering stages (0 = the heuristic's)", unit="stages", min=0)
    swizzle_rows: int = param(4, "block-rows per swizzle group (facts 3.5: 4-row window)",
                              unit="block-rows", min=1)
    num_cores: int = num_cores_param()
    #: S3's path whenever can_direct_store fails, e.g. for a GEMM of more than one wave of
    #: blocks with m > BLOCK_M
    epilogue: str = param("direct", "how C leaves L0C: direct (FixPipe L0C -> GM) or ub (FixPipe "
                          "L0C -> the UB of AIV1, whose MTE3 writes GM)", choices=("direct", "ub"))
    gemms: int = param(1, "independent GEMMs of this shape in one kernel, each with its own A and B "
                       "(a batch matmul); their output blocks are dealt to the cores together",
                       unit="GEMMs", min=1)


def choose_tiling(chip: ChipSpec, p: GemmParams) -> GemmTiling:
    """Tile heuristic (facts 3.5): BLOCK_M, BLOCK_N <= 512 (256 for fp4) with the fp32 block
    within L0C; BLOCK_K = 256 B of K, doubled while >= 3 L1 stages still fit; the pair that
    minimizes an estimate of waves x max(cube time, load time) wins, larger blocks on ties.
    The load estimate uses the MTE2 path rate capped by the core's share of L2; among equal
    estimates the tile that keeps more cores busy wins, then the one with fewer bytes loaded
    per MAC (less L2 traffic)."""
    cores = p.num_cores or chip.num_ai_cores
    bits = DTYPE_BITS[p.dtype]
    max_block = 256 if bits == 4 else 512
    hbm_Bpc = chip.memory.hbm_bandwidth_GBps / chip.aic_freq_GHz
    l1 = chip.buffers.capacity_bytes("l1")
    best = None
    for bm in range(16, min(max_block, up16(p.m)) + 1, 16):
        for bn in range(16, min(max_block, up16(p.n)) + 1, 16):
            if bm * bn * 4 > chip.buffers.capacity_bytes("l0c"):
                continue
            if p.block_k:
                bk, stages = p.block_k, min(max_l1_stages(p.dtype),
                                            l1 // stage_bytes(bm, bn, p.block_k, p.dtype))
            else:
                bk, stages = fit_block_k(chip, bm, bn, p.k, p.dtype)
            if stages < 2 or l0_k_step(chip, bm, bn, bk, p.dtype) == 0:
                continue
            nb = p.gemms * math.ceil(p.m / bm) * math.ceil(p.n / bn)
            active = min(nb, cores)
            waves = math.ceil(nb / cores)
            unique = p.gemms * dtype_bytes(p.m * p.k + p.k * p.n, p.dtype) / hbm_Bpc
            est = max(waves * tile_cost_cycles(chip, bm, bn, p.k, p.dtype, active), unique)
            key = (est, -active, stage_bytes(bm, bn, 1024, p.dtype) / (bm * bn), -bm * bn, -bm)
            if best is None or key < best[0]:
                best = (key, bm, bn, bk, stages)
    if best is None:
        raise ScheduleError(f"GEMM {p.m}x{p.n}x{p.k} {p.dtype}: no tile fits the buffers of "
                            f"'{chip.name}'.")
    _, bm, bn, bk, stages = best
    bm, bn = p.block_m or bm, p.block_n or bn
    bk = p.block_k or bk
    stages = p.l1_stages or min(stages, max(2, l1 // stage_bytes(bm, bn, bk, p.dtype)))
    kl0 = l0_k_step(chip, bm, bn, bk, p.dtype)
    sub_m, sub_n = l0c_split(chip, bm, bn)
    return GemmTiling(bm, bn, bk, kl0, stages, sub_m, sub_n, cores)


def batch_order(tiling: GemmTiling, p: GemmParams) -> list[tuple[int, int, int]]:
    """Output blocks (gemm, mb, nb) in issue order: each GEMM of a batch matmul in turn, its
    blocks in ``block_order``."""
    order = block_order(tiling, p)
    return [(b, mb, nb) for b in range(p.gemms) for mb, nb in order]


def _tags(p: GemmParams, b: int, mb: int, nb: int) -> tuple:
    """(A rows, B columns, C block) names of a block: GEMM ``b``'s own tiles in a batch matmul."""
    if p.gemms == 1:
        return mb, nb, (mb, nb)
    return (b, mb), (b, nb), (b, mb, nb)


def block_order(tiling: GemmTiling, p: GemmParams) -> list[tuple[int, int]]:
    """Output blocks (mb, nb) in swizzled issue order: groups of ``swizzle_rows`` block-rows,
    walked column by column, so neighbours in a wave share A rows and B columns."""
    mbs, nbs = tiling.blocks(p)
    return swizzle(mbs, nbs, p.swizzle_rows)


@builds_records
def gemm_schedule(chip: ChipSpec, p: GemmParams) -> KernelSchedule:
    """The per-core programs of one GEMM; raises ScheduleError if a buffer overflows."""
    _validate(p)
    t = choose_tiling(chip, p)
    if t.k_l0 == 0:
        raise ScheduleError(f"GEMM tiles {t.block_m}x{t.block_n}x{t.block_k} {p.dtype}: no L0 "
                            f"k-step fits half of L0A/L0B of '{chip.name}'.")
    order = batch_order(t, p)
    cores = [CoreProgram(c) for c in range(min(t.num_cores, len(order)))]
    epilogue = ub_epilogue(chip, t, p.out_dtype, len(order)) if p.epilogue == "ub" else None
    loads: dict = {}                    # tile loads shared by the cores
    shapes: dict = {}                   # a core's block shapes -> the cores with those
    for c, prog in enumerate(cores):
        tasks = [BlockTask(min(t.block_m, p.m - mb * t.block_m), min(t.block_n, p.n - nb * t.block_n),
                           *_tags(p, b, mb, nb)) for b, mb, nb in order[c::t.num_cores]]
        core_program(prog, tasks, p.k, p.dtype, p.out_dtype, t, epilogue, loads=loads)
        prog.buffers = buffer_plan(p.dtype, t, epilogue, out_dtype=p.out_dtype)
        shapes.setdefault(tuple((b.rows, b.cols) for b in tasks), []).append(prog.core)
    meta = {"kind": "gemm", "m": p.m, "n": p.n, "k": p.k, "dtype": p.dtype,
            "block_m": t.block_m, "block_n": t.block_n, "block_k": t.block_k, "k_l0": t.k_l0,
            "l1_stages": t.l1_stages, "sub_tile": f"{t.sub_m}x{t.sub_n}",
            "num_blocks": len(order), "waves": math.ceil(len(order) / t.num_cores)}
    if p.gemms > 1:
        meta["gemms"] = p.gemms
    # cores with blocks of the same shapes in the same order run the same program on other
    # tiles (``core_program`` depends on nothing else): they run in step
    sched = KernelSchedule(f"gemm_{p.m}x{p.n}x{p.k}_{p.dtype}", cores, 2.0 * p.gemms * p.m * p.n * p.k, meta,
                           lockstep_groups(shapes))
    sched.check_buffers(chip)
    return sched


def _validate(p: GemmParams) -> None:
    for name in ("m", "n", "k"):
        if getattr(p, name) <= 0:
            raise ScheduleError(f"GEMM {name} = {getattr(p, name)}: expected a positive size.")
    if p.dtype not in DTYPES:
        raise ScheduleError(f"GEMM dtype '{p.dtype}': expected one of {', '.join(DTYPES)}.")
    if p.epilogue not in ("direct", "ub"):
        raise ScheduleError(f"GEMM epilogue '{p.epilogue}': expected direct or ub.")


def gemm_roofline(chip: ChipSpec, p: GemmParams, sched: KernelSchedule) -> dict:
    """Lower bounds in ns: cube time at peak, unique bytes over HBM, all loads over L2."""
    peak_flop_per_ns = 2 * chip.cube.macs_per_cycle[p.dtype] * chip.aic_freq_GHz * chip.num_ai_cores
    compute_ns = 2.0 * p.gemms * p.m * p.n * p.k / peak_flop_per_ns
    unique = p.gemms * (dtype_bytes(p.m * p.k + p.k * p.n, p.dtype) + dtype_bytes(p.m * p.n, p.out_dtype))
    hbm_ns = unique / chip.memory.hbm_bandwidth_GBps
    l2_bytes = sum(ins.size_bytes for prog in sched.cores
                   for ins in prog.pipes.get(("aic", "mte2"), ()) if type(ins) is isa.Copy)
    l2_ns = l2_bytes / chip.memory.l2_bandwidth_GBps
    return {"compute_ns": compute_ns, "hbm_ns": hbm_ns, "l2_ns": l2_ns,
            "bound_ns": max(compute_ns, hbm_ns, l2_ns)}


def with_overrides(p: GemmParams, **kw) -> GemmParams:
    return replace(p, **kw)
