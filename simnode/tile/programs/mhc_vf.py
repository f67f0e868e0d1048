"""The SIMD vector functions (VFs) of CANN-recipes' fused mHC kernels for the 950 (hc_pre,
hc_post: hicann/cann-recipes-infer @fbc225d2 ops/ascendc/src/hc_pre/op_kernel/
hc_pre_base_arch35.h and hc_post/op_kernel/hc_post_bfloat16.h), counted instruction by
instruction and priced by the chip's VF issue model (``config.vector``, class ``vf_alu``):
compute instructions at the chip's issue rate, each opcode family at its own (interleaves
every 2 cycles on EXU0, special functions a pair every 4), loads and stores on their ports, or the longest chain
of dependent instructions if longer, plus the fixed start and drain of a VF call. It is the
method of ``simnode.kernels.sparse_mla_vf`` (FlashMLA's VFs): the same instruction classes.

Used by the tile programs ``v4_hc_pre.py`` and ``v4_hc_post.py`` (imported, not loaded as a
program). ``issue`` hands each call to ``T.vector_work`` as its instruction record, so the
tile op takes exactly the VF model's time on the AIV's vector pipe.

Each function below returns the counts of one call on one AIV: ``alu`` compute instructions
(EXU0-only ones included, ``exu0`` of them), ``sfu`` special functions (exp, sqrt, div)
beside them, ``loads`` and ``stores``, and ``chain`` per ``config.chip.VF_LATENCY_CLASSES``
(load, store, alu, intlv, reduce, sfu); ``intlv`` says how many of the EXU0-only ones
interleave. Classes as VfSimulator's (sparse_mla_vf's list): (de)interleave, duplicate and
in-register reductions are EXU0-only; integer index math is taken as full-rate ALU. Assumptions a reader could doubt (each also a line where it is used):
- a loop's iterations overlap in the out-of-order VF (renamed registers), so a loop's chain
  is one iteration's, except where iterations carry a value (the Sinkhorn's matrix);
- a Sinkhorn call over more than 16 tokens (more than one packed chunk) runs its chunks one
  after another: each chunk's body is ~800 instructions, past any reorder window.
"""

from __future__ import annotations

from dataclasses import dataclass

import simnode.tile.lang as T
from simnode.instr import isa

LANES = 64                 # fp32 lanes of one 256 B register (facts ascend950 1.2)
PACK = LANES // 4          # tokens per register in the packed Sinkhorn (4 x 4 = 16 lanes each)


@dataclass(frozen=True)
class VF:
    """One VF call's instruction counts (see the module docstring)."""
    label: str
    alu: float = 0
    exu0: float = 0
    sfu: float = 0
    loads: int = 0
    stores: int = 0
    chain: tuple = (0, 0, 0, 0, 0, 0)
    intlv: float = 0           #: of the EXU0-only ones, (de)interleaves; the rest VDUP / reductions

    def vecop(self) -> isa.VecOp:
        """The call as one instruction record: full-rate ALU, interleaves, reductions (VDUP
        with them) and special functions per ``config.vector.VF_FAMILIES``."""
        mix = (self.alu - self.exu0, 0, self.intlv, self.exu0 - self.intlv, self.sfu)
        return isa.VecOp(self.alu * LANES, "vf_alu", 0, self.label, 0, exu0_ops=self.exu0 * LANES,
                         sfu_ops=self.sfu * LANES, loads=int(self.loads), stores=int(self.stores),
                         vf_calls=1, chain=self.chain, mix=mix)

    def cycles(self, chip) -> float:
        """Its time on one AIV, in AIC cycles, by the chip's VF model (one call)."""
        return chip.vector.cycles(self.vecop())


def chain(load=0, store=0, alu=0, intlv=0, reduce=0, sfu=0) -> tuple:
    return (load, store, alu, intlv, reduce, sfu)


def issue(vf: VF, reads, writes) -> None:
    """Record ``vf`` on the AIVs in scope, reading and writing these UB regions."""
    T.vector_work(reads, writes, label=vf.label, instructions=vf.vecop())


