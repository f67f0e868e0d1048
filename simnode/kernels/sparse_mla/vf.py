"""The vector functions (VFs) of FlashMLA's Ascend kernel, costed by their instructions.

FlashMLA's AIVs do their vector work in SIMD VFs (S2 ``kernel_body.h``). Each VF here is
counted as S2 writes it, intrinsic by intrinsic, and each intrinsic is mapped to the RV
instruction it issues and that instruction's opcode family (``config.vector.VF_FAMILIES``,
rates in docs/vector-unit.md):

- ``alu`` (either EXU, one per cycle each): add/sub/mul/madd/min/max, shifts, or, compares,
  selects, the f32 <-> bf16 conversions, the lane-index generator (VCI);
- ``cvt`` (either EXU, a pair every 2 cycles): the fp8 and fp4 conversions (the FP4 one's
  decoding priced by the FP4 decoder, facts 1.2, S3);
- ``intlv`` (EXU0, every 2 cycles): VINTLV / VDINTLV;
- ``reduce`` (EXU0, single issue): VDUP, in-register reductions (VCMAX, VCGMAX, VCADD, VCPADD);
- ``sfu`` (either EXU, a pair every 4 cycles): exp (``asc_exp_sub`` = VEXPDIF), ln, div;
- loads (VLDS and its unpack / broadcast / gather forms) and stores (VSTS, VSSTB).

Each VF becomes ``VecOp`` records of class ``vf_alu`` with these counts (``mix``; ``ops``
report them as fp32 element-ops, 64 per full-register instruction), its UB bytes each way,
the FP4 bytes it decodes, and its longest chain of dependent instructions. The chip prices
them (``config.vector.VectorSpec.cycles``): the issue stage at the 950DT's calibrated one
compute instruction per cycle (topologies/ascend950dt.yaml ``vf_issue_per_cycle``), each
family at its own rate, loads and stores on their ports, or the chain if longer, plus a
fixed start and drain per call. A VF whose body is split by ``asc_mem_bar`` (later loads
wait for earlier stores) is one record per phase between barriers, so its phases add up;
only the first record carries the call.

Counts are per AIV and per call, as functions of the call's shape, so the other plans
(1C1V's 64 rows, ``b_topk``) are costed by the same code paths. Main names:
``dequant`` (``kv_dequant_and_nd2nz_for_decode_vf``; for V4's 640-B C8 entry, the 950
op's ``CastScaleImpl`` and ``AntiquantVFImplFp8D448``), ``nd2nz`` (prefill's
``kv_nd2nz_for_prefill_vf``), ``softmax``, ``process_index``, ``scale_o``
(``add_and_scale_o_vf``), ``final_lse`` (``get_final_lse_and_denorm_vf``), ``final_output``
(``get_final_output_vf``) and ``clear_kv`` (``clear_kv_buf_vf``).

Assumptions a reader could doubt (each a line below where it is used):
- instructions the sources do not list are classed with their nearest listed relative
  (VMULL, VADDC and the index math as full-rate ALU; VCGADD like VCGMAX; VCPADD like VCADD);
- iterations of a loop are independent but for their pointers, so the OoO VF overlaps them and
  a loop's chain is one iteration's (its 68 physical registers are not modeled as a limit);
- same-EXU initiation intervals between unlike instructions (InitiationInterval.json: mostly
  1, a few pairs 2-3) are taken as 1.
"""

from __future__ import annotations

import math
from functools import lru_cache

from simnode.instr import isa

#: fp32 lanes of one 256 B vector register (facts 1.2, S3 vector_reg_bytes / S8): the ops of
#: one full-register instruction in the VecOp currency of fp32 element-ops
REG_OPS = 64
REG_BYTES = 256
D = 512                   # facts 2.2, S2 config.h D_QK = D_VO = 512
CHUNKS = D // 128         # 128-element (one bf16 register) chunks of a KV row
FP8_SCALE_ROWS = 8        # S2: the FP8 scale prologue converts 8 rows per asc_gather ...
FP4_SCALE_ROWS = 4        # ... the FP4 one 4 rows
INDEX_BLOCK = 640         # facts 3.4: INDEX_BLOCK_SIZE; prefill walks it all


