"""The DeepGEMM-style tiled GEMM shared by the dense GEMM (``simnode.kernels.gemm``) and the
grouped GEMM (``simnode.kernels.grouped_gemm``): tile rules, block swizzle and one AI core's
program (facts 3.5, S3). Pure functions: no SimPy.

- ``GemmTiling``: block, L0 k-step, L1 stages, MAD sub-tile, cores.
- tile rules: ``stage_bytes``, ``l0_k_step``, ``l0c_split``, ``fit_block_k``,
  ``tile_cost_cycles`` (the estimate both heuristics minimize), ``sub_tiles``.
- ``swizzle(m_blocks, n_blocks, rows)``: block issue order in groups of block-rows.
- ``BlockTask``: one output block as a core runs it (its size and the GM regions it reads
  and writes); ``core_program`` appends a core's instructions for a list of tasks;
  ``buffer_plan`` its buffers.

Structure of one AI core's program (the design document's sketch):

- AIC.MTE2 loads the A and B tiles of one BLOCK_K step (plus MX scale tiles for fp8/fp4)
  into an L1 stage slot; ``l1_stages`` slots rotate (multi-stage buffering);
- AIC.MTE1 moves each L0 k-step (what half of L0A/L0B holds) into one of two L0 ping-pong
  slots (2 L0 stages, facts 3.5);
- AIC.M accumulates each MAD sub-tile in one half of L0C; a block too large for half of
  L0C is split into two sub-tiles, one per half, so the cube starts the next block's first
  half while FixPipe drains the previous block's (facts 3.5);
- AIC.FIX drains each finished sub-tile to GM as ``out_dtype``, or (``UbEpilogue``) to the
  UB of AIV1, whose MTE3 writes it to GM (S3 ``epilogue.hpp``: the path of every GEMM that
  cannot store directly, m-grouped ones among them);
- with ``DequantB`` (FP4 weights, FP8 activations; S3 ``fp8_dequant_gemm.hpp``) AIV0, not
  the AIC, loads B: half a B tile at a time GM -> UB (MTE2), decoded to FP8 NZ by a VF (V),
  pushed UB -> L1 (MTE3) into the same L1 stage slot the AIC's MTE1 reads.

Flags: MTE2->MTE1 / MTE1->MTE2 per L1 slot, MTE1->M / M->MTE1 per L0 slot, M->FIX /
FIX->M per L0C half; cross-core AIV0->AIC "B in L1" / AIC->AIV0 "L1 slot free" per L1
slot, and FIX->AIV1 "C in UB" / AIV1->AIC "UB slot free" per epilogue slot. A producer
waits for "slot free" only when it reuses a slot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable

from simnode.config.chip import DTYPE_BITS, ChipSpec
from simnode.errors import ScheduleError
from simnode.instr import isa
from simnode.instr.schedule import BufferUse, CoreProgram

MX_SCALE_K_PER_BYTE = 32     # one UE8M0 byte per 32 K-elements per row (pairs per 64, facts 1.1, S3)
MAX_L1_STAGES = 8            # facts 3.5: up to 8 L1 stages (limited by 8 event ids, facts 3.2)
MAX_L1_STAGES_WITH_SF = 4    # facts 3.5: 4 with scale factors
L1_STAGES_FOR_WIDER_K = 3    # facts 3.5: BLOCK_K is doubled only while >= 3 L1 stages still fit


@dataclass(frozen=True)
class GemmTiling:
    block_m: int
    block_n: int
    block_k: int                  #: K per L1 stage
    k_l0: int                     #: K per L0 ping-pong step
    l1_stages: int
    sub_m: int                    #: MAD sub-tile (one L0C half)
    sub_n: int
    num_cores: int

    def blocks(self, p) -> tuple[int, int]:
        """(m blocks, n blocks) of a GEMM with ``p.m`` rows and ``p.n`` columns."""
        return math.ceil(p.m / self.block_m), math.ceil(p.n / self.block_n)


def dtype_bytes(elems: int, dtype: str) -> int:
    return elems * DTYPE_BITS[dtype] // 8


def is_scaled(dtype: str) -> bool:
    """fp8 and fp4 operands carry MX scale factors (facts 1.1)."""
    return DTYPE_BITS[dtype] <= 8


def up16(x: int) -> int:
    return -(-x // 16) * 16


def stage_bytes(bm: int, bn: int, bk: int, dtype: str) -> int:
    """L1 bytes of one stage: the A and B tiles of one BLOCK_K step plus their MX scales."""
    sf = (bm + bn) * bk // MX_SCALE_K_PER_BYTE if is_scaled(dtype) else 0
    return dtype_bytes((bm + bn) * bk, dtype) + sf


def l0_k_step(chip: ChipSpec, bm: int, bn: int, bk: int, dtype: str) -> int:
    """Largest K step dividing BLOCK_K whose A and B tiles fit half of L0A / L0B (2 L0 stages)."""
    k0 = chip.cube.fractal_k(dtype)
    half_a = chip.buffers.capacity_bytes("l0a") // 2
    half_b = chip.buffers.capacity_bytes("l0b") // 2
    best = 0
    for kk in range(k0, bk + 1, k0):
        if bk % kk == 0 and dtype_bytes(bm * kk, dtype) <= half_a and dtype_bytes(kk * bn, dtype) <= half_b:
            best = kk
    return best


def l0c_split(chip: ChipSpec, bm: int, bn: int) -> tuple[int, int]:
    """The MAD sub-tile: the block, or its half by M (or N) when it overflows half of L0C."""
    half = chip.buffers.capacity_bytes("l0c") // 2
    if bm * bn * 4 <= half:
        return bm, bn
    if bm >= bn and bm % 32 == 0:
        return bm // 2, bn
    return bm, bn // 2


def max_l1_stages(dtype: str) -> int:
    return MAX_L1_STAGES_WITH_SF if is_scaled(dtype) else MAX_L1_STAGES


def fit_block_k(chip: ChipSpec, bm: int, bn: int, k: int, dtype: str,
                max_block_k: int = 0) -> tuple[int, int]:
    """(BLOCK_K, L1 stages) of a bm x bn block (facts 3.5): 256 B of K, doubled while
    ``L1_STAGES_FOR_WIDER_K`` stages of the doubled tile still fit L1 (and, if given,
    while the double is <= ``max_block_k``); stages as many as fit, at most the limit."""
    l1 = chip.buffers.capacity_bytes("l1")
    bk = 256 * 8 // DTYPE_BITS[dtype]
    while (bk * 2 <= up16(k) * 2 and l1 // stage_bytes(bm, bn, bk * 2, dtype) >= L1_STAGES_FOR_WIDER_K
           and (not max_block_k or bk * 2 <= max_block_k)):
        bk *= 2
    return bk, min(max_l1_stages(dtype), l1 // stage_bytes(bm, bn, bk, dtype))


def tile_cost_cycles(chip: ChipSpec, bm: int, bn: int, k: int, dtype: str, active: int) -> float:
    """Estimate of one block's time in AIC cycles: max(cube cycles, load cycles), the load
    at the MTE2 path rate capped by the core's share of L2 among ``active`` cores."""
    k0 = chip.cube.fractal_k(dtype)
    mte2_Bpc = chip.paths["gm_to_l1"].bandwidth_B_per_cycle
    l2_Bpc = chip.memory.l2_bandwidth_GBps / chip.aic_freq_GHz
    compute = math.ceil(max(bm, chip.cube.saturating_m_rows) / 16) * (bn // 16) * math.ceil(k / k0)
    load = stage_bytes(bm, bn, k, dtype) / min(mte2_Bpc, l2_Bpc / active)
    return max(compute, load)


def swizzle(m_blocks: int, n_blocks: int, rows: int) -> list[tuple[int, int]]:
    """Output blocks (mb, nb) in swizzled issue order: groups of ``rows`` block-rows, walked
    column by column, so neighbours in a wave share A rows and B columns (facts 3.5)."""
    g = max(1, rows)
    order = []
    for g0 in range(0, m_blocks, g):
        for nb in range(n_blocks):
            for mb in range(g0, min(g0 + g, m_blocks)):
                order.append((mb, nb))
    return order


def sub_tiles(rows: int, cols: int, t: GemmTiling) -> list[tuple[int, int]]:
    """MAD sub-tiles of one (possibly edge) block, one per L0C half."""
    if t.sub_m < t.block_m:
        top = min(rows, t.sub_m)
        return [(top, cols)] + ([(rows - top, cols)] if rows > top else [])
    if t.sub_n < t.block_n:
        left = min(cols, t.sub_n)
        return [(rows, left)] + ([(rows, cols - left)] if cols > left else [])
    return [(rows, cols)]


def live_sub_tiles(subs: list, live_rows: int, t: GemmTiling) -> list[bool]:
    """Which MAD sub-tiles hold a row below ``live_rows`` (-1 = all): DeepGEMM's masked
    kernel skips the MMAs of a math group whose rows all lie past the expert's valid
    count (``is_computation_valid(m_block_idx, m_offset)``, S3's CUDA parent); a sub-tile
    split by N spans every row of the block."""
    if live_rows < 0:
        return [True] * len(subs)
    if t.sub_m < t.block_m:
        return [i * t.sub_m < live_rows for i in range(len(subs))]
    return [live_rows > 0] * len(subs)


@dataclass(frozen=True, slots=True)
class BlockTask:
    """One output block as a core runs it: ``rows`` x ``cols`` of C, computed from the A
    rows named ``a_tag`` and the B columns named ``b_tag`` (GM regions ("A", a_tag, kb) and
    ("B", b_tag, kb) per K block); C sub-tile i is the region ("C", *c_tag, i).
    ``live_rows``: rows that hold data (-1 = all); a sub-tile wholly past them is loaded
    and stored but not computed (``live_sub_tiles``)."""
    rows: int
    cols: int
    a_tag: Hashable
    b_tag: Hashable
    c_tag: tuple
    live_rows: int = -1


@dataclass(frozen=True)
class UbEpilogue:
    """C leaves through the UB of AIV1 (S3 ``Epilogue``): FixPipe L0C -> UB (one AIV),
    AIV1's MTE3 UB -> GM; ``stages`` UB slots, each one MAD sub-tile."""
    stages: int
    unit: str = "aiv1"                  #: S3 kEpilogueAIVId = 1
    l2_hint: str = "notalloc"           #: S3 select_gemm_config: C stores NOTALLOC_CLEAN


#: the decode VFs of FP4 B: ``lut`` (S3 ``vf_deq_nd2nz``: nibble split + two LUT gathers on
#: the FP4 decoder) or ``bitops`` (CANN's ``AntiQuantMxA8W4NzNkVf``, ops-transformer gmm arch35
#: basic_block_vf_mx.h: per 256 B of FP8 out one unpacking load, shift right, shift left,
#: shift right, select, and, one store; no LUT, no decoder)
DEQUANT_VFS = ("lut", "bitops")
#: the bitops VF per 256 B register of FP8 it writes: ALU instructions, loads, stores
BITOPS_ALU_PER_REG = 5


@dataclass(frozen=True)
class DequantB:
    """FP4 B decoded on AIVs: per K block each of ``units`` loads its ``rows_per_stage`` B
    rows at a time GM -> UB as packed FP4, decodes them to FP8 NZ in one VF (``vf``) and
    pushes them UB -> L1, through ``ub_stages`` UB slots of its own. One unit (S3
    ``fp8_dequant_gemm_impl``: AIV0, ``kDequantAIVId``) walks every stage of the K block; two
    (S3 ``kDualAIVDequant``, CANN's weight-quant grouped matmul with its C:V = 1:2) share it,
    unit u taking stages u, u + 2, ... (each its half of BLOCK_N)."""
    ub_stages: int
    rows_per_stage: int
    unit: str = "aiv0"                  #: S3 kDequantAIVId = 0 (the first of ``units``)
    #: ALU element-ops of the decode VF per packed FP4 byte: per 256 B load it issues one
    #: shift and one interleave (2 x 64 lanes) beside two LUT gathers that run on the
    #: decoder (S3 ``vf_deq_nd2nz``)
    alu_ops_per_fp4_byte: float = 2 * 64 / 256
    units: tuple = ()                   #: the decoding AIVs (() = (unit,))
    vf: str = "lut"                     #: one of DEQUANT_VFS

    @property
    def all_units(self) -> tuple:
        return self.units or (self.unit,)


def ub_epilogue(chip: ChipSpec, t: GemmTiling, out_dtype: str, num_blocks: int) -> UbEpilogue:
    """S3 make_gemm_candidate: epilogue stages = min(16 intra-block events, UB / one MAD tile
    of C, the tiles one core stores), and at least the MAD tiles of one block."""
    per_block = len(sub_tiles(t.block_m, t.block_n, t))
    tile = dtype_bytes(t.sub_m * t.sub_n, out_dtype)
    stages = min(chip.sync.cross_core_flags, chip.buffers.capacity_bytes("ub") // tile,
                 max(1, math.ceil(num_blocks / t.num_cores)) * per_block)
    if stages < per_block:
        raise ScheduleError(f"epilogue: {per_block} C tiles of {t.sub_m}x{t.sub_n} {out_dtype} "
                            f"per block do not fit the UB of '{chip.name}'.")
    return UbEpilogue(stages)


def core_program(prog: CoreProgram, tasks, k: int, dtype: str, out_dtype: str, t: GemmTiling,
                 epilogue: UbEpilogue | None = None, dequant: DequantB | None = None,
                 loads: dict | None = None) -> None:
    """Append one core's instructions for ``tasks`` (``BlockTask`` records, in issue order).
    ``dtype`` is the cube's input dtype (fp8 under ``dequant``). Identical records are one
    shared (frozen) object: a GEMM repeats a few hundred distinct flags, MMADs and L1->L0
    copies millions of times, and the engine resolves each distinct record once. ``loads``:
    the GM->L1 tile loads already built, shared by the cores of one kernel (every core that
    works on row block mb loads the same A tiles)."""
    mmads, l0copies, shared = {}, {}, {}
    loads = {} if loads is None else loads

    def load(path, size, key, label):
        rec = loads.get((key, size))
        if rec is None:
            rec = loads[(key, size)] = isa.Copy(path, size, key, label=label)
        return rec

    def tile_row(kind, tag, extent, label):
        """The loads of tile row ``(kind, tag)`` (``extent`` rows of A or columns of B, or
        their MX scales) for every K block: ``load``'s records, listed once per row and
        shared by the cores (a core walks each K block of a row once per output block)."""
        key = ("row", kind, tag, extent)
        row = loads.get(key)
        if row is None:
            if kind in ("SA", "SB"):
                row = [load("gm_to_l1", max(1, extent * kk // MX_SCALE_K_PER_BYTE), (kind, tag, kb),
                            label) for kb, kk in enumerate(kks)]
            else:
                row = [load("gm_to_l1", dtype_bytes(extent * kk, dtype), (kind, tag, kb), label)
                       for kb, kk in enumerate(kks)]
            loads[key] = row
        return row

    def mmad(m, n, kk):
        rec = mmads.get((m, n, kk))
        if rec is None:
            rec = mmads[(m, n, kk)] = isa.Mmad(m, n, kk, dtype)
        return rec

    def l0copy(path, size, label):
        rec = l0copies.get((path, size, label))
        if rec is None:
            rec = l0copies[(path, size, label)] = isa.Copy(path, size, label=label)
        return rec

    def once(key, make):
        rec = shared.get(key)
        if rec is None:
            rec = shared[key] = make()
        return rec

    scaled = is_scaled(dtype)
    S = t.l1_stages
    wait_l1_free = [isa.WaitFlag("mte1", "mte2", s) for s in range(S)]
    set_l1_full = [isa.SetFlag("mte2", "mte1", s) for s in range(S)]
    wait_l1_full = [isa.WaitFlag("mte2", "mte1", s) for s in range(S)]
    set_l1_free = [isa.SetFlag("mte1", "mte2", s) for s in range(S)]
    wait_l0_free = [isa.WaitFlag("m", "mte1", s) for s in range(2)]
    set_l0_full = [isa.SetFlag("mte1", "m", s) for s in range(2)]
    wait_l0_full = [isa.WaitFlag("mte1", "m", s) for s in range(2)]
    set_l0_free = [isa.SetFlag("m", "mte1", s) for s in range(2)]
    wait_fix = [isa.WaitFlag("fix", "m", h) for h in range(2)]
    set_fix = [isa.SetFlag("m", "fix", h) for h in range(2)]
    fix_wait = [isa.WaitFlag("m", "fix", h) for h in range(2)]
    fix_set = [isa.SetFlag("fix", "m", h) for h in range(2)]
    mte2 = prog.pipe("aic", "mte2").append
    prog.pipe("aic", "mte1")                # (made here: the pipes' order is the launch's order)
    prog.pipe("aic", "m")
    fix = prog.pipe("aic", "fix").append
    if dequant is not None:
        dqs = [_DequantPipes(prog, dequant, S, u) for u in dequant.all_units]
        b_full = [[isa.CrossWait(u, s) for u in dequant.all_units] for s in range(S)]
        b_free = [[isa.CrossSet(u, s) for u in dequant.all_units] for s in range(S)]
    if epilogue is not None:
        E = epilogue.stages
        epi_unit = epilogue.unit
        epi_free = [isa.CrossWait(epi_unit, e) for e in range(E)]
        epi_full = [isa.CrossSet(epi_unit, e) for e in range(E)]
        out3 = prog.pipe(epi_unit, "mte3").append
        epi_in = [isa.CrossWait("aic", e) for e in range(E)]
        epi_out = [isa.CrossSet("aic", e) for e in range(E)]
        epi_uses = 0
    Copy = isa.Copy
    kks = [min(t.block_k, k - kb * t.block_k) for kb in range(math.ceil(k / t.block_k))]
    kb_count = len(kks)

    def block_seqs(stage0, l0_0, subs, live, l0_rows, cols, halves, first_use):
        """One block's MTE1 and cube records: the same for every block that starts at the
        same slots with the same shape, so they are built once per such block and reused."""
        m1, mm = [], []
        l0 = l0_0
        per_kl = {}                 # K step -> its L1 -> L0 copies and its MMADs (memo lookups)

        def step_records(kl):
            recs = per_kl.get(kl)
            if recs is None:
                copies = ([l0copy("l1_to_l0", dtype_bytes(l0_rows * kl, dtype), "L1->L0A")] if l0_rows
                          else [])
                copies.append(l0copy("l1_to_l0", dtype_bytes(kl * cols, dtype), "L1->L0B"))
                if scaled:
                    copies.append(l0copy("l1_to_l0_scale",
                                         max(1, (l0_rows + cols) * kl // MX_SCALE_K_PER_BYTE),
                                         "L1->L0 scales"))
                recs = per_kl[kl] = (copies, [mmad(sm, sn, kl) if live[i] else None
                                              for i, (sm, sn) in enumerate(subs)])
            return recs

        for kb, kk in enumerate(kks):
            s = (stage0 + kb) % S
            m1.append(wait_l1_full[s])
            if dequant is not None:
                m1.extend(b_full[s])            # S3: wait_intra_block(PIPE_MTE1, kDequantAIVId, ...)
            steps = math.ceil(kk / t.k_l0)
            for j in range(steps):
                kl = min(t.k_l0, kk - j * t.k_l0)
                slot = l0 % 2
                if l0 >= 2:
                    m1.append(wait_l0_free[slot])
                copies, mmads_kl = step_records(kl)
                m1.extend(copies)
                m1.append(set_l0_full[slot])
                mm.append(wait_l0_full[slot])
                last = kb == kb_count - 1 and j == steps - 1
                for i in range(len(subs)):
                    if kb == 0 and j == 0 and not first_use[i]:
                        mm.append(wait_fix[halves[i]])
                    if live[i]:
                        mm.append(mmads_kl[i])
                    if last:
                        mm.append(set_fix[halves[i]])
                mm.append(set_l0_free[slot])
                l0 += 1
            m1.append(set_l1_free[s])
            if dequant is not None:
                m1.extend(b_free[s])            # S3: set_intra_block(PIPE_MTE1, kDequantAIVId, ...)
        return m1, mm, l0 - l0_0

    seqs = {}
    placed_m1, placed_mm = {}, {}     # block key -> where its MTE1 / cube records went first
    stage = l0 = 0          # running L1 stage and L0 step counters (slot = counter % depth)
    half_uses = 0           # running L0C half counter
    for task in tasks:
        rows, cols = task.rows, task.cols
        subs = sub_tiles(rows, cols, t)
        live = live_sub_tiles(subs, task.live_rows, t)
        l0_rows = rows if all(live) else sum(sm for (sm, _), on in zip(subs, live) if on)
        halves = tuple((half_uses + i) % 2 for i in range(len(subs)))
        first_use = tuple(half_uses + i < 2 for i in range(len(subs)))
        half_uses += len(subs)
        a_tag, b_tag = task.a_tag, task.b_tag
        a_row = tile_row("A", a_tag, rows, "load A")
        b_row = tile_row("B", b_tag, cols, "load B") if dequant is None else None
        if scaled:
            sa_row = tile_row("SA", a_tag, rows, "load A scales")
            sb_row = tile_row("SB", b_tag, cols, "load B scales")
        for kb in range(kb_count):
            st = stage + kb
            s = st % S
            if st >= S:
                mte2(wait_l1_free[s])
            mte2(a_row[kb])
            if dequant is None:
                mte2(b_row[kb])
            else:
                for dq in dqs:
                    dq.load_b(st, s, b_tag, kb, kks[kb], cols, t.block_k)
            if scaled:
                mte2(sa_row[kb])
                mte2(sb_row[kb])
            mte2(set_l1_full[s])
        # l0 < 2 only for a core's first block, where it decides the first L0 waits
        key = (stage % S, l0 % 2, l0 < 2, rows, cols, tuple(live), halves, first_use)
        seq = seqs.get(key)
        if seq is None:
            seq = seqs[key] = block_seqs(stage, l0, subs, live, l0_rows, cols, halves, first_use)
        prog.place("aic", "mte1", seq[0], placed_m1, key)   # (a block placed again is noted
        prog.place("aic", "m", seq[1], placed_mm, key)      # as a repeat: the engine's passes skip it)
        stage += kb_count
        l0 += seq[2]
        for i, (sm, sn) in enumerate(subs):
            fix(fix_wait[halves[i]])
            if epilogue is None:
                fix(isa.Fixpipe(sm, sn, out_dtype, "gm", ("C",) + task.c_tag + (i,), label="C -> GM"))
                fix(fix_set[halves[i]])
                continue
            e = epi_uses % E
            if epi_uses >= E:
                fix(epi_free[e])                # S3 aic_wait_free: wait_intra_block(PIPE_FIX, ...)
            fix(once(("fix", sm, sn), lambda: isa.Fixpipe(sm, sn, out_dtype, "ub", label="C -> UB")))
            fix(fix_set[halves[i]])
            fix(epi_full[e])                    # S3 aic_store: set_intra_block(PIPE_FIX, ...)
            out3(epi_in[e])
            out3(Copy("ub_to_gm", dtype_bytes(sm * sn, out_dtype), ("C",) + task.c_tag + (i,),
                      epilogue.l2_hint, "C -> GM"))
            out3(epi_out[e])                    # S3 aiv_drain: set_intra_block(PIPE_MTE3, ...)
            epi_uses += 1


class _DequantPipes:
    """One decoding AIV's side of the Dequant-B path (S3 ``fp8_dequant_gemm_impl``, the AIV
    branch): ``unit``, the ``part``-th of ``DequantB.all_units``."""

    def __init__(self, prog: CoreProgram, d: DequantB, l1_stages: int, unit: str):
        self.d = d
        units = d.all_units
        self.part, self.parts = units.index(unit), len(units)
        U = d.ub_stages
        self.mte2 = prog.pipe(unit, "mte2").append
        self.v = prog.pipe(unit, "v").append
        self.mte3 = prog.pipe(unit, "mte3").append
        self.ub_free = [isa.WaitFlag("mte3", "mte2", u) for u in range(U)]
        self.ub_full = [isa.SetFlag("mte2", "v", u) for u in range(U)]
        self.ub_full_w = [isa.WaitFlag("mte2", "v", u) for u in range(U)]
        self.dec = [isa.SetFlag("v", "mte3", u) for u in range(U)]
        self.dec_w = [isa.WaitFlag("v", "mte3", u) for u in range(U)]
        self.ub_free_s = [isa.SetFlag("mte3", "mte2", u) for u in range(U)]
        self.l1_free = [isa.CrossWait("aic", s) for s in range(l1_stages)]
        self.l1_full = [isa.CrossSet("aic", s) for s in range(l1_stages)]
        self.uses = 0
        self.shared: dict = {}

    def _once(self, key, make):
        rec = self.shared.get(key)
        if rec is None:
            rec = self.shared[key] = make()
        return rec

    def load_b(self, stage: int, s: int, b_tag, kb: int, kk: int, cols: int, block_k: int) -> None:
        """One K block of B: ``cols`` rows (K-major B, one row per output column) of ``kk``
        FP4 values, in stages of ``rows_per_stage`` rows."""
        d = self.d
        R = d.rows_per_stage
        # the VF is compiled for a full stage (num_b_rows_per_stage x BLOCK_K), so it decodes
        # the whole template tile even for a K tail or a narrow last block (S3 vf_deq_nd2nz)
        fp4_tile = R * block_k // 2
        decoded = R * block_k
        dec = self._once(("dec",), lambda: decode_vf(d, fp4_tile, decoded))
        for h in range(self.part, math.ceil(cols / R), self.parts):
            rows = min(cols - h * R, R)
            u = self.uses % d.ub_stages
            if self.uses >= d.ub_stages:
                self.mte2(self.ub_free[u])
            self.mte2(isa.Copy("gm_to_ub", rows * -(-kk // 2), ("B4", b_tag, kb, h),
                               label="load B (FP4)"))
            self.mte2(self.ub_full[u])
            self.v(self.ub_full_w[u])
            self.v(dec)
            self.v(self.dec[u])
            self.mte3(self.dec_w[u])
            if h == self.part and stage >= len(self.l1_free):
                self.mte3(self.l1_free[s])      # S3: wait_intra_block(PIPE_MTE3, ...) at row 0
            # the UB -> L1 copy moves whole 32 B column groups of BLOCK_K (S3 asc_copy_ub2l1)
            self.mte3(self._once(("ub2l1", rows), lambda: isa.Copy(
                "ub_to_l1", rows * block_k, label="B (FP8 NZ) -> L1")))
            self.mte3(self.ub_free_s[u])
            self.uses += 1
        if self.parts > 1 and self.part >= math.ceil(cols / R) and stage >= len(self.l1_free):
            self.mte3(self.l1_free[s])          # S3 dual: a unit with no rows still hands over
        self.mte3(self.l1_full[s])              # S3: set_intra_block(PIPE_MTE3, ...)


def decode_vf(d: DequantB, fp4_bytes: int, decoded: int) -> isa.VecOp:
    """The decode VF of one stage: ``fp4_bytes`` of packed FP4 in, ``decoded`` FP8 bytes out."""
    if d.vf == "bitops":
        regs = -(-decoded // 256)               # one 256 B FP8 register per step
        return isa.VecOp(BITOPS_ALU_PER_REG * regs * 64, "vf_alu", decoded,
                         "FP4 -> FP8 decode (bit ops) + NZ", loads=regs, stores=regs, vf_calls=1)
    return isa.VecOp(
        d.alu_ops_per_fp4_byte * fp4_bytes, "simple", fp4_bytes + decoded,
        "FP4 -> FP8 decode + ND2NZ",
        # the decoder's 64 B/cycle counts decoded (FP8) bytes: S3's cost model divides
        # block_n x k decoded bytes by it, and its comment reads "512 decoded bytes per
        # eight vector cycles" for a VF step that loads 256 B of FP4 (facts 1.2)
        decode_bytes=decoded)


def dequant_ub_stages(chip: ChipSpec, bn: int, bk: int) -> tuple[int, int]:
    """(UB stages, bytes per stage) of the dequant AIV (S3 ``fp8_dequant_gemm_impl``):
    a stage holds half of BLOCK_N rows of packed FP4 plus their FP8 NZ image with one
    padding row per column group; the LUT takes one vector register; at most 8 stages."""
    rows = bn // 2                                   # num_b_rows_per_stage
    nz_cols = bk // 32                               # 32 B column groups of FP8 (C0)
    per_stage = rows * (bk // 2) + nz_cols * (rows + 1) * 32
    lut = 256                                        # asc_get_vf_len(): one 256 B register (facts 1.2)
    return min(8, (chip.buffers.capacity_bytes("ub") - lut) // per_stage), per_stage


def buffer_plan(dtype: str, t: GemmTiling, epilogue: UbEpilogue | None = None,
                dequant: DequantB | None = None, out_dtype: str = "bf16",
                dequant_stage_bytes: int = 0) -> list[BufferUse]:
    scaled = is_scaled(dtype)
    plan = [
        BufferUse("aic", "l1", f"A+B{'+scales' if scaled else ''} tiles x {t.l1_stages} stages",
                  t.l1_stages * stage_bytes(t.block_m, t.block_n, t.block_k, dtype)),
        BufferUse("aic", "l0a", "A k-step x 2 stages", 2 * dtype_bytes(t.block_m * t.k_l0, dtype)),
        BufferUse("aic", "l0b", "B k-step x 2 stages", 2 * dtype_bytes(t.k_l0 * t.block_n, dtype)),
        BufferUse("aic", "l0c", "fp32 accumulator, 2 halves", 2 * t.sub_m * t.sub_n * 4),
    ]
    if dequant is not None:
        for unit in dequant.all_units:
            plan.append(BufferUse(unit, "ub", f"FP4 B + FP8 NZ x {dequant.ub_stages} stages + LUT",
                                  dequant.ub_stages * dequant_stage_bytes + 256))
    if epilogue is not None:
        plan.append(BufferUse(epilogue.unit, "ub", f"C sub-tile x {epilogue.stages} stages",
                              epilogue.stages * dtype_bytes(t.sub_m * t.sub_n, out_dtype)))
    return plan
