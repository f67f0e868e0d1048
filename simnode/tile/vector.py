"""Vector ops on UB tiles, lowered to the SIMD VF instructions they issue (facts 1.2, 3.6).

Each op issues, per 256 B register of its data (64 fp32, 128 bf16/fp16, 256 8-bit values),
instructions of one opcode family of ``config.vector.VF_FAMILIES`` (``INSTRUCTIONS``):

- full-rate ALU: add, sub, mul, max, min, abs, neg, select, compare, fma (VMADD), the
  f32 <-> bf16/fp16 converts; integer add/sub/mul are half-rate (the ``cvt`` family);
- special functions: exp (``exp(x - m)`` is one VEXPDIF), log, sqrt, div; rsqrt is a sqrt
  and a div;
- fill is one VDUP (the register is stored as often as the tile needs); mov is loads and
  stores only;
- a row reduction (sum / max / min) adds each row's registers pairwise (full-rate ALU),
  reduces the last one in-register (VCADD / VCMAX, single issue) and stores the row's scalar
  with a one-point store (the VF has no lane insert), as TileLang's flash-attention softmax
  does; groups smaller than a register reduce in-register (VCGADD / VCGMAX), one per register;
- cast: converts through fp32 (two when a 16-bit type goes to or from an 8/4-bit float, as
  TileKernels' Ascend casts do), full-rate between fp32 and a 16-bit float, half-rate
  otherwise; a narrowing cast packs each output register with an or (VOR); an fp4 source
  also passes the FP4 decoder (64 B/cycle, facts 1.2, S3).

A UB operand is loaded once per vector function (one load per register of the region it
covers) and a written UB region stored once; a per-row operand broadcast against a wider
tile (``m`` of ``exp(s - m)``) takes a broadcast load per row. Ops inside ``with T.vf():``
fuse into one vector function, as ``T.SimdVF`` does: values stay in registers, and the
instruction stream is priced by the chip's one VF issue model (``config.vector``); an op
alone is a vector function of its own. A buffer whose first use in the function is a write
is produced there; one that is read first and then written is updated in place.
"""

from __future__ import annotations

from simnode.config.vector import VF_FAMILIES, VF_LATENCY_CLASSES
from simnode.instr import isa
from simnode.tile import dtypes
from simnode.tile.builder import current
from simnode.tile.regions import Buffer, Region, whole
from simnode.tile.site import caller, fail
from simnode.tile.sync import TileOp

#: the opcode family (``config.vector.VF_FAMILIES``) and instructions per register of each op
INSTRUCTIONS = {"add": ("alu", 1), "sub": ("alu", 1), "mul": ("alu", 1), "max": ("alu", 1),
                "min": ("alu", 1), "abs": ("alu", 1), "neg": ("alu", 1), "select": ("alu", 1),
                "compare": ("alu", 1), "fma": ("alu", 1), "div": ("sfu", 1), "exp": ("sfu", 1),
                "log": ("sfu", 1), "sqrt": ("sfu", 1), "rsqrt": ("sfu", 2)}
#: integer element-wise arithmetic issues at the half rate (the ``cvt`` family, config.vector)
_INT_HALF_RATE = ("add", "sub", "mul")
_INTS = ("int64", "int32", "uint32", "int16", "uint16", "int8", "uint8")
_NARROW_FLOATS = ("fp8", "fp4")
REG_BITS = 2048                                   # one 256 B vector register (facts 1.2, S3/S8)