def _chain(load=0, store=0, alu=0, intlv=0, reduce=0, sfu=0, cvt=0) -> tuple:
    """A dependent chain as a count per ``config.vector.VF_LATENCY_CLASSES``."""
    return (load, store, alu, intlv, reduce, sfu, cvt)


def _vf(label: str, *, alu=0.0, cvt=0.0, intlv=0.0, reduce=0.0, sfu=0.0, loads=0, stores=0,
        load_bytes=0, store_bytes=0, decode=0, chain=(), call=True) -> isa.VecOp:
    """One VF phase: its compute instructions per opcode family (``config.vector.VF_FAMILIES``:
    full-rate ``alu``, half-rate ``cvt``, ``intlv``, ``reduce`` (with VDUP), ``sfu``), load and
    store instructions and the bytes they move (reads and writes overlap, so the larger
    direction sets the UB time, as for ND2NZ, facts 3.3 S1), FP4 bytes decoded, and the
    phase's longest dependent chain."""
    mix = (alu, cvt, intlv, reduce, sfu)
    return isa.VecOp((alu + cvt + intlv + reduce) * REG_OPS, "vf_alu",
                     int(max(load_bytes, store_bytes)), label, int(decode),
                     exu0_ops=(intlv + reduce) * REG_OPS, sfu_ops=sfu * REG_OPS,
                     loads=int(loads), stores=int(stores), vf_calls=1 if call else 0,
                     chain=chain, mix=mix)


