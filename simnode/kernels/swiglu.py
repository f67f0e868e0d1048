"""SwiGLU + per-token FP8 cast on the vector cores, after TileKernels'
``swiglu_forward_and_per_token_cast`` and its Ascend port in DeepGEMM-Ascend (S3
``third-party/tilelang_ops/swiglu_apply_weight_to_fp8.py``, "adapted from TileKernels").

The decode MoE layer's kernel between its grouped GEMMs is the same pass with two more steps
(facts v4-decode 2: dequant + SwiGLU (clamp 10) + quant): ``clamp_limit`` clamps the inputs
before SwiGLU as DeepSeek-V4's kernels do (CR ops/ascendc custom-npu_swiglu_group_quant.md:
A = min(A, limit), B = min(max(B, -limit), limit): 3 ops per output value), with MX scales
(``scale_block`` 32, ``sf_dtype`` ue8m0: its MX FP8 mode); ``in_dtype`` int32 is the INT8
path's input, dequantized first (CR npu_dequant_swiglu_clamp_quant: x x weight scale x token
scale, after a cast: 3 ops per input value).

What it reads, computes and writes (moe-layer facts 3): a row of ``x`` is ``2 I`` values
(BF16), gate = x[:, :I] and up = x[:, I:]; out = silu(gate) x up = gate / (1 + exp(-gate))
x up in FP32; per group of ``scale_block`` values amax, scale = amax / 448 (E4M3's largest
value) and the FP8 value x x 448 / amax; it writes the FP8 row (I bytes) and the row's
I / scale_block scales. Rows of padding (an expert segment's tail in the contiguous layout)
are skipped by the kernel (S3: ``is_valid_token`` against the per-expert prefix sums), so
``rows`` counts valid rows only.

Schedule (S3's port, one token per step): rows are dealt round-robin to the AIVs of
``num_cores`` AI cores (``T.Persistent``, group_size 1). Per row, an AIV's MTE2 loads the
gate half and the up half GM -> UB (two copies), V runs two SIMD VFs (SwiGLU + amax, then
scale + quantize), MTE3 stores the FP8 row and its scales UB -> GM; ``stages`` buffer
versions of the input and output rows (S3 ``num_stages = 3``) let the three pipes overlap.

``SwigluParams``; ``swiglu_schedule(chip, p)``; ``swiglu_roofline(chip, p)`` (HBM bytes
bound, vector-compute bound, the AIV copy paths, and which binds). Pure: no SimPy.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from simnode.config.chip import DTYPE_BITS, ChipSpec
from simnode.config.params import param
from simnode.errors import ScheduleError
from simnode.instr import isa
from simnode.instr.schedule import BufferUse, CoreProgram, KernelSchedule
from simnode.kernels import unchosen

IN_DTYPES = ("bf16", "fp32", "int32")        # TileKernels: x is bfloat16 or float32; int32: the
                                             # INT8 GEMM's output, dequantized here
#: TileKernels swiglu_forward_and_per_token_cast asserts fmt == 'e4m3'
OUT_DTYPES = ("fp8",)
#: scale bytes: float32 scales (TileKernels' default), or UE8M0 exponents (one byte; the
#: packed form DeepGEMM-Ascend's GEMMs read, written by S3's port with scale_block 32)
SF_BYTES = {"fp32": 4, "ue8m0": 1}
ROW_ALIGN_ELEMS = 256                        # S3: UB rows allocated at align(hidden, 256)
VECTOR_LANES = 64                            # fp32 lanes of one 256 B vector register (facts 1.2)

# -- the two SIMD VFs of S3's port, counted per 64-lane register of output values (their
#    instructions by opcode family, config.vector.VF_FAMILIES). VF 1, compute_swiglu, per
#    register: 2 vcvt bf16->fp32 (bf16 input; full rate), vexpdif (exp) and vdiv (special
#    functions), vadds (+1), vmul (x up), vabs (amax input); per four registers the amax
#    cascade 3 vdintlv + 3 vmax + 1 vcgmax. S3's cascade reduces to groups of 32; it is used
#    for any scale_block (a 128-group reduction takes a similar few steps).
CVT_PER_REG = 2                              # bf16 input only: bf16 -> fp32, full rate
#: int32 input: int32 -> fp32 (half rate), x weight scale, x token scale, on gate and up
DEQUANT_CVT_PER_REG, DEQUANT_MUL_PER_REG = 2, 4
CLAMP_PER_REG = 3                            # min on gate, max and min on up
SWIGLU_ALU_PER_REG = 3                       # vadds, vmul, vabs
SWIGLU_SFU_PER_REG = 2                       # vexpdif, vdiv
AMAX_REGS = 4                                # one cascade per four registers:
AMAX_INTLV, AMAX_ALU, AMAX_REDUCE = 3, 3, 1  # vdintlv x3, vmax x3, vcgmax
# VF 2, quantize_f32: per 64 groups vmaxs (clamp amax) and two vdiv (scale = amax / 448 and
# its inverse, the exact path); per register vadds (index), vselr (broadcast the inverse),
# vmul, and vcvt fp32->fp8 (half rate)
SCALE_ALU, SCALE_SFU = 1, 2
QUANT_ALU_PER_REG, QUANT_CVT_PER_REG = 3, 1


@dataclass(frozen=True)
class SwigluParams:
    """The ``swiglu`` workload's fields: each declared once here (``simnode.config.params``)."""
    # a workload runs at least one row; the MoE layer builds a rank's schedule with none
    rows: int = param(doc="valid rows (routed tokens of the rank's experts)", unit="rows", min=1)
    intermediate: int = param(doc="I: output values per row; a row reads 2 I (gate, up)",
                              unit="elements", min=128)
    in_dtype: str = param("bf16", "dtype of the gate/up rows", choices=IN_DTYPES)
    out_dtype: str = param("fp8", "dtype of the output rows (e4m3)", choices=OUT_DTYPES)
    scale_block: int = param(128, "values per scale (TileKernels num_per_channels = 128)",
                             unit="elements", min=1)
    sf_dtype: str = param("fp32", "scale format: fp32 or one UE8M0 byte", choices=("fp32", "ue8m0"))
    num_cores: int = param(0, "AI cores whose two AIVs run it (0 = all)", unit="cores", min=0)
    stages: int = param(3, "input/output row buffers per AIV (S3 num_stages = 3)", unit="buffers",
                        min=1)
    clamp_limit: float = param(0.0, "clamp the inputs to this before SwiGLU (0 = no clamp; "
                               "DeepSeek-V4: 10)", unit="1", min=0)

    def __post_init__(self):
        if isinstance(self.rows, numbers.Integral) and not isinstance(self.rows, bool):
            object.__setattr__(self, "rows", int(self.rows))   # NumPy counts -> plain int (JSON meta)

    @property
    def groups(self) -> int:
        return self.intermediate // self.scale_block


