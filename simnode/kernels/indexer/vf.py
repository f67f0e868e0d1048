"""The indexer kernels' vector functions (VFs), costed by their instructions.

Counted intrinsic by intrinsic from the published sources, in the convention of the sparse
MLA VFs (``simnode.kernels.sparse_mla_vf``'s docstring: ``vf_alu`` ``VecOp`` records whose
``ops`` are 64 per full-register instruction, priced by ``config.chip.VectorSpec.cycles``):

- ``cann_reduce``: ops-transformer ``quant_lightning_indexer`` arch35 ``vector1.h``,
  ``MulWeightAndReduceSum`` (one query per AIV) and ``MulWeightAndReduceSum2`` (two): per head,
  the FP32 QK rows of 128 keys (2 registers) are loaded, ReLU'd and multiply-added with the
  head's weight x q-scale into one accumulator per query; then x k-scale, FP32 -> BF16, to
  sortable 16-bit keys, stored.
- ``cann_topk``: its fused top-k (``vf_topk_16_gather.h`` ``LiTopKVF``): a 256-bin histogram
  of the keys' high bytes, the bin of the k-th largest, a histogram of the low bytes inside it,
  the k-th key; then the indices of the keys above it and of those equal to it (squeeze stores);
  with ``values`` also their keys (the partial top-k a merge reads); ``cann_merge_index`` the
  merge's index gather (``FindRealIndexVFImpl``).
- ``deepgemm_reduce``: DeepGEMM-Ascend ``mqa_logits.hpp`` ``vf_mqa_logits_reduce``: FixPipe has
  already applied ReLU and converted to BF16 (128 keys per register); per head a broadcast
  weight load and, per register of keys, a load and a multiply-add.

Instruction classes (VfSimulator ``dispatch_exu``, as in sparse_mla_vf): ALU forms (relu,
mul, madd, add, compare, select, and, xor, cast, arange) on either EXU; duplicate and
(de)interleave on EXU0 only. Assumptions a reader could doubt: the register-to-register
``Gather`` of ``BroadcastLane`` is classed with the permutes (EXU0 only); ``Histograms`` and
``Squeeze`` (not in VfSimulator's list) are ALU forms; an accumulation over heads is one
dependent chain (each multiply-add waits for the previous one into the same register).
"""

from __future__ import annotations

import math
from functools import lru_cache

from simnode.instr import isa

REG_OPS = 64               # fp32 element-ops of one full-register instruction (sparse_mla_vf.REG_OPS)
REG_BYTES = 256            # one vector register (facts 1.2, S3 vector_reg_bytes)
BRC_BYTES = 32             # a broadcast load reads one 32 B UB block


def _chain(load=0, store=0, alu=0, intlv=0, reduce=0, sfu=0) -> tuple:
    """A dependent chain as a count per ``config.chip.VF_LATENCY_CLASSES``."""
    return (load, store, alu, intlv, reduce, sfu)


def vf_record(label: str, *, alu=0, exu0=0, loads=0, stores=0, load_bytes=0, store_bytes=0,
              chain=(), call=True) -> isa.VecOp:
    """One VF phase: ``alu`` compute instructions either EXU issues and ``exu0`` more only EXU0
    issues, load and store instructions and their bytes (reads and writes overlap: the larger
    sets the UB time), its longest dependent chain, and whether it opens a VF call (start +
    drain)."""
    return isa.VecOp((alu + exu0) * REG_OPS, "vf_alu", int(max(load_bytes, store_bytes)), label,
                     exu0_ops=exu0 * REG_OPS, loads=int(loads), stores=int(stores),
                     vf_calls=1 if call else 0, chain=chain)


@lru_cache(maxsize=None)
def cann_reduce(queries: int, heads: int) -> tuple:
    """One AIV's weighted ReLU reduction of one 128-key block for ``queries`` (1 or 2) query
    tokens of ``heads`` heads each (its FP32 QK rows in UB), to 128 sortable BF16 scores each."""
    if queries == 1:
        # MulWeightAndReduceSum: 4 VDUP (sort constants), weight unpack load + cast, q-scale load
        # + mul, 4 VDUP (two accumulator pairs), 2 k-scale loads; per head pair (unroll 2): 4
        # loads, 2 BroadcastLane (VDUP index + register gather), 4 relu, 4 madd; then add x2,
        # mul x2, deinterleave, 2 casts, 6 ALU to sortable keys, 1 store
        pairs = heads // 2
        alu = 2 + pairs * 8 + 2 + 2 + 2 + 6
        exu0 = 8 + pairs * 4 + 1
        loads = 4 + pairs * 4
        # chain: load, relu, then every other head's madd into one accumulator, add, mul,
        # deinterleave, cast, 6 key ops, store
        return (vf_record("QK ReLU x weight, reduce over heads (1 query)", alu=alu, exu0=exu0,
                          loads=loads, stores=1, load_bytes=loads * REG_BYTES, store_bytes=REG_BYTES,
                          chain=_chain(load=1, alu=1 + pairs + 1 + 1 + 1 + 6, intlv=1, store=1)),)
    # MulWeightAndReduceSum2: prologue (4 VDUP, 2 weight loads + casts, 2 q-scale loads + muls,
    # the second weight row stored for broadcast loads) up to a store->load barrier; then
    # 4 VDUP, 2 k-scale loads; per head: 4 loads, a BroadcastLane from a register (VDUP + gather),
    # one from UB (a broadcast load), 4 relu, 4 madd; then 4 mul, 2 deinterleaves, 4 casts,
    # 12 ALU to sortable keys, 2 stores
    pro = vf_record("QK reduce (2 queries): weights", alu=4, exu0=4, loads=4, stores=1,
                    load_bytes=4 * REG_BYTES, store_bytes=REG_BYTES,
                    chain=_chain(load=1, alu=2, store=1))
    alu = heads * 8 + 4 + 4 + 12
    exu0 = 4 + heads * 2 + 2
    loads = 2 + heads * 5
    body = vf_record("QK ReLU x weight, reduce over heads (2 queries)", alu=alu, exu0=exu0,
                     loads=loads, stores=2, load_bytes=(2 + heads * 4) * REG_BYTES + heads * BRC_BYTES,
                     store_bytes=2 * REG_BYTES,
                     chain=_chain(load=1, alu=1 + heads + 1 + 1 + 6, intlv=1, store=1), call=False)
    return (pro, body)


