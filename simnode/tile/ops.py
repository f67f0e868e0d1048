"""Copies, gemm and flags of tile programs, turned into ``TileOp`` records.

``copy(src, dst)`` picks the path and pipe from the two scopes (facts 3.1, 3.3):

====================  ===========  ===================================================
GM -> L1              AIC MTE2     ``gm_to_l1`` (ND2NZ on the path, facts 3.3)
L1 -> L0A / L0B       AIC MTE1     ``l1_to_l0``
L0C -> GM             AIC FixPipe  ``l0c_to_gm`` (converts to the tensor's dtype)
L0C -> UB             AIC FixPipe  ``l0c_to_ub`` (one AIV; ``dual_copy`` for both)
GM -> UB              AIV MTE2     ``gm_to_ub``
UB -> GM / UB -> L1   AIV MTE3     ``ub_to_gm`` / ``ub_to_l1``
====================  ===========  ===================================================

Any other pair has no path and is an error naming the line. ``dual_copy`` splits the rows
between the AIVs in scope (FixPipe writing both UBs at 256 B/cycle, facts 1.4; MTE3 of each
AIV writing its half). ``gemm(a, b, c)`` runs on the cube: from L0A/L0B one MMAD; from L1
the lowering stages K steps through two halves of L0A and L0B (2 L0 stages, facts 3.5).
``load_mx_scales`` moves MX scale tiles L1 -> L0 on MTE1 at 32 B/cycle (facts 1.4, S3).
"""

from __future__ import annotations

import sys

from simnode.instr import isa
from simnode.tile import dtypes
from simnode.tile.builder import current as _builder
from simnode.tile.regions import Region, resolve_point, whole
from simnode.tile.site import FRAMEWORK, caller, fail
from simnode.tile.sync import TileOp

PATHS = {("gm", "l1"): "gm_to_l1", ("l1", "l0a"): "l1_to_l0", ("l1", "l0b"): "l1_to_l0",
         ("l0c", "gm"): "l0c_to_gm", ("l0c", "ub"): "l0c_to_ub", ("gm", "ub"): "gm_to_ub",
         ("ub", "gm"): "ub_to_gm", ("ub", "l1"): "ub_to_l1"}
_AIV_PATHS = frozenset({"gm_to_ub", "ub_to_gm", "ub_to_l1"})
_HINTS = {None: "normal", "normal": "normal", "notalloc": "notalloc"}

_LABELS: dict = {}
_MMADS: dict = {}


def _label(dst_name: str, src_name: str, at) -> str:
    key = (dst_name, src_name, at[1])
    s = _LABELS.get(key)
    if s is None:
        s = _LABELS[key] = f"{dst_name} <- {src_name} (line {at[1]})"
    return s


def _hint(l2, at) -> str:
    if isinstance(l2, str) and l2.upper().startswith("NOTALLOC"):
        return "notalloc"
    if isinstance(l2, str) and l2.upper().startswith("NORMAL"):
        return "normal"
    h = _HINTS.get(l2)
    if h is None:
        fail(f"l2 = {l2!r}: expected 'normal' or 'notalloc' (or TileLang's NORMAL_* / NOTALLOC_*)", at)
    return h


def _pair(b, src, dst, at) -> tuple[Region, Region]:
    src, dst = whole(src), whole(dst)
    if src.is_point and dst.is_point:
        fail(f"copy between two points {src.describe()} and {dst.describe()}: one side needs a shape", at)
    if src.is_point:
        src = resolve_point(src, dst.shape)
    elif dst.is_point:
        dst = resolve_point(dst, src.shape)
    return src, dst


def _path(src: Region, dst: Region, at) -> str:
    ss, ds = src.obj.scope, dst.obj.scope
    path = PATHS.get((ss, ds))
    if path is None:
        known = ", ".join(f"{a.upper()}->{c.upper()}" for a, c in PATHS)
        fail(f"no copy path from {ss.upper()} ({src.describe()}) to {ds.upper()} "
             f"({dst.describe()}); the paths are {known}", at)
    if not path.startswith("l0c") and src.obj.dtype != dst.obj.dtype:
        fail(f"copy {src.describe()} ({src.obj.dtype}) -> {dst.describe()} ({dst.obj.dtype}): only "
             f"FixPipe converts on the path (from L0C); cast on UB with T.cast", at)
    return path