def _err(p: SwigluParams, msg: str) -> ScheduleError:
    return ScheduleError(f"SwiGLU ({p.rows} rows x {p.intermediate}): {msg}")


def _validate(chip: ChipSpec, p: SwigluParams) -> None:
    if p.rows < 0:
        raise _err(p, f"rows = {p.rows}: expected an integer >= 0.")
    bad = unchosen(p, in_dtype=IN_DTYPES)
    if bad:
        raise _err(p, bad)
    if p.out_dtype not in OUT_DTYPES:
        raise _err(p, f"out_dtype '{p.out_dtype}': expected fp8 (TileKernels casts to e4m3).")
    bad = unchosen(p, sf_dtype=tuple(SF_BYTES))
    if bad:
        raise _err(p, bad)
    if p.scale_block <= 0 or p.intermediate <= 0 or p.intermediate % p.scale_block:
        raise _err(p, f"intermediate {p.intermediate} is not a positive multiple of "
                      f"scale_block {p.scale_block}.")
    if p.intermediate % 128:
        raise _err(p, "intermediate must be a multiple of 128 (TileKernels asserts "
                      "hidden % 128 == 0).")
    if not 1 <= p.stages <= chip.sync.pipe_events_per_pair:
        raise _err(p, f"stages = {p.stages}: expected 1..{chip.sync.pipe_events_per_pair} "
                      f"(one event id per stage and pipe pair, facts 3.2).")
    if not 0 <= p.num_cores <= chip.num_ai_cores:
        raise _err(p, f"num_cores = {p.num_cores}: expected 0 (all) .. {chip.num_ai_cores}.")


def _in_bytes(p: SwigluParams) -> int:
    return 4 if p.in_dtype == "int32" else DTYPE_BITS[p.in_dtype] // 8