@lru_cache(maxsize=None)
def cann_topk(n: int, k: int, values: bool = False) -> tuple:
    """One AIV's top-``k`` of ``n`` sortable 16-bit scores in UB (``LiTopKVF``): six VF calls
    (seven with ``values``: the selected keys too), then the 16 -> 32-bit index cast."""
    n = 256 * math.ceil(n / 256)             # the histogram takes 256 keys a step (zero-padded)
    h, i = n // 256, n // 128
    find = dict(alu=4 * 3 + 6, exu0=3, loads=4 + 2, stores=4 + 2, load_bytes=6 * REG_BYTES,
                store_bytes=6 * REG_BYTES, chain=_chain(load=2, alu=4, store=2))
    recs = [
        # per 256 keys: a deinterleaving load (high / low bytes), 2 histogram accumulates;
        # 4 casts and 2 interleaving stores of the 256 bins
        vf_record("top-k: high-byte histogram", alu=2 * h + 4, exu0=2, loads=h, stores=2,
                  load_bytes=n * 2, store_bytes=2 * REG_BYTES, chain=_chain(load=1, alu=h + 1, store=1)),
        # 4 x (arange, load, compare, squeeze, unaligned store), the bin, the count before it
        vf_record("top-k: target bin", **find),
        # a broadcast load; per 256 keys: load, compare with the bin, 2 histograms
        vf_record("top-k: low-byte histogram", alu=3 * h + 4, exu0=2, loads=h + 1, stores=2,
                  load_bytes=n * 2, store_bytes=2 * REG_BYTES, chain=_chain(load=1, alu=h + 2, store=1)),
        vf_record("top-k: k-th key", **find),
    ]
    for what in ("above", "equal to"):
        # per 128 keys: arange, load, compare, squeeze, unaligned store; the store's flush
        recs.append(vf_record(f"top-k: indices {what} the k-th", alu=3 * i, loads=i + 1, stores=i + 1,
                              load_bytes=n * 2, store_bytes=k * 2, chain=_chain(load=1, alu=2, store=1)))
    if values:
        j = math.ceil(k / 128)              # per 128 selected: index load, gather (a UB load), store
        recs.append(vf_record("top-k: selected keys", loads=2 * j, stores=j, load_bytes=j * 2 * REG_BYTES,
                              store_bytes=j * REG_BYTES, chain=_chain(load=2, store=1)))
    c = math.ceil(k / 64)                   # AscendC Cast u16 -> u32 of the k indices
    recs.append(vf_record("top-k: indices to int32", alu=c, loads=c, stores=c, load_bytes=k * 2,
                          store_bytes=k * 4, chain=_chain(load=1, alu=1, store=1)))
    return tuple(recs)


@lru_cache(maxsize=None)
def cann_merge_index(k: int) -> tuple:
    """The reduction's index gather (``FindRealIndexVFImpl``): per 64 selected, an unpack load,
    compare, mask xor, a gather of the part's index (a UB load), add, add, store."""
    j = math.ceil(k / 64)
    return (vf_record("top-k merge: part indices", alu=4 * j, loads=2 * j, stores=j,
                      load_bytes=2 * j * REG_BYTES, store_bytes=j * REG_BYTES,
                      chain=_chain(load=2, alu=2, store=1)),)


@lru_cache(maxsize=None)
def deepgemm_reduce(queries: int, heads: int, keys: int) -> tuple:
    """One AIV's weighted reduction of one tile's BF16 ReLU'd scores for ``queries`` query tokens
    (``vf_mqa_logits_reduce``, or ``_2q`` for a pair) over ``keys`` (issued, a multiple of 128):
    VDUP of the accumulators; per head a broadcast weight load per query and, per register of
    keys, a load and a madd; a store per register."""
    regs = keys // 128
    alu = heads * queries * regs
    loads = heads * queries * (1 + regs)
    return (vf_record("logits: weighted sum over heads", alu=alu, exu0=queries * regs, loads=loads,
                      stores=queries * regs, load_bytes=heads * queries * (regs * REG_BYTES + BRC_BYTES),
                      store_bytes=queries * regs * REG_BYTES,
                      chain=_chain(load=1, alu=heads, store=1)),)


@lru_cache(maxsize=None)
def cann_keep_all(k: int) -> tuple:
    """A row with no more entries than ``k``: every index kept (``CreateVecIndex``) and the rest
    of the row filled with -1 (``Duplicate``), per 64 indices one ALU form and one store."""
    j = math.ceil(k / 64)
    return (vf_record("top-k: all entries kept", alu=j, stores=j, store_bytes=k * 4,
                      chain=_chain(alu=1, store=1)),)