def _mn(r: Region) -> tuple[int, int]:
    n = r.extents[-1]
    return r.elements // n, n


def _statement(what: str):
    """(file, line) of the program statement calling ``copy`` or ``gemm``, the builder and its
    block. Programs call these two in their innermost loops, so the statement is read off the
    caller's frame directly, with ``caller()``'s walk only when a language module called."""
    f = sys._getframe(2)
    at = (f.f_code.co_filename, f.f_lineno) if f.f_code.co_filename not in FRAMEWORK else caller()
    b = _builder()
    blk = b.block
    if blk is None:
        blk = b.need_block(what)
    return at, b, blk


def copy(src, dst, l2=None, transpose=False) -> None:
    """One copy; ``transpose`` costs as the plain copy (the MTE converts layouts on the path,
    facts 3.3). UB ends run on every AIV in scope, each on its own UB."""
    at, b, blk = _statement("copy")
    if type(src) is not Region or type(dst) is not Region or src.extents is None or dst.extents is None:
        src, dst = _pair(b, src, dst, at)
    so, do = src.obj, dst.obj
    path = PATHS.get((so.scope, do.scope))
    if path is None or (so.dtype != do.dtype and not path.startswith("l0c")):
        _path(src, dst, at)
    if src.n != dst.n:
        fail(f"copy {src.describe()} ({src.n} elements) -> {dst.describe()} "
             f"({dst.n} elements): sizes differ", at)
    hint = "normal" if l2 is None else _hint(l2, at)
    label = _LABELS.get((do.name, so.name, at[1])) or _label(do.name, so.name, at)
    if path == "gm_to_l1":
        so.read = True
        w = b.write_acc(do.phys["aic"], dst.lo, dst.hi, False)
        ins = isa.Copy(path, dtypes.nbytes(src.n, so.dtype), (so.name, src.starts, src.extents), hint, label)
        b.record(TileOp(blk.core, b.pipe_index[_MTE2], ins, (), (w,), at, 0, False, (("in", w[0]),)))
        return
    if path == "l1_to_l0":
        r = b.read_acc(so.phys["aic"], src.lo, src.hi)
        w = b.write_acc(do.phys["aic"], dst.lo, dst.hi, False)
        ins = _local_copy(path, dtypes.nbytes(src.n, so.dtype), label)
        b.record(TileOp(blk.core, b.pipe_index[_MTE1], ins, (r,), (w,), at))
        return
    if path in _AIV_PATHS:
        if path == "ub_to_l1" and b.kernel.vector:
            fail("UB -> L1 in a vector kernel: the AIC's L1 belongs to mixed kernels", at)
        for u in b.scope:
            _aiv_copy(b, blk, u, path, src, dst, hint, label, at)
        return
    if path == "l0c_to_ub":
        if len(b.scope) != 1:
            fail(f"copy from L0C to UB with {len(b.scope)} AIVs in scope: use T.dual_copy to split "
                 f"the rows between them, or narrow the scope with `for sid in T.Vector()`", at)
        m, n = _mn(src)
        ins = isa.Fixpipe(m, n, do.dtype, "ub", None, "normal", label)
        _aic_op(b, blk, "fix", ins, src, [(dst, b.scope[0])], at)
        return
    m, n = _mn(src)                                   # l0c_to_gm
    do.written = True
    ins = isa.Fixpipe(m, n, do.dtype, "gm", dst.key(), hint, label)
    _aic_op(b, blk, "fix", ins, src, [], at)


_COPIES: dict = {}


def _local_copy(path: str, size: int, label: str):
    """An on-chip copy record (no GM region): equal ones are one shared frozen record."""
    key = (path, size, label)
    ins = _COPIES.get(key)
    if ins is None:
        ins = _COPIES[key] = isa.Copy(path, size, None, "normal", label)
    return ins


_MTE2 = ("aic", "mte2")
_MTE1 = ("aic", "mte1")