def row_bytes(p: SwigluParams) -> dict:
    """GM bytes one row reads and writes."""
    return {"read": 2 * p.intermediate * _in_bytes(p),
            "write": p.intermediate * DTYPE_BITS[p.out_dtype] // 8 + p.groups * SF_BYTES[p.sf_dtype]}


def vector_ops(p: SwigluParams) -> list[isa.VecOp]:
    """One row's two VFs as instruction records (class ``vf_alu``, priced by the chip's VF
    issue model): VF 1 (SwiGLU + amax) then VF 2 (scale + cast to FP8)."""
    i, g = p.intermediate, p.groups
    regs, gregs = -(-i // VECTOR_LANES), -(-g // VECTOR_LANES)
    cascades = -(-regs // AMAX_REGS)
    alu = regs * (SWIGLU_ALU_PER_REG + (CLAMP_PER_REG if p.clamp_limit > 0 else 0)) \
        + cascades * AMAX_ALU
    cvt = 0
    if p.in_dtype == "bf16":
        alu += regs * CVT_PER_REG
    elif p.in_dtype == "int32":
        alu += regs * DEQUANT_MUL_PER_REG
        cvt += regs * DEQUANT_CVT_PER_REG
    mix1 = (alu, cvt, cascades * AMAX_INTLV, cascades * AMAX_REDUCE, regs * SWIGLU_SFU_PER_REG)
    # gate and up loaded (one load per register of values each), the fp32 values and the
    # group maxima stored; chain: load, convert, exp, add, div, mul, abs, the cascade, store
    vf1 = isa.VecOp(sum(mix1) * VECTOR_LANES, "vf_alu", max(2 * i * _in_bytes(p), 4 * i),
                    "SwiGLU + amax (VF 1)", loads=2 * regs, stores=regs + cascades, vf_calls=1,
                    chain=(1, 1, 4 + AMAX_ALU, AMAX_INTLV, AMAX_REDUCE, 2, 0), mix=mix1)
    mix2 = (gregs * SCALE_ALU + regs * QUANT_ALU_PER_REG, regs * QUANT_CVT_PER_REG, 0, 0,
            gregs * SCALE_SFU)
    # the fp32 values and the maxima loaded, the FP8 row (a packing store per register) and
    # the scales stored; chain: load, clamp, 2 divs, select, mul, convert, store
    vf2 = isa.VecOp(sum(mix2) * VECTOR_LANES, "vf_alu", 4 * i, "scale + cast to FP8 (VF 2)",
                    loads=regs + gregs, stores=regs + gregs, vf_calls=1,
                    chain=(1, 1, 3, 0, 0, 2, 1), mix=mix2)
    return [vf1, vf2]


def _buffers(p: SwigluParams, unit: str) -> list[BufferUse]:
    cols = -(-p.intermediate // ROW_ALIGN_ELEMS) * ROW_ALIGN_ELEMS
    g64 = -(-p.groups // VECTOR_LANES) * VECTOR_LANES
    per_stage = 2 * cols * _in_bytes(p) + cols * DTYPE_BITS[p.out_dtype] // 8
    return [BufferUse(unit, "ub", f"gate + up + FP8 row x {p.stages} stages", p.stages * per_stage),
            BufferUse(unit, "ub", "fp32 values", 4 * cols),
            BufferUse(unit, "ub", "amax, inverse, scales", g64 * (4 + 4 + SF_BYTES[p.sf_dtype]))]


def swiglu_schedule(chip: ChipSpec, p: SwigluParams) -> KernelSchedule:
    """The AIV programs of one SwiGLU + cast; raises ScheduleError for what cannot run."""
    _validate(chip, p)
    cores = p.num_cores or chip.num_ai_cores
    aivs = [f"aiv{i}" for i in range(chip.aiv_per_core)]
    num_aivs = cores * len(aivs)
    rb = row_bytes(p)
    half = rb["read"] // 2
    S = p.stages
    # records shared by every row of every AIV (the engine resolves each distinct one once)
    load_gate = isa.Copy("gm_to_ub", half, label="load gate row")
    load_up = isa.Copy("gm_to_ub", half, label="load up row")
    store_out = isa.Copy("ub_to_gm", p.intermediate * DTYPE_BITS[p.out_dtype] // 8, label="store FP8 row")
    store_sf = isa.Copy("ub_to_gm", p.groups * SF_BYTES[p.sf_dtype], label="store scales")
    ops = vector_ops(p)
    vf1, vf2 = ops[:1], ops[1:]
    in_free_w = [isa.WaitFlag("v", "mte2", s) for s in range(S)]
    in_full = [isa.SetFlag("mte2", "v", s) for s in range(S)]
    in_full_w = [isa.WaitFlag("mte2", "v", s) for s in range(S)]
    in_free = [isa.SetFlag("v", "mte2", s) for s in range(S)]
    out_free_w = [isa.WaitFlag("mte3", "v", s) for s in range(S)]
    out_full = [isa.SetFlag("v", "mte3", s) for s in range(S)]
    out_full_w = [isa.WaitFlag("v", "mte3", s) for s in range(S)]
    out_free = [isa.SetFlag("mte3", "v", s) for s in range(S)]
    # one AIV's program for n rows is the first n rows of the longest one (the slot pattern
    # repeats), so the per-pipe lists are built once and sliced
    most = -(-p.rows // num_aivs) if p.rows else 0
    mte2, vec, mte3 = [], [], []
    marks = [(0, 0, 0)]
    for i in range(most):
        s = i % S
        if i >= S:
            mte2.append(in_free_w[s])
        mte2 += (load_gate, load_up, in_full[s])
        vec.append(in_full_w[s])
        vec += vf1
        vec.append(in_free[s])                  # gate/up consumed: MTE2 may refill the slot
        if i >= S:
            vec.append(out_free_w[s])
        vec += vf2
        vec.append(out_full[s])
        mte3 += (out_full_w[s], store_out, store_sf, out_free[s])
        marks.append((len(mte2), len(vec), len(mte3)))
    progs = []
    for c in range(cores):
        prog = CoreProgram(c)
        for a, unit in enumerate(aivs):
            n = (p.rows - (c * len(aivs) + a) + num_aivs - 1) // num_aivs if p.rows else 0
            if n <= 0:
                continue
            m2, mv, m3 = marks[n]
            prog.pipes[(unit, "mte2")] = mte2[:m2]
            prog.pipes[(unit, "v")] = vec[:mv]
            prog.pipes[(unit, "mte3")] = mte3[:m3]
            prog.buffers += _buffers(p, unit)
        if prog.pipes:
            progs.append(prog)
    meta = {"kind": "swiglu", "rows": p.rows, "intermediate": p.intermediate,
            "in_dtype": p.in_dtype, "scale_block": p.scale_block, "sf_dtype": p.sf_dtype,
            "stages": S, "aivs": num_aivs, "rows_per_aiv_max": most,
            "vector_cycles_per_row": sum(chip.vector.cycles(o) for o in ops)}
    sched = KernelSchedule(f"swiglu_{p.rows}x{p.intermediate}_{p.in_dtype}_to_{p.out_dtype}", progs, 0.0, meta)
    sched.check_buffers(chip)
    return sched


def swiglu_roofline(chip: ChipSpec, p: SwigluParams) -> dict:
    """Lower bounds in ns: GM bytes over HBM (and over L2), the vector work of the busiest
    AIV by the chip's VF issue model, and each AIV copy path at its rate; ``binds`` names the largest."""
    _validate(chip, p)
    cores = p.num_cores or chip.num_ai_cores
    num_aivs = cores * chip.aiv_per_core
    rb = row_bytes(p)
    total = p.rows * (rb["read"] + rb["write"])
    most = -(-p.rows // num_aivs) if p.rows else 0
    f = chip.aiv_freq_GHz
    f_path = chip.aic_freq_GHz                  # copy path rates are per AIC cycle (chip file)
    per_row = sum(chip.vector.cycles(o) for o in vector_ops(p))
    terms = {
        "hbm_ns": total / chip.memory.hbm_bandwidth_GBps,
        "l2_ns": total / chip.memory.l2_bandwidth_GBps,
        "vector_ns": most * per_row / f,
        "mte2_ns": most * rb["read"] / (chip.path("gm_to_ub").bandwidth_B_per_cycle * f_path),
        "mte3_ns": most * rb["write"] / (chip.path("ub_to_gm").bandwidth_B_per_cycle * f_path),
    }
    binds = max(terms, key=lambda k: (terms[k], k))
    return {**terms, "hbm_bytes": total, "bound_ns": terms[binds], "binds": binds[:-3]}