def regs(n: int) -> int:
    return -(-n // LANES)


# -- hc_pre, stage 1 (the AIVs feeding the cube) --------------------------------------------

def cast_sumsq(rows: int, cols: int, first: bool) -> VF:
    """VFProcessCastAndInvRmsPart1: a (rows x cols) BF16 strip to FP32 (stored for the cube)
    and each row's sum of squares / (lanes x hidden), added to the partial from earlier strips
    (``WithUbReduce``) unless ``first``. Per row: VDUP, per register load + cast + mul + add +
    store, then muls, VCADD (EXU0), the merge add and a one-element store."""
    n = regs(cols)
    more = 0 if first else 1
    return VF("hc_pre: cast + sum of squares", alu=rows * (3 * n + 3 + more), exu0=rows * 2,
              loads=rows * (n + more), stores=rows * (n + 1),
              # load -> cast -> mul -> the row's add chain -> muls -> reduce -> (add) -> store
              chain=chain(load=1, alu=2 + n + 1 + more, reduce=1, store=1))


def nd2nz(rows: int, cols: int) -> VF:
    """VFTransND2NZ: the FP32 strip rearranged into the cube's NZ layout in 32 B blocks: one
    block-strided load and one store per 8-row group and 8 columns; no compute."""
    blocks = (-(-rows // 8)) * (-(-cols // 8))
    return VF("hc_pre: ND2NZ", loads=blocks, stores=blocks, chain=chain(load=1, store=1))


# -- hc_pre, stage 2 (per token, after the barrier) -----------------------------------------

def inv_rms(rows: int, k_blocks: int) -> VF:
    """VFProcessInvRmsPart3WithGroupReduce: per token, sum the K blocks' partial mixes (24
    values, one register) and sums of squares (4 accumulators each, unrolled by 4), then
    rsqrt(mean + eps) = 1 / sqrt, and scale the mixes."""
    if k_blocks >= 4:
        per = 2 * k_blocks + 17          # 8 VDUP, 2 adds per block, 6 tree adds, adds, dup, mul
        exu0 = 9
        depth = k_blocks // 4 + k_blocks % 4 + 2     # one accumulator's adds, then the tree
    else:
        per, exu0, depth = 2 * k_blocks + 5, 3, k_blocks
    return VF("hc_pre: inverse RMS + mixes", alu=1 + rows * per, exu0=1 + rows * exu0,
              sfu=rows * 2, loads=rows * 2 * k_blocks, stores=rows,
              # load -> accumulate -> tree -> adds -> sqrt -> div -> dup -> mul -> store
              chain=chain(load=1, alu=depth + 3, sfu=2, store=1))


def gate(rows: int, label: str, unaligned: bool = False) -> VF:
    """VFProcessPre / VFProcessPost: sigmoid(mix x scale + base) (+ eps, or x 2) on the 4
    lane weights of each token: muls, add, muls -1, exp, adds 1, div, adds / muls."""
    return VF(label, alu=1 + rows * 5, exu0=1, sfu=rows * 2, loads=1 + rows + (1 if unaligned else 0),
              stores=rows, chain=chain(load=1 + (1 if unaligned else 0), alu=5, sfu=2, store=1))


def weighted_sum(rows: int, lanes: int, hidden: int) -> VF:
    """VFProcessY: y = sum over lanes of pre[lane] x x[lane] for each token, per register of
    the hidden row: VDUP, per lane a broadcast load of the weight, an unpacking load + cast
    of x, mul, add; cast to BF16 and store."""
    n = regs(hidden)
    per = 1 + lanes * 3 + 1
    return VF("hc_pre: weighted sum of lanes", alu=rows * n * per, exu0=rows * n,
              loads=rows * n * 2 * lanes, stores=rows * n,
              # x load -> cast -> mul -> the lanes' add chain -> cast -> store
              chain=chain(load=1, alu=2 + lanes + 1, store=1))


def sinkhorn(rows: int, iters: int) -> VF:
    """VFProcessCombFragPacked: the 4 x 4 comb matrices of 16 tokens packed in four registers
    (one per matrix row): scale + base, a row softmax, a column normalization, then
    ``iters - 1`` rounds of row and column normalization, each row sum a butterfly of two
    VDINTLV + add and two VINTLV (EXU0) that broadcasts it back, each division a VDIV (SFU).
    Every round needs the last one's matrix: 20 rounds are a dependent chain."""
    chunks = -(-rows // PACK)
    rounds = iters - 1
    # per chunk: scale + base (8); per matrix row a softmax of 8 interleaves (EXU0), 6 ALU
    # ops, exp and div; the column sums (4 ALU, 4 div); per round a VDUP (EXU0), per row 4
    # interleaves, 4 ALU ops and a div, then adds and 4 divs
    intlv = 4 * 8 + rounds * 4 * 4
    exu0 = intlv + rounds
    alu = 8 + 4 * 6 + 4 + rounds * (4 * 4 + 1) + exu0
    sfu = 4 * 2 + 4 + rounds * (4 + 4)
    # chain of one chunk: indices (4 ALU) -> gather -> scale, add -> a row's softmax (8
    # interleaves, 6 ALU, exp, div) -> column sum (3 adds), adds, div; per round one row's
    # sum (4 interleaves, 2 adds), adds, div, the 4 column-sum adds, adds, div; the scatter
    per_chunk = chain(load=1, store=1, alu=4 + 2 + 6 + 4 + rounds * 8, intlv=8 + rounds * 4,
                      sfu=3 + rounds * 2)
    return VF("hc_pre: Sinkhorn", alu=9 + chunks * alu, exu0=2 + chunks * exu0, sfu=chunks * sfu,
              intlv=chunks * intlv,
              loads=4 + chunks * 4, stores=chunks * 4,       # 4 gathers of hc_base; 4 gathers, 4 scatters
              chain=tuple(chunks * c for c in per_chunk))


# -- hc_post --------------------------------------------------------------------------------

def lane_update(lanes: int, cols: int) -> VF:
    """DoMulAndAdd: for each output lane, broadcast-load its comb column and post weight,
    then per register of the hidden chunk load + cast x and the 4 residual lanes, one mul and
    4 mul-adds (comb x residual + post x x), store FP32."""
    n = regs(cols)
    per = (lanes + 1) + 1 + lanes                      # casts, mul, mul-adds
    return VF("hc_post: lanes update", alu=lanes * n * per, loads=lanes * ((lanes + 1) + n * (lanes + 1)),
              stores=lanes * n,
              # load -> cast -> mul -> 4 mul-adds -> store
              chain=chain(load=2, alu=2 + lanes, store=1))


def cast_out(elements: int) -> VF:
    """AscendC::Cast FP32 -> BF16 of the updated lanes: load, convert, packing store."""
    n = regs(elements)
    return VF("hc_post: cast to BF16", alu=n, loads=n, stores=n, chain=chain(load=1, alu=1, store=1))