def _acc_read(b, r: Region, unit: str):
    return b.read_acc(r.obj.phys[unit], r.lo, r.hi)


def _acc_write(b, r: Region, unit: str, accumulate=False):
    return b.write_acc(r.obj.phys[unit], r.lo, r.hi, accumulate)


def _aic_op(b, blk, pipe, ins, src, dsts, at, dma=False, extra_reads=()):
    reads = tuple(extra_reads) + ((_acc_read(b, src, "aic"),) if src is not None and src.obj.scope != "gm" else ())
    writes = tuple(_acc_write(b, d, u) for d, u in dsts)
    op = TileOp(blk.core, b.pipe_index[("aic", pipe)], ins, reads, writes, at,
                dma=(("in", writes[0][0]),) if dma else None)
    b.record(op)


def _aiv_copy(b, blk, u, path, src, dst, hint, label, at):
    so, do = src.obj, dst.obj
    if path == "gm_to_ub":
        so.read = True
        ins = isa.Copy(path, dtypes.nbytes(src.n, so.dtype), (so.name, src.starts, src.extents), hint, label)
        w = b.write_acc(do.phys[u], dst.lo, dst.hi, False)
        op = TileOp(blk.core, b.pipe_index[(u, "mte2")], ins, (), (w,), at, 0, False, (("in", w[0]),))
    elif path == "ub_to_gm":
        do.written = True
        ins = isa.Copy(path, dtypes.nbytes(src.n, so.dtype), (do.name, dst.starts, dst.extents), hint, label)
        r = b.read_acc(so.phys[u], src.lo, src.hi)
        op = TileOp(blk.core, b.pipe_index[(u, "mte3")], ins, (r,), (), at, 0, False, (("out", r[0]),))
    else:
        ins = _local_copy(path, dtypes.nbytes(src.n, so.dtype), label)
        op = TileOp(blk.core, b.pipe_index[(u, "mte3")], ins, (b.read_acc(so.phys[u], src.lo, src.hi),),
                    (b.write_acc(do.phys["aic"], dst.lo, dst.hi, False),), at)
    b.record(op)


def dual_copy(src, dst, l2=None) -> None:
    """A copy whose rows split between the AIVs in scope (TileLang's ``T.dual_copy``):
    L0C -> UB as one FixPipe into both UBs, UB -> L1 / GM and GM -> UB as one copy per AIV
    on its share of the rows."""
    at = caller()
    b = _builder()
    blk = b.need_block("dual_copy")
    src, dst = _pair(b, src, dst, at)
    path = _path(src, dst, at)
    n = len(b.scope)
    hint = _hint(l2, at)
    label = _label(dst.obj.name, src.obj.name, at)
    if path == "l0c_to_ub":
        if src.elements != n * dst.elements:
            fail(f"dual_copy {src.describe()} ({src.elements} elements) -> {n} x {dst.describe()} "
                 f"({dst.elements} each): the rows must split evenly over the {n} AIVs", at)
        m, cols = _mn(src)
        ins = isa.Fixpipe(m, cols, dst.obj.dtype, "ub_dual" if n == 2 else "ub", None, "normal", label)
        _aic_op(b, blk, "fix", ins, src, [(dst, u) for u in b.scope], at)
        return
    if path not in _AIV_PATHS:
        fail(f"dual_copy {src.describe()} -> {dst.describe()}: dual copies run between L0C and UB, "
             f"UB and L1 / GM, or GM and UB", at)
    whole_side, part_side = (dst, src) if path != "gm_to_ub" else (src, dst)
    rows = whole_side.extents[0]
    if rows % n or whole_side.elements != n * part_side.elements:
        fail(f"dual_copy {src.describe()} -> {dst.describe()}: {whole_side.describe()} must hold "
             f"{n} x the rows of {part_side.describe()} (one share per AIV)", at)
    r = rows // n
    for k, u in enumerate(b.scope):
        starts = (whole_side.starts[0] + k * r,) + whole_side.starts[1:]
        share = Region(whole_side.obj, starts, (r,) + whole_side.extents[1:])
        if path == "gm_to_ub":
            _aiv_copy(b, blk, u, path, share, part_side, hint, label, at)
        else:
            _aiv_copy(b, blk, u, path, part_side, share, hint, label, at)


