"""The vector functions (VFs) of FlashMLA's Ascend kernel, costed by their instructions.

FlashMLA's AIVs do their vector work in SIMD VFs (S2 ``kernel_body.h``). Each VF here is
counted as S2 writes it: its ALU instructions (each over one full 256 B vector register),
the bytes it loads from and stores to UB, and, for FP4, the elements that pass the FP4
decoder. ``VecOp`` records then price them with the chip's rates: an instruction over a
full register is 64 fp32 element-ops (a 16-bit lane is half an fp32 op, so a 128-lane bf16
instruction is 64 too), at the chip's ``vf_alu`` rate for ALU instructions (calibrated, see
topologies/ascend950dt.yaml) and its ``special`` rate for exp and ln (8 per cycle, facts 1.2,
S8); loads and stores stream at 256 B/cycle beside the ALU (facts 1.2, S8), and FP4 rows
through the decoder at its rate (facts 1.2, S3).

Counts are per AIV and per call, as functions of the call's shape, so the other plans
(1C1V's 64 rows, ``b_topk``) are costed by the same code paths. Main names:
``dequant`` (``kv_dequant_and_nd2nz_for_decode_vf``), ``nd2nz`` (prefill's
``kv_nd2nz_for_prefill_vf``), ``softmax``, ``process_index``, ``scale_o``
(``add_and_scale_o_vf``), ``final_lse`` (``get_final_lse_and_denorm_vf``), ``final_output``
(``get_final_output_vf``) and ``clear_kv`` (``clear_kv_buf_vf``).

Assumptions a reader could doubt: every ALU instruction costs the same, whatever it does
(no source rates conversions, shifts, selects, (de)interleaves or reductions apart from
arithmetic); a VF's special-function instructions run after its other ALU work, not beside
it (S8: special functions are iterative).
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
# kv_dequant_and_nd2nz_for_decode_vf, V41 (FP8) branch, per token: 2 asc_intlv (scale
# broadcast), then per 128-element chunk asc_e4m32float, asc_e4m32float_v3, asc_shiftright,
# asc_or (FP8 -> packed bf16) and asc_mul (scale): 2 + 4 x 5
FP8_ALU_PER_TOKEN = 2 + (D // 128) * 5
FP8_SCALE_ROWS = 8        # its scale prologue converts 8 rows per asc_gather ...
FP8_ALU_PER_SCALE_STEP = 2  # ... with asc_min_scalar and asc_shiftleft_scalar (UE8M0 -> bf16)
# V41_FP4 branch, per token: per 128-element chunk asc_e2m1x22bfloat16 (the FP4 decoder)
# and asc_mul (scale)
FP4_ALU_PER_TOKEN = (D // 128) * 2
FP4_SCALE_ROWS = 4        # its scale prologue converts 4 rows per asc_gather ...
FP4_ALU_PER_SCALE_STEP = 4  # ... with 2 asc_e4m32float, asc_shiftright, asc_or (E4M3 -> bf16)
# process_kv_index_vf, per pair of index registers (2 x 64 int32 indices): decode computes
# page block and offset of both tokens of a gather2 pair (asc_deintlv, min/max, 2 validity
# compares, 2 x 4 for the fast div-mod, the offset and stride in 64 bits: 28 instructions);
# prefill only multiplies by the row size (10)
INDEX_ALU_PER_PAIR = {"decode": 28, "prefill": 10}
INDEX_ALU_SETUP = {"decode": 7, "prefill": 4}    # duplicated constants, asc_arange, deinterleave
INDEX_STORES_PER_PAIR = 6                        # smaller, larger, 2 x int64 offset, 2 x stride
INDEX_BLOCK = 640                                # facts 3.4: INDEX_BLOCK_SIZE; prefill walks it all


def _vec(alu: float, loads: float, stores: float, label: str, special: float = 0,
         decode: float = 0) -> tuple:
    """VecOps of one VF: its ALU instructions (with the UB traffic and FP4 decoding that
    stream beside it: reads and writes overlap, so the larger direction sets the UB time,
    as for ND2NZ, facts 3.3 S1), then its special-function instructions if any."""
    out = [isa.VecOp(alu * REG_OPS, "vf_alu", int(max(loads, stores)), label, int(decode))]
    if special:
        out.append(isa.VecOp(special * REG_OPS, "special", 0, f"{label}: exp/ln"))
    return tuple(out)


@lru_cache(maxsize=None)
def dequant(dtype: str, tokens: int, row_bytes: int) -> tuple:
    """One AIV's dequant + ND2NZ of ``tokens`` gathered rows (``row_bytes`` each in UB) to
    bf16 NZ (S2 kv_dequant_and_nd2nz_for_decode_vf)."""
    stores = tokens * D * 2                                   # vsstb: bf16 NZ rows
    if dtype == "fp8":
        steps = math.ceil(tokens / FP8_SCALE_ROWS)
        alu = tokens * FP8_ALU_PER_TOKEN + steps * FP8_ALU_PER_SCALE_STEP
        # asc_loadalign_unpack reads the 512 payload bytes, two broadcast loads the scales
        loads = tokens * (D + 2 * 32) + steps * REG_BYTES // 2
        return _vec(alu, loads, stores + steps * REG_BYTES, "dequant FP8 + ND2NZ")
    if dtype == "fp4":
        steps = math.ceil(tokens / FP4_SCALE_ROWS)
        alu = tokens * FP4_ALU_PER_TOKEN + steps * FP4_ALU_PER_SCALE_STEP
        loads = tokens * (D // 2 + (D // 128) * 32) + steps * REG_BYTES // 2
        # the FP4 decoder's rate is in decoded bytes (facts 1.2, S3 heuristics.hpp: "512
        # decoded bytes per eight vector cycles"); asc_e2m1x22bfloat16 decodes to bf16
        return _vec(alu, loads, stores + steps * REG_BYTES, "dequant FP4 + ND2NZ",
                    decode=tokens * D * 2)
    raise ValueError(f"no dequant VF for '{dtype}'")


@lru_cache(maxsize=None)
def nd2nz(tokens: int) -> tuple:
    """Prefill's kv_nd2nz_for_prefill_vf: bf16 rows to NZ with loads and vsstb stores only,
    at the UB rate (facts 3.3, S1: it "achieves peak UB read and write throughput")."""
    return (isa.VecOp(0, "vf_alu", tokens * D * 2, "ND2NZ"),)


@lru_cache(maxsize=None)
def softmax(rows: int, cols: int, first: bool) -> tuple:
    """One AIV's softmax_vf over its ``rows`` x ``cols`` block of P (S2): column masks from
    the index pairs, the row max (vmax per 4 rows x 16 columns, then 4 reductions per 4
    rows), for a later block the rescale decision (7 + one exp), then per 8 rows: scale, exp,
    row sum and bf16 cast of every register, 3 to merge and pack each pair of column groups,
    6 for the row sums; a later block also scales the old max and folds the old sum in."""
    groups = math.ceil(cols / 16)
    regs = rows * cols / REG_OPS                   # fp32 registers of P
    row_iters = math.ceil(rows / 8)
    alu = 2 * groups + regs + 4 * math.ceil(rows / 4)
    alu += row_iters * (2 + 3 * (cols / 8) - 2 + 3 * math.ceil(cols / 32) + 6)
    special = regs
    if not first:
        alu += 1 + 7 + 1       # scale the old max; the rescale decision; fold in the old sum
        special += 1
    loads = 2 * rows * cols * 4                    # P read for the max, then for the exp
    return _vec(alu, loads, rows * cols * 2, "softmax", special=special)


@lru_cache(maxsize=None)
def process_index(mode: str, indices: int) -> tuple:
    """process_kv_index_vf over one index group: decode walks the group's ``indices`` (both
    AIVs, all of them: each then gathers its half), prefill always the whole 640 (S2)."""
    n = INDEX_BLOCK if mode == "prefill" else max(1, indices)
    pairs = math.ceil(n / (2 * REG_OPS))
    alu = INDEX_ALU_SETUP[mode] + pairs * INDEX_ALU_PER_PAIR[mode]
    return _vec(alu, pairs * 2 * REG_BYTES, pairs * INDEX_STORES_PER_PAIR * REG_BYTES,
                "index preprocess")


@lru_cache(maxsize=None)
def scale_o(rows: int, frag_cols: int, add: bool) -> tuple:
    """add_and_scale_o_vf on one O fragment after a rescale drain: per row and register,
    load the fragment, (after the item's first drain) add the accumulator, scale, store."""
    regs = rows * frag_cols / REG_OPS
    loads = regs * REG_BYTES * (2 if add else 1)
    return _vec(regs * (2 if add else 1), loads, regs * REG_BYTES, "O scale + fragment")


@lru_cache(maxsize=None)
def final_lse(sinks: bool) -> tuple:
    """get_final_lse_and_denorm_vf, once per item: LSE = ln(sum) + max, 1 / (sum [+ exp(sink -
    max)]) on one register of row statistics."""
    alu = 11 + (1 if sinks else 0)
    out = list(_vec(alu, 4 * REG_BYTES, 3 * REG_BYTES, "final LSE + 1/sum",
                    special=2 if sinks else 1))
    out.append(isa.VecOp(REG_OPS, "div", 0, "1 / row sum"))
    return tuple(out)


@lru_cache(maxsize=None)
def final_output(rows: int, frag_cols: int, add: bool) -> tuple:
    """get_final_output_vf on one O fragment at an item's end: per pair of rows and register,
    load, (after a rescale drain) add the accumulator, multiply by 1/sum, cast to bf16; then
    merge and pack the two rows (3); the bf16 result is stored over the accumulator."""
    regs = rows * frag_cols / REG_OPS
    alu = regs * (3 if add else 2) + (rows / 2) * 3 * (frag_cols / 128)
    loads = regs * REG_BYTES * (2 if add else 1)
    return _vec(alu, loads, regs * REG_BYTES / 2, "O final: normalize, cast bf16")


@lru_cache(maxsize=None)
def clear_kv(buffer_bytes: int) -> tuple:
    """clear_kv_buf_vf over the UB gather slots at kernel start (zeros, so that a skipped
    gather leaves no NaN behind, S2): stores only."""
    return (isa.VecOp(0, "vf_alu", buffer_bytes, "clear KV gather buffers"),)