@lru_cache(maxsize=None)
def dequant(dtype: str, tokens: int, row_bytes: int) -> tuple:
    """One AIV's dequant + ND2NZ of ``tokens`` gathered rows (``row_bytes`` each in UB) to
    bf16 NZ (S2 kv_dequant_and_nd2nz_for_decode_vf): a scale prologue, a memory barrier, then
    the per-token loop (``#pragma unroll 1``, its 4 chunks unrolled)."""
    stores = tokens * CHUNKS                                  # vsstb: bf16 NZ, one per chunk
    if dtype == "fp8":
        steps = math.ceil(tokens / FP8_SCALE_ROWS)
        # prologue: arange (VCI), shift, mul, add; per 8 rows: asc_gather (a load), min,
        # shift left (UE8M0 -> bf16), store; chain gather -> min -> shift -> store
        pro = _vf("dequant FP8: scales", alu=4 + 2 * steps, loads=steps, stores=steps,
                  load_bytes=steps * REG_BYTES // 2, store_bytes=steps * REG_BYTES,
                  chain=_chain(load=1, alu=2, store=1))
        # per token: 2 broadcast loads and 2 asc_intlv (EXU0) of the scales; per chunk an
        # unpack load (128 B), asc_e4m32float, asc_e4m32float_v3, shift right, or, mul, vsstb;
        # chain load -> convert -> shift -> or -> mul -> store
        body = _vf("dequant FP8 + ND2NZ", alu=tokens * CHUNKS * 3, cvt=tokens * CHUNKS * 2,
                   intlv=tokens * 2, loads=tokens * (2 + CHUNKS), stores=stores,
                   load_bytes=tokens * (D + 2 * 32), store_bytes=stores * REG_BYTES,
                   chain=_chain(load=1, cvt=1, alu=3, store=1), call=False)
        return (pro, body)
    if dtype == "fp4":
        steps = math.ceil(tokens / FP4_SCALE_ROWS)
        # prologue: arange, 2 shifts, add; per 4 rows: asc_gather, 2 asc_e4m32float, shift,
        # or (E4M3 -> bf16), store
        pro = _vf("dequant FP4: scales", alu=4 + 2 * steps, cvt=2 * steps, loads=steps,
                  stores=steps,
                  load_bytes=steps * REG_BYTES // 2, store_bytes=steps * REG_BYTES,
                  chain=_chain(load=1, alu=3, store=1))
        # per chunk: a broadcast load (scale), an unpack4 load (64 B), asc_e2m1x22bfloat16
        # (through the FP4 decoder: its rate is in decoded bytes, facts 1.2, S3
        # heuristics.hpp "512 decoded bytes per eight vector cycles"), mul, vsstb
        body = _vf("dequant FP4 + ND2NZ", alu=tokens * CHUNKS, cvt=tokens * CHUNKS,
                   loads=tokens * CHUNKS * 2, stores=stores,
                   load_bytes=tokens * (D // 2 + CHUNKS * 32), store_bytes=stores * REG_BYTES,
                   decode=tokens * D * 2, chain=_chain(load=1, cvt=1, alu=1, store=1), call=False)
        return (pro, body)
    if dtype == "c8":
        return _dequant_c8(tokens)
    raise ValueError(f"no dequant VF for '{dtype}'")


#: the C8 entry (plan.KV_ROW_BYTES "c8"): 448 FP8 no-RoPE values in tiles of 64, one E8M0
#: scale each, and 64 BF16 RoPE values
C8_NOPE, C8_TILE = 448, 64
C8_FULL_LOOPS = C8_NOPE // 128            # 3 loops of 128 values (two tiles), then one of 64 + RoPE


def _dequant_c8(tokens: int) -> tuple:
    """V4's op on the 950 (SAS ``DequantKv``): two VFs per call of up to 16 rows.
    ``CastScaleImpl``: per row an unpack load of its scales, E8M0 -> bf16 -> fp32, a store.
    ``AntiquantVFImplFp8D448``: 3 loops of 128 no-RoPE values, per row 2 unpack loads of 64
    FP8 values, 2 broadcast loads of their scales, 2 FP8 -> fp32 casts, 2 muls, 2 fp32 ->
    bf16 casts, an asc_deintlv (EXU0) and a strided NZ store; then per row the last 64
    values the same way (one of each) beside a load and a store of the RoPE part, and a
    second NZ store. Chain: load, cast, mul, cast, deinterleave, store."""
    scales = _vf("dequant C8: scales", alu=2 * tokens, loads=tokens, stores=tokens,
                 load_bytes=tokens * 32, store_bytes=tokens * REG_BYTES,
                 chain=_chain(load=1, alu=2, store=1))
    # per full loop and row 2 FP8 -> fp32 casts (half rate), 2 muls and 2 fp32 -> bf16 casts
    # (full rate) and a deinterleave; the last loop one of each; one VDUP of the zero register
    cvt = tokens * (C8_FULL_LOOPS * 2 + 1)
    alu = tokens * (C8_FULL_LOOPS * 4 + 2)
    intlv = tokens * (C8_FULL_LOOPS + 1)
    loads = tokens * (C8_FULL_LOOPS * 4 + 3)
    stores = tokens * (C8_FULL_LOOPS + 2)
    body = _vf("dequant C8 + ND2NZ", alu=alu, cvt=cvt, intlv=intlv, reduce=1, loads=loads,
               stores=stores,
               load_bytes=tokens * (C8_NOPE + C8_TILE * 2 + (C8_FULL_LOOPS * 2 + 1) * 4),
               store_bytes=tokens * D * 2, chain=_chain(load=1, cvt=1, alu=2, intlv=1, store=1))
    return (scales, body)


@lru_cache(maxsize=None)
def nd2nz(tokens: int) -> tuple:
    """Prefill's kv_nd2nz_for_prefill_vf: bf16 rows to NZ with loads and vsstb stores only,
    one of each per register (facts 3.3, S1: it "achieves peak UB read and write
    throughput")."""
    regs = tokens * D * 2 // REG_BYTES
    return (_vf("ND2NZ", loads=regs, stores=regs, load_bytes=regs * REG_BYTES,
                store_bytes=regs * REG_BYTES, chain=_chain(load=1, store=1)),)


@lru_cache(maxsize=None)
def softmax(rows: int, cols: int, first: bool) -> tuple:
    """One AIV's softmax_vf over its ``rows`` x ``cols`` block of P (S2), in its three phases
    between memory barriers: column masks and row maxima; the rescale decision (a later block)
    or the copy of the maxima (the first); then per 8 rows scale, exp, row sum and bf16 cast
    of every register, and (a later block) the old sum folded in."""
    groups = math.ceil(cols / 16)          # 16-column groups (one column mask each)
    pairs = math.ceil(groups / 2)
    quads, octs = math.ceil(rows / 4), math.ceil(rows / 8)
    # A. per column group: 2 broadcast loads of the index pairs, asc_intlv (EXU0), compare;
    # per 4 rows: the running max (a load, or a VDUP on the first block), per group a load of
    # P and a vmax, then VCGMAX, asc_deintlv (EXU0), max, asc_intlv (EXU0), a store. The
    # 4-row iterations are independent; the chain runs through one: P load, the vmax of every
    # group in turn, VCGMAX, deintlv, max, intlv, store. A later block first loads the old
    # max and sum and scales the max.
    # (VCGMAX is a reduction: single issue, as measured, register-simd.md)
    intlv = groups + quads * 2
    reduce = quads + (quads if first else 0)
    alu = groups + quads * (groups + 1) + (0 if first else 1)
    loads = 2 * groups + quads * (groups + (0 if first else 1)) + (0 if first else 2)
    a = _vf("softmax", alu=alu, intlv=intlv, reduce=reduce, loads=loads, stores=quads,
            load_bytes=loads * REG_BYTES, store_bytes=quads * 32,
            chain=_chain(load=1, alu=groups + 1, reduce=1, intlv=2, store=1))
    if first:
        # B. load the maxima, store them as the O maxima
        b = _vf("softmax: O max", loads=1, stores=1, load_bytes=REG_BYTES,
                store_bytes=REG_BYTES, chain=_chain(load=1, store=1), call=False)
    else:
        # B. load new and O maxima, sub, VCMAX (EXU0), VDUP (EXU0), compare, select, store
        # (the decision is what the exp phase reads, after a barrier); beside it 2 muls and
        # asc_exp_sub give the rescale factors, stored twice
        b = _vf("softmax: rescale decision", alu=5, reduce=2, sfu=1, loads=2, stores=3,
                load_bytes=2 * REG_BYTES, store_bytes=3 * REG_BYTES,
                chain=_chain(load=1, alu=4, reduce=1, store=1), call=False)
    # C. per 8 rows: 2 loads and muls of the O maxima; per pair of column groups 4 x (load,
    # mul, asc_exp_sub, add into the row sum but the first, bf16 cast), 2 adds, asc_deintlv
    # (EXU0), 2 stores; then per row half VCGADD, VCPADD (EXU0, as VCADD), asc_intlv (EXU0),
    # a store. Chain through one 8-row iteration: load, mul, exp, the row-sum adds of every
    # group, the two reductions, intlv, store. A later block then folds in the old sum
    # (load, madd, store) after a barrier.
    alu = octs * (2 + pairs * (4 + 4 + 4 + 2) - 2)
    intlv = octs * (pairs + 2)
    reduce = octs * 2 * 2                    # VCGADD and VCPADD per row half
    sfu = octs * pairs * 4
    loads = octs * (2 + pairs * 4)
    stores = octs * (pairs * 2 + 2)
    c = _vf("softmax: exp + row sum", alu=alu, intlv=intlv, reduce=reduce, sfu=sfu, loads=loads,
            stores=stores,
            load_bytes=loads * REG_BYTES, store_bytes=stores * REG_BYTES,
            chain=_chain(load=1, alu=1 + groups, sfu=1, reduce=2, intlv=1, store=1), call=False)
    out = [a, b, c]
    if not first:
        out.append(_vf("softmax: fold old sum", alu=1, loads=1, stores=1, load_bytes=REG_BYTES,
                       store_bytes=REG_BYTES, chain=_chain(load=1, alu=1, store=1), call=False))
    return tuple(out)


#: process_kv_index_vf per pair of index registers (2 x 64 int32 indices): common 2 loads,
#: asc_deintlv (EXU0), min, max, compare; decode then computes page block and offset of both
#: tokens of a gather2 pair (a compare, 2 x 4 for the fast div-mod, the offset and the stride
#: in 64 bits with VMULL / add / addc and 2 asc_intlv (EXU0), 2 selects, 2 subs, a mul, a
#: shift: 24), prefill only multiplies by the row size (min, 2 x (VMULL + asc_intlv), sub: 6)
INDEX_ALU_PER_PAIR = {"decode": 28, "prefill": 10}
INDEX_EXU0_PER_PAIR = {"decode": 3, "prefill": 3}
#: set-up: VDUP of the constants (EXU0: 4 decode, 1 prefill), 2 asc_arange, asc_deintlv (EXU0)
INDEX_ALU_SETUP = {"decode": 7, "prefill": 4}
INDEX_EXU0_SETUP = {"decode": 5, "prefill": 2}
INDEX_STORES_PER_PAIR = 6   # smaller, larger, 2 x int64 offset, 2 x stride
#: chain through one pair: load, deintlv, min, div-mod (mull, shift, mul, sub), mul-add
#: (mull, add, addc), select, intlv, store (decode); load, deintlv, min, mull, intlv, store
INDEX_CHAIN = {"decode": _chain(load=1, intlv=2, alu=9, store=1),
               "prefill": _chain(load=1, intlv=2, alu=2, store=1)}


@lru_cache(maxsize=None)
def process_index(mode: str, indices: int) -> tuple:
    """process_kv_index_vf over one index group: decode walks the group's ``indices`` (both
    AIVs, all of them: each then gathers its half), prefill always the whole 640 (S2)."""
    n = INDEX_BLOCK if mode == "prefill" else max(1, indices)
    pairs = math.ceil(n / (2 * REG_OPS))
    intlv = 1 + pairs * INDEX_EXU0_PER_PAIR[mode]             # set-up deinterleave, per pair 3
    reduce = INDEX_EXU0_SETUP[mode] - 1                       # the VDUPs
    alu = INDEX_ALU_SETUP[mode] + pairs * INDEX_ALU_PER_PAIR[mode] - intlv - reduce
    stores = pairs * INDEX_STORES_PER_PAIR
    return (_vf("index preprocess", alu=alu, intlv=intlv, reduce=reduce, loads=2 * pairs,
                stores=stores,
                load_bytes=2 * pairs * REG_BYTES, store_bytes=stores * REG_BYTES,
                chain=INDEX_CHAIN[mode]),)


@lru_cache(maxsize=None)
def scale_o(rows: int, frag_cols: int, add: bool) -> tuple:
    """add_and_scale_o_vf on one O fragment after a rescale drain: per row a broadcast load
    of its scale; per register load the fragment, (after the item's first drain) load and add
    the accumulator, mul, store. Chain: load, add, mul, store."""
    regs = rows * frag_cols / REG_OPS
    loads = rows + regs * (2 if add else 1)
    return (_vf("O scale + fragment", alu=regs * (2 if add else 1), loads=loads, stores=regs,
                load_bytes=regs * REG_BYTES * (2 if add else 1), store_bytes=regs * REG_BYTES,
                chain=_chain(load=1, alu=2 if add else 1, store=1)),)


@lru_cache(maxsize=None)
def final_lse(sinks: bool) -> tuple:
    """get_final_lse_and_denorm_vf, once per item, on one register of row statistics: 3
    loads, 3 asc_deintlv (EXU0), compare, 2 muls, VDUP (EXU0), store; ln, add, VDUP, store
    (LSE); [sink: load, asc_exp_sub, add]; VDUP of 1, div, VDUP, store (1 / row sum). A short
    VF, so its dependent chain sets its time: load, deintlv, [exp, add], div, VDUP, store."""
    alu = 11 + (1 if sinks else 0)
    return (_vf("final LSE + 1/sum", alu=alu - 7, intlv=3, reduce=4, sfu=3 if sinks else 2,
                loads=4 if sinks else 3, stores=3, load_bytes=(4 if sinks else 3) * REG_BYTES,
                store_bytes=3 * REG_BYTES,
                chain=_chain(load=1, intlv=1, sfu=3 if sinks else 2, alu=1 if sinks else 0,
                             store=1)),)


@lru_cache(maxsize=None)
def final_output(rows: int, frag_cols: int, add: bool) -> tuple:
    """get_final_output_vf on one O fragment at an item's end: per pair of rows 2 broadcast
    loads of 1/sum; per row and register load, (after a rescale drain) load and add the
    accumulator, multiply by 1/sum, cast to bf16; then 2 adds and an asc_deintlv (EXU0) merge
    and pack the two rows, stored (2 stores) over the accumulator."""
    regs = rows * frag_cols / REG_OPS
    pairs = rows / 2
    per_pair_merge = frag_cols / 128            # merges per row pair, 3 instructions each
    alu = regs * (3 if add else 2) + pairs * 3 * per_pair_merge
    loads = pairs * 2 + regs * (2 if add else 1)
    stores = pairs * 2 * per_pair_merge
    return (_vf("O final: normalize, cast bf16", alu=alu - pairs * per_pair_merge,
                intlv=pairs * per_pair_merge,
                loads=loads, stores=stores, load_bytes=regs * REG_BYTES * (2 if add else 1),
                store_bytes=regs * REG_BYTES / 2,
                chain=_chain(load=1, alu=(3 if add else 2) + 1, intlv=1, store=1)),)


@lru_cache(maxsize=None)
def combine(rows: int, splits: int) -> tuple:
    """A split row's flash-decode combine on one AIV (V4's op with split-KV, the metadata's
    FD tasks; the kernel's FD VF is not among the sources read, so it is counted as FlashMLA's
    CUDA combine does it): per row the splits' LSE (a load each) reduced to their max and
    weights exp(lse - max) (an SFU op each) and their sum; per split and register of O a load,
    a mul by the weight and an add; then per register a mul by 1 / sum and a bf16 cast,
    stored. Chain: load, mul, add across the splits, mul, cast, store."""
    regs = rows * D / REG_OPS
    alu = rows * splits * 3 + regs * (2 * splits + 2)
    return (_vf("FD combine", alu=alu, sfu=rows * splits, loads=rows * splits + regs * splits,
                stores=regs / 2, load_bytes=splits * regs * REG_BYTES + rows * splits * 4,
                store_bytes=regs * REG_BYTES / 2,
                chain=_chain(load=1, alu=2 * splits + 2, sfu=1, store=1)),)


@lru_cache(maxsize=None)
def clear_kv(buffer_bytes: int) -> tuple:
    """clear_kv_buf_vf over the UB gather slots at kernel start (zeros, so that a skipped
    gather leaves no NaN behind, S2): a VDUP (EXU0), then one store per register."""
    regs = math.ceil(buffer_bytes / REG_BYTES)
    return (_vf("clear KV gather buffers", reduce=1, stores=regs, store_bytes=buffer_bytes,
                chain=_chain(alu=1, store=1)),)