class MxScales:
    """The MX scales of one gemm step, loaded into the cube's scale buffer (see gemm)."""
    __slots__ = ("acc",)

    def __init__(self, acc):
        self.acc = acc


def load_mx_scales(a_scale, b_scale) -> MxScales:
    """L1 -> L0 scale load on MTE1 (facts 1.4, S3: 32 B/cycle) of both operands' UE8M0 scale
    tiles; its L0 space is not among the capacities of facts 1.3, so it is not checked."""
    at = caller()
    b = _builder()
    blk = b.need_block("load MX scales")
    regs = [whole(a_scale), whole(b_scale)]
    for r in regs:
        if r.obj.scope != "l1" or r.obj.dtype != dtypes.SCALE:
            fail(f"MX scales {r.describe()}: expected an L1 tile of {dtypes.SCALE} "
                 f"(it is {r.obj.scope.upper()} {r.obj.dtype})", at)
    ph = b.hidden("MX scales (L0)", "l0s", 1, 2)
    size = sum(r.nbytes for r in regs)
    ins = _local_copy("l1_to_l0_scale", size, f"MX scales (line {at[1]})")
    reads = tuple(_acc_read(b, r, "aic") for r in regs)
    w = b.write_acc(ph, 0, 1, False)
    b.record(TileOp(blk.core, b.pipe_index[("aic", "mte1")], ins, reads, (w,), at))
    return MxScales(b.read_acc(ph, 0, 1))


def _mat(r: Region, what, at) -> tuple[int, int]:
    dims = [e for e in r.extents]
    while len(dims) > 2 and dims[0] == 1:
        dims.pop(0)
    if len(dims) != 2:
        fail(f"gemm {what} {r.describe()}: expected a 2-D tile, got extents {list(r.extents)}", at)
    return dims[0], dims[1]


def gemm(a, b_, c, transpose_B=False, clear_accum=False, scales: MxScales | None = None,
         mode: str | None = None) -> None:
    """C (+)= A x B on the cube (facts 1.2): ``a`` (m, k), ``b`` (k, n) or (n, k) with
    ``transpose_B``, ``c`` (m, n) fp32 in L0C; ``clear_accum`` overwrites C. ``mode``: the
    cube's input mode when the operands hold its values packed in elements of their own
    type (``hf32``: FP32 values as pairs of 16-bit elements); the MMAD then runs at that
    mode's rate over k x bits(operand) / bits(mode) elements."""
    at, b, blk = _statement("gemm")
    if b.kernel.vector:
        fail("gemm in a vector kernel: the cube belongs to mixed kernels (T.Kernel(n))", at)
    a, bb, c = whole(a), whole(b_), whole(c)
    key = (a.extents, bb.extents, c.extents, a.obj.dtype, bb.obj.dtype, c.obj.scope, c.obj.dtype,
           transpose_B)
    dims = _GEMM_SHAPES.get(key)
    if dims is None:
        dims = _gemm_dims(b, a, bb, c, transpose_B, at)
        _GEMM_SHAPES[key] = dims
    m, n, k = dims
    dt = a.obj.dtype
    if mode is not None:
        if mode not in b.chip.cube.macs_per_cycle or (k * dtypes.bits(dt)) % dtypes.bits(mode):
            fail(f"gemm mode {mode!r} over {dt} operands of K {k}: expected a mode the cube takes "
                 f"({', '.join(b.chip.cube.macs_per_cycle)}) whose elements fill K exactly", at)
        k, dt = k * dtypes.bits(dt) // dtypes.bits(mode), mode
    extra = (scales.acc,) if scales is not None else ()
    sa, sb = a.obj.scope, bb.obj.scope
    if sa == "l0a" and sb == "l0b":
        _mmad(b, blk, m, n, k, dt, [b.read_acc(a.obj.phys["aic"], a.lo, a.hi),
                                    b.read_acc(bb.obj.phys["aic"], bb.lo, bb.hi), *extra],
              c, clear_accum, at)
        return
    if sa != "l1" or sb != "l1":
        fail(f"gemm operands in {sa.upper()} and {sb.upper()}: expected L0A and "
             f"L0B, or both in L1 (staged through L0 by the lowering)", at)
    _gemm_from_l1(b, blk, a, bb, c, m, n, k, dt, clear_accum, extra, at)