def _regs(elements: int, bits: int) -> int:
    """Registers ``elements`` values of ``bits`` fill."""
    return -(-elements * bits // REG_BITS)


class VF:
    """An open fused vector function: its instructions by family, the extra loads and stores
    its ops need beyond one pass over its UB operands, its chain, the buffers it touches."""
    __slots__ = ("label", "at", "mix", "loads", "stores", "chain", "reads", "writes", "order",
                 "decode")

    def __init__(self, label, at):
        self.label, self.at = label, at
        self.mix = dict.fromkeys(VF_FAMILIES, 0)
        self.loads = self.stores = 0
        self.chain = dict.fromkeys(VF_LATENCY_CLASSES, 0)
        self.reads: dict = {}        #: Buffer -> (lo, hi, bytes, elements) read from outside
        self.writes: dict = {}       #: Buffer -> (lo, hi, bytes, elements)
        self.order: dict = {}        #: Buffer -> "r" or "w", its first use
        self.decode = 0

    def issue(self, family: str, n: int) -> None:
        """``n`` instructions of ``family``; one of them joins the VF's dependent chain."""
        if n:
            self.mix[family] += n
            self.chain[family] += 1

    def touch(self, r: Region, write: bool) -> None:
        buf = r.obj
        if buf.scope == "reg":
            return                   # registers: no UB traffic, no flags
        first = self.order.setdefault(buf, "w" if write else "r")
        if not write and first == "w":
            return                   # produced in this function: stays in registers
        target = self.writes if write else self.reads
        old = target.get(buf)
        if old is None:
            target[buf] = (r.lo, r.hi, r.nbytes, r.n)
        elif old[0] > r.lo or old[1] < r.hi or old[3] < r.n:
            target[buf] = (min(old[0], r.lo), max(old[1], r.hi), max(old[2], r.nbytes), max(old[3], r.n))

    def use(self, srcs, dsts) -> None:
        """Record an op that reads ``srcs`` and writes ``dsts`` (regions)."""
        for r in srcs:
            self.touch(r, False)
        for r in dsts:
            self.touch(r, True)


def _ub(x, what, at) -> Region | None:
    t = type(x)
    if t is Region:
        r = x
    elif t is Buffer:
        r = x.whole()
    elif t in (int, float):
        return None
    else:
        r = whole(x)
    sc = r.obj.scope
    if sc != "ub" and sc != "reg":
        if r.is_point:
            fail(f"vector {what} {r.describe()}: a point; give the tile (slice) the op covers", at)
        fail(f"vector {what} {r.describe()} is in {sc.upper()}: vector ops read and write "
             f"UB tiles (or register tiles, T.alloc_reg)", at)
    if r.extents is None:
        fail(f"vector {what} {r.describe()}: a point; give the tile (slice) the op covers", at)
    return r


_BITS = dtypes.BITS


def op(name: str, dst, *srcs, elements=None, label=None) -> None:
    """One vector op ``name`` writing ``dst`` from ``srcs`` (regions or scalars);
    ``elements`` overrides the count of values it computes."""
    d = _ub(dst, "destination", None)
    n = d.n
    bits = _BITS[d.obj.dtype]
    ins = []
    for x in srcs:
        t = type(x)
        if t is int or t is float:
            continue
        r = _ub(x, "operand", None)
        rn = r.n
        if rn != n:
            if n % rn and rn % n:
                fail(f"vector {name}: operand {r.describe()} ({rn} elements) does not broadcast "
                     f"to {d.describe()} ({d.n})")
            if rn > n:
                n = rn
        rb = _BITS[r.obj.dtype]
        if rb > bits:
            bits = rb
        ins.append(r)
    if elements is not None:
        n = elements
    vf, alone = _open(label or name)
    regs = _regs(n, bits)
    if name == "fill":
        vf.issue("reduce", 1)                       # one VDUP, stored as often as needed
    elif name != "mov":
        family, per = INSTRUCTIONS[name]
        if name in _INT_HALF_RATE and d.obj.dtype in _INTS:
            family = "cvt"
        vf.issue(family, regs * per)
    rows = d.extents[0]
    for r in ins:
        # a per-row value broadcast over a wider row: one broadcast load per row (BRC)
        if r.obj.scope == "ub" and r.n < n and r.n == rows and d.n > rows:
            vf.loads += rows
    vf.use(ins, [d])
    if alone:
        _finish(vf)


def cast(dst, src, label=None) -> None:
    at = None
    d, s = _ub(dst, "destination", at), _ub(src, "source", at)
    if d.elements != s.elements:
        fail(f"cast {s.describe()} -> {d.describe()}: {s.elements} vs {d.elements} elements", at)
    a, b_ = s.obj.dtype, d.obj.dtype
    wide = 32 in (dtypes.bits(a), dtypes.bits(b_))
    steps = 2 if ((a in _NARROW_FLOATS) != (b_ in _NARROW_FLOATS) and not wide) else 1
    fast = {a, b_} <= {"fp32", "bf16", "fp16"}      # f32 <-> bf16 / f16: full rate
    vf, alone = _open(label or f"cast {a}->{b_}", at)
    n = s.elements
    vf.issue("alu" if fast else "cvt", _regs(n, 32) * steps)
    if _BITS[b_] < _BITS[a]:
        vf.issue("alu", _regs(n, _BITS[b_]))         # pack the narrowed halves (VOR)
    vf.decode += s.nbytes if a == "fp4" else 0
    vf.use([s], [d])
    if alone:
        _finish(vf)


def reduce(kind: str, dst, src, label=None) -> None:
    """Row reduction (sum / max / min / absmax) of ``src`` into ``dst``: any grouping whose
    result count divides the input (rows, per-32 groups, columns)."""
    at = None
    d, s = _ub(dst, "destination", at), _ub(src, "source", at)
    if s.elements % d.elements:
        fail(f"reduce_{kind} {s.describe()} -> {d.describe()}: {d.elements} results do not divide "
             f"{s.elements} inputs", at)
    vf, alone = _open(label or f"reduce_{kind}", at)
    bits = _BITS[s.obj.dtype]
    regs, results = _regs(s.elements, bits), d.elements
    if kind == "absmax":
        vf.issue("alu", regs)                         # |x| first
    if (s.elements // results) * bits >= REG_BITS:  # a result per row of registers
        vf.issue("alu", regs - results)               # fold each row's registers into one
        vf.issue("reduce", results)                   # VCADD / VCMAX
        vf.stores += results                          # the row's scalar, a one-point store
    else:
        vf.issue("reduce", regs)                      # VCGADD / VCGMAX: groups in-register
    vf.use([s], [d])
    if alone:
        _finish(vf)


def custom(reads, writes, simple=0.0, div=0.0, special=0.0, label="vf", instructions=None) -> None:
    """A vector function given by its instruction counts (256 B registers each), as
    ``T.SimdVF(latency=...)`` annotates one: for code the tile ops do not express. ``simple``
    are full-rate ALU instructions, ``div`` and ``special`` special-function ones. Or a VF
    counted whole by its caller: ``instructions``, an ``isa.VecOp`` of class ``vf_alu`` with
    its own loads, stores and chain, issued as given (``reads`` and ``writes`` then only
    order it against the other pipes)."""
    at = caller()
    rs = [_ub(x, "operand", at) for x in reads]
    ws = [_ub(x, "destination", at) for x in writes]
    vf, alone = _open(label, at)
    if instructions is not None:
        if not alone:
            fail("T.vector_work(instructions=...) is a whole vector function: not inside T.vf()", at)
        vf.use(rs, ws)
        _record(vf, instructions)
        return
    vf.use(rs, ws)
    vf.issue("alu", simple)
    vf.issue("sfu", div + special)
    if alone:
        _finish(vf)


def _open(label, at=None):
    """The open vector function, or a new one for an op alone (then ``alone`` is true)."""
    b = current()
    if b.vf is not None:
        return b.vf, False
    b.need_block("run a vector op")
    return VF(label, at or caller()), True


_VECOPS: dict = {}


def _finish(vf: VF) -> None:
    """Issue one VecOp per AIV in scope for a finished vector function: its instructions,
    one load per register of each UB region it reads, one store per register it writes."""
    if not any(vf.mix.values()) and not vf.decode and not vf.reads and not vf.writes:
        return
    read_b = sum(x[2] for x in vf.reads.values())
    write_b = sum(x[2] for x in vf.writes.values())
    loads = vf.loads + sum(-(-x[2] // (REG_BITS // 8)) for x in vf.reads.values())
    stores = vf.stores + sum(-(-x[2] // (REG_BITS // 8)) for x in vf.writes.values())
    chain = dict(vf.chain, load=1 if loads else 0, store=1 if stores else 0)
    mix = tuple(vf.mix[f] for f in VF_FAMILIES)
    chain_t = tuple(chain[c] for c in VF_LATENCY_CLASSES)
    key = (mix, loads, stores, max(read_b, write_b), vf.label, vf.at[1], vf.decode, chain_t)
    ins = _VECOPS.get(key)
    if ins is None:
        ins = _VECOPS[key] = isa.VecOp(
            sum(mix) * (REG_BITS // 32), "vf_alu", max(read_b, write_b),
            f"{vf.label} (line {vf.at[1]})", vf.decode, loads=loads, stores=stores, vf_calls=1,
            chain=chain_t, mix=mix)
    _record(vf, ins)


def _record(vf: VF, ins) -> None:
    """Record ``ins`` on the vector pipe of every AIV in scope, with ``vf``'s UB accesses."""
    b = current()
    blk = b.block
    for u in b.scope:
        reads, writes = [], []
        for buf, (lo, hi, _, _) in vf.reads.items():
            ph = buf.phys.get(u)
            if ph is None:
                fail(f"'{buf.name}' is not in the UB of {u}", vf.at)
            reads.append(b.read_acc(ph, lo, hi))
        for buf, (lo, hi, _, _) in vf.writes.items():
            ph = buf.phys.get(u)
            if ph is None:
                fail(f"'{buf.name}' is not in the UB of {u}", vf.at)
            writes.append(b.write_acc(ph, lo, hi, accumulate=vf.order[buf] == "r"))
        b.record(TileOp(blk.core, b.pipe_index[(u, "v")], ins, tuple(reads), tuple(writes), vf.at))


class vf_scope:
    """``with T.vf(label):`` — the ops inside fuse into one vector function (``T.SimdVF``)."""

    def __init__(self, label="vf"):
        self.label = label

    def __enter__(self):
        b = current()
        b.need_block("open a vector function")
        if b.vf is not None:
            fail("T.vf() inside another T.vf()")
        b.vf = VF(self.label, caller())
        return self

    def __exit__(self, exc_type, *exc):
        b = current()
        vf, b.vf = b.vf, None
        if exc_type is None and vf is not None:
            _finish(vf)
        return False
