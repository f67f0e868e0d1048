"""Tiled GEMM schedule after DeepGEMM-Ascend (facts 3.5), C[m,n] = A[m,k] x B[k,n].

``choose_tiling(chip, m, n, k, dtype)`` is the tile heuristic; ``gemm_schedule(chip,
GemmParams)`` builds the per-core program; ``gemm_roofline(chip, params, tiling)``
gives the lower bound a run can never beat. Pure functions: no SimPy.

Structure of one AI core's program (the design document's sketch):

- output blocks BLOCK_M x BLOCK_N are dealt to the cores in waves; the block order
  is swizzled in groups of ``swizzle_rows`` block-rows so that the blocks of one wave
  share A rows and B columns and re-read them from L2 (facts 3.5);
- AIC.MTE2 loads the A and B tiles of one BLOCK_K step (plus MX scale tiles for
  fp8/fp4) into an L1 stage slot; ``l1_stages`` slots rotate (multi-stage buffering);
- AIC.MTE1 moves each L0 k-step (what half of L0A/L0B holds) into one of two L0
  ping-pong slots (2 L0 stages, facts 3.5);
- AIC.M accumulates each MAD sub-tile in one half of L0C; a block too large for half
  of L0C is split into two sub-tiles, one per half, so the cube starts the next
  block's first half while FixPipe drains the previous block's (facts 3.5);
- AIC.FIX drains each finished sub-tile to GM as ``out_dtype``.

Flags: MTE2->MTE1 / MTE1->MTE2 per L1 slot, MTE1->M / M->MTE1 per L0 slot,
M->FIX / FIX->M per L0C half. A producer waits for "slot free" only when it
reuses a slot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simnode.config.chip import DTYPE_BITS, ChipSpec
from simnode.errors import ScheduleError
from simnode.kernels import isa
from simnode.kernels.schedule import BufferUse, CoreProgram, KernelSchedule

MX_SCALE_K_PER_BYTE = 32     # one UE8M0 byte per 32 K-elements per row (pairs per 64, facts 1.1, S3)
MAX_L1_STAGES = 8            # facts 3.5: up to 8 L1 stages (limited by 8 event ids, facts 3.2)
MAX_L1_STAGES_WITH_SF = 4    # facts 3.5: 4 with scale factors


@dataclass(frozen=True)
class GemmParams:
    m: int
    n: int
    k: int
    dtype: str = "bf16"           #: input dtype of A and B: bf16, fp16, fp8 or fp4
    out_dtype: str = "bf16"       #: C dtype written by FixPipe
    block_m: int = 0              #: 0 = chosen by the heuristic
    block_n: int = 0
    block_k: int = 0
    l1_stages: int = 0
    swizzle_rows: int = 4         #: block-rows per swizzle group (facts 3.5: 4-row window)
    num_cores: int = 0            #: 0 = every AI core of the chip


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

    def blocks(self, p: GemmParams) -> tuple[int, int]:
        return math.ceil(p.m / self.block_m), math.ceil(p.n / self.block_n)


def _bytes(elems: int, dtype: str) -> int:
    return elems * DTYPE_BITS[dtype] // 8


def _scaled(dtype: str) -> bool:
    return DTYPE_BITS[dtype] <= 8


def _up16(x: int) -> int:
    return -(-x // 16) * 16


def _stage_bytes(bm: int, bn: int, bk: int, dtype: str) -> int:
    sf = (bm + bn) * bk // MX_SCALE_K_PER_BYTE if _scaled(dtype) else 0
    return _bytes((bm + bn) * bk, dtype) + sf


def _k_l0(chip: ChipSpec, bm: int, bn: int, bk: int, dtype: str) -> int:
    """Largest K step dividing BLOCK_K whose A and B tiles fit half of L0A / L0B (2 L0 stages)."""
    k0 = chip.cube.fractal_k(dtype)
    half_a = chip.buffers.capacity_bytes("l0a") // 2
    half_b = chip.buffers.capacity_bytes("l0b") // 2
    best = 0
    for kk in range(k0, bk + 1, k0):
        if bk % kk == 0 and _bytes(bm * kk, dtype) <= half_a and _bytes(kk * bn, dtype) <= half_b:
            best = kk
    return best


def _split(chip: ChipSpec, bm: int, bn: int) -> tuple[int, int]:
    half = chip.buffers.capacity_bytes("l0c") // 2
    if bm * bn * 4 <= half:
        return bm, bn
    if bm >= bn and bm % 32 == 0:
        return bm // 2, bn
    return bm, bn // 2


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
    base_bk = 256 * 8 // bits
    mte2_Bpc = chip.paths["gm_to_l1"].bandwidth_B_per_cycle
    l2_Bpc = chip.memory.l2_bandwidth_GBps / chip.aic_freq_GHz
    hbm_Bpc = chip.memory.hbm_bandwidth_GBps / chip.aic_freq_GHz
    l1 = chip.buffers.capacity_bytes("l1")
    max_stages = MAX_L1_STAGES_WITH_SF if _scaled(p.dtype) else MAX_L1_STAGES
    k0 = chip.cube.fractal_k(p.dtype)
    best = None
    for bm in range(16, min(max_block, _up16(p.m)) + 1, 16):
        for bn in range(16, min(max_block, _up16(p.n)) + 1, 16):
            if bm * bn * 4 > chip.buffers.capacity_bytes("l0c"):
                continue
            bk = p.block_k or base_bk
            if not p.block_k:
                while (bk * 2 <= _up16(p.k) * 2 and l1 // _stage_bytes(bm, bn, bk * 2, p.dtype) >= 3):
                    bk *= 2
            stages = min(max_stages, l1 // _stage_bytes(bm, bn, bk, p.dtype))
            if stages < 2 or _k_l0(chip, bm, bn, bk, p.dtype) == 0:
                continue
            nb = math.ceil(p.m / bm) * math.ceil(p.n / bn)
            active = min(nb, cores)
            waves = math.ceil(nb / cores)
            compute = math.ceil(max(bm, chip.cube.saturating_m_rows) / 16) * (bn // 16) \
                * math.ceil(p.k / k0)
            load = _stage_bytes(bm, bn, p.k, p.dtype) / min(mte2_Bpc, l2_Bpc / active)
            unique = _bytes(p.m * p.k + p.k * p.n, p.dtype) / hbm_Bpc
            est = max(waves * max(compute, load), unique)
            key = (est, -active, _stage_bytes(bm, bn, 1024, p.dtype) / (bm * bn), -bm * bn, -bm)
            if best is None or key < best[0]:
                best = (key, bm, bn, bk, stages)
    if best is None:
        raise ScheduleError(f"GEMM {p.m}x{p.n}x{p.k} {p.dtype}: no tile fits the buffers of "
                            f"'{chip.name}'.")
    _, bm, bn, bk, stages = best
    bm, bn = p.block_m or bm, p.block_n or bn
    bk = p.block_k or bk
    stages = p.l1_stages or min(stages, max(2, l1 // _stage_bytes(bm, bn, bk, p.dtype)))
    kl0 = _k_l0(chip, bm, bn, bk, p.dtype)
    sub_m, sub_n = _split(chip, bm, bn)
    return GemmTiling(bm, bn, bk, kl0, stages, sub_m, sub_n, cores)


def block_order(tiling: GemmTiling, p: GemmParams) -> list[tuple[int, int]]:
    """Output blocks (mb, nb) in swizzled issue order: groups of ``swizzle_rows`` block-rows,
    walked column by column, so neighbours in a wave share A rows and B columns."""
    mbs, nbs = tiling.blocks(p)
    g = max(1, p.swizzle_rows)
    order = []
    for g0 in range(0, mbs, g):
        for nb in range(nbs):
            for mb in range(g0, min(g0 + g, mbs)):
                order.append((mb, nb))
    return order


def gemm_schedule(chip: ChipSpec, p: GemmParams) -> KernelSchedule:
    """The per-core programs of one GEMM; raises ScheduleError if a buffer overflows."""
    _validate(p)
    t = choose_tiling(chip, p)
    if t.k_l0 == 0:
        raise ScheduleError(f"GEMM tiles {t.block_m}x{t.block_n}x{t.block_k} {p.dtype}: no L0 "
                            f"k-step fits half of L0A/L0B of '{chip.name}'.")
    order = block_order(t, p)
    cores = [CoreProgram(c) for c in range(min(t.num_cores, len(order)))]
    per_core = [order[c::t.num_cores] for c in range(len(cores))]
    scaled = _scaled(p.dtype)
    loads: dict = {}            # a tile's load record, shared by every core that reads the tile
    for prog, blocks in zip(cores, per_core):
        _core_program(prog, blocks, p, t, scaled, loads)
        prog.buffers = _buffer_plan(p, t, scaled)
    meta = {"kind": "gemm", "m": p.m, "n": p.n, "k": p.k, "dtype": p.dtype,
            "block_m": t.block_m, "block_n": t.block_n, "block_k": t.block_k, "k_l0": t.k_l0,
            "l1_stages": t.l1_stages, "sub_tile": f"{t.sub_m}x{t.sub_n}",
            "num_blocks": len(order), "waves": math.ceil(len(order) / t.num_cores)}
    sched = KernelSchedule(f"gemm_{p.m}x{p.n}x{p.k}_{p.dtype}", cores, 2.0 * p.m * p.n * p.k, meta)
    sched.check_buffers(chip)
    return sched


def _validate(p: GemmParams) -> None:
    for name in ("m", "n", "k"):
        if getattr(p, name) <= 0:
            raise ScheduleError(f"GEMM {name} = {getattr(p, name)}: expected a positive size.")
    if p.dtype not in ("bf16", "fp16", "fp8", "fp4"):
        raise ScheduleError(f"GEMM dtype '{p.dtype}': expected bf16, fp16, fp8 or fp4.")


def _buffer_plan(p: GemmParams, t: GemmTiling, scaled: bool) -> list[BufferUse]:
    plan = [
        BufferUse("aic", "l1", f"A+B{'+scales' if scaled else ''} tiles x {t.l1_stages} stages",
                  t.l1_stages * _stage_bytes(t.block_m, t.block_n, t.block_k, p.dtype)),
        BufferUse("aic", "l0a", "A k-step x 2 stages", 2 * _bytes(t.block_m * t.k_l0, p.dtype)),
        BufferUse("aic", "l0b", "B k-step x 2 stages", 2 * _bytes(t.k_l0 * t.block_n, p.dtype)),
        BufferUse("aic", "l0c", "fp32 accumulator, 2 halves", 2 * t.sub_m * t.sub_n * 4),
    ]
    return plan


def _core_program(prog: CoreProgram, blocks, p: GemmParams, t: GemmTiling, scaled: bool,
                  loads: dict) -> None:
    """Append one core's instructions. Identical records are one shared (frozen) object: a
    GEMM repeats a few hundred distinct flags, MMADs and L1->L0 copies millions of times,
    and the engine resolves each distinct record once; ``loads`` holds the GM tile loads
    across cores (a tile's load is the same record on every core that reads it)."""
    mmads, l0copies = {}, {}

    def mmad(m, n, k):
        rec = mmads.get((m, n, k))
        if rec is None:
            rec = mmads[(m, n, k)] = isa.Mmad(m, n, k, p.dtype)
        return rec

    def l0copy(path, size, label):
        rec = l0copies.get((path, size, label))
        if rec is None:
            rec = l0copies[(path, size, label)] = isa.Copy(path, size, label=label)
        return rec

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
    mte1 = prog.pipe("aic", "mte1").append
    cube = prog.pipe("aic", "m").append
    fix = prog.pipe("aic", "fix").append
    Copy = isa.Copy
    dtype = p.dtype
    kb_count = math.ceil(p.k / t.block_k)
    stage = l0 = 0          # running L1 stage and L0 step counters (slot = counter % depth)
    half_uses = 0           # running L0C half counter
    for mb, nb in blocks:
        rows = min(t.block_m, p.m - mb * t.block_m)
        cols = min(t.block_n, p.n - nb * t.block_n)
        subs = _sub_tiles(rows, cols, t)
        halves = [(half_uses + i) % 2 for i in range(len(subs))]
        first_use = [half_uses + i < 2 for i in range(len(subs))]
        half_uses += len(subs)
        for kb in range(kb_count):
            kk = min(t.block_k, p.k - kb * t.block_k)
            s = stage % S
            if stage >= S:
                mte2(wait_l1_free[s])
            for key, size, label in ((("A", mb, kb), _bytes(rows * kk, dtype), "load A"),
                                     (("B", nb, kb), _bytes(kk * cols, dtype), "load B")) + ((
                    (("SA", mb, kb), max(1, rows * kk // MX_SCALE_K_PER_BYTE), "load A scales"),
                    (("SB", nb, kb), max(1, cols * kk // MX_SCALE_K_PER_BYTE), "load B scales"))
                    if scaled else ()):
                rec = loads.get(key)
                if rec is None:
                    rec = loads[key] = Copy("gm_to_l1", size, key, label=label)
                mte2(rec)
            mte2(set_l1_full[s])
            mte1(wait_l1_full[s])
            steps = math.ceil(kk / t.k_l0)
            for j in range(steps):
                kl = min(t.k_l0, kk - j * t.k_l0)
                slot = l0 % 2
                if l0 >= 2:
                    mte1(wait_l0_free[slot])
                mte1(l0copy("l1_to_l0", _bytes(rows * kl, dtype), "L1->L0A"))
                mte1(l0copy("l1_to_l0", _bytes(kl * cols, dtype), "L1->L0B"))
                if scaled:
                    mte1(l0copy("l1_to_l0_scale", max(1, (rows + cols) * kl // MX_SCALE_K_PER_BYTE),
                                "L1->L0 scales"))
                mte1(set_l0_full[slot])
                cube(wait_l0_full[slot])
                last = kb == kb_count - 1 and j == steps - 1
                for i, (sm, sn) in enumerate(subs):
                    if kb == 0 and j == 0 and not first_use[i]:
                        cube(wait_fix[halves[i]])
                    cube(mmad(sm, sn, kl))
                    if last:
                        cube(set_fix[halves[i]])
                cube(set_l0_free[slot])
                l0 += 1
            mte1(set_l1_free[s])
            stage += 1
        for i, (sm, sn) in enumerate(subs):
            fix(fix_wait[halves[i]])
            fix(isa.Fixpipe(sm, sn, p.out_dtype, "gm", ("C", mb, nb, i), label="C -> GM"))
            fix(fix_set[halves[i]])


def _sub_tiles(rows: int, cols: int, t: GemmTiling) -> list[tuple[int, int]]:
    """MAD sub-tiles of one (possibly edge) block, one per L0C half."""
    if t.sub_m < t.block_m:
        top = min(rows, t.sub_m)
        return [(top, cols)] + ([(rows - top, cols)] if rows > top else [])
    if t.sub_n < t.block_n:
        left = min(cols, t.sub_n)
        return [(rows, left)] + ([(rows, cols - left)] if cols > left else [])
    return [(rows, cols)]


def gemm_roofline(chip: ChipSpec, p: GemmParams, sched: KernelSchedule) -> dict:
    """Lower bounds in ns: cube time at peak, unique bytes over HBM, all loads over L2."""
    peak_flop_per_ns = 2 * chip.cube.macs_per_cycle[p.dtype] * chip.aic_freq_GHz * chip.num_ai_cores
    compute_ns = 2.0 * p.m * p.n * p.k / peak_flop_per_ns
    unique = _bytes(p.m * p.k + p.k * p.n, p.dtype) + _bytes(p.m * p.n, p.out_dtype)
    hbm_ns = unique / chip.memory.hbm_bandwidth_GBps
    l2_bytes = sum(ins.size_bytes for prog in sched.cores
                   for ins in prog.pipes.get(("aic", "mte2"), ()) if type(ins) is isa.Copy)
    l2_ns = l2_bytes / chip.memory.l2_bandwidth_GBps
    return {"compute_ns": compute_ns, "hbm_ns": hbm_ns, "l2_ns": l2_ns,
            "bound_ns": max(compute_ns, hbm_ns, l2_ns)}


def with_overrides(p: GemmParams, **kw) -> GemmParams:
    return replace(p, **kw)