_GEMM_SHAPES: dict = {}


def _gemm_dims(b, a, bb, c, transpose_B, at) -> tuple:
    m, k = _mat(a, "A", at)
    r0, r1 = _mat(bb, "B", at)
    kb, n = (r1, r0) if transpose_B else (r0, r1)
    cm, cn = _mat(c, "C", at)
    if c.obj.scope != "l0c" or c.obj.dtype != "fp32":
        fail(f"gemm C {c.describe()}: expected an fp32 L0C tile", at)
    if (kb, cm, cn) != (k, m, n):
        fail(f"gemm shapes do not agree: A {m}x{k}, B {kb}x{n}{' (transposed)' if transpose_B else ''}, "
             f"C {cm}x{cn}", at)
    dt = a.obj.dtype
    if bb.obj.dtype != dt or dt not in b.chip.cube.macs_per_cycle:
        fail(f"gemm inputs {a.obj.dtype} x {bb.obj.dtype}: expected equal dtypes the cube takes "
             f"({', '.join(b.chip.cube.macs_per_cycle)})", at)
    return (m, n, k)


def _mmad(b, blk, m, n, k, dt, reads, c, clear, at) -> None:
    key = (m, n, k, dt, at[1])
    ins = _MMADS.get(key)
    if ins is None:
        ins = _MMADS[key] = isa.Mmad(m, n, k, dt, f"mmad (line {at[1]})")
    ph = c.obj.phys["aic"]
    if not clear:
        reads.append(b.read_acc(ph, c.lo, c.hi))
    w = b.write_acc(ph, c.lo, c.hi, not clear)
    b.record(TileOp(blk.core, b.pipe_index[_M], ins, tuple(reads), (w,), at))
    b.flops += 2.0 * m * n * k
    b.gemms.append((m, n, k, dt))


_M = ("aic", "m")


def _gemm_from_l1(b, blk, a, bb, c, m, n, k, dt, clear, extra, at) -> None:
    chip = b.chip
    k0 = chip.cube.fractal_k(dt)
    half_a = chip.buffers.capacity_bytes("l0a") // 2
    half_b = chip.buffers.capacity_bytes("l0b") // 2
    kk = 0
    step = k0
    while step <= k:
        if dtypes.nbytes(m * step, dt) <= half_a and dtypes.nbytes(step * n, dt) <= half_b:
            kk = step
        step += k0
    if kk == 0:
        fail(f"gemm from L1 of A {m}x{k}, B {k}x{n} {dt}: not even a K step of {k0} fits half of "
             f"L0A ({half_a} B) and L0B ({half_b} B): a shape that does not tile", at)
    sa = b.hidden("L0A staging (gemm from L1)", "l0a", half_a, 2)
    sb = b.hidden("L0B staging (gemm from L1)", "l0b", half_b, 2)
    mte1 = b.pipe_index[("aic", "mte1")]
    lab = f"L1->L0 (line {at[1]})"
    for j, k_lo in enumerate(range(0, k, kk)):
        kl = min(kk, k - k_lo)
        wa = b.write_acc(sa, 0, 1, False)
        b.record(TileOp(blk.core, mte1, _local_copy("l1_to_l0", dtypes.nbytes(m * kl, dt), lab),
                        (_acc_read(b, a, "aic"),), (wa,), at))
        wb = b.write_acc(sb, 0, 1, False)
        b.record(TileOp(blk.core, mte1, _local_copy("l1_to_l0", dtypes.nbytes(kl * n, dt), lab),
                        (_acc_read(b, bb, "aic"),), (wb,), at))
        _mmad(b, blk, m, n, kl, dt, [b.read_acc(sa, 0, 1), b.read_acc(sb, 0, 1), *extra], c,
              clear and j == 0, at)
