"""Vector ops on UB tiles and their cost at the chip's vector rates (facts 1.2, 3.6).

Each op names its class and its element-ops, counted in fp32 lanes: a 256 B vector register
holds 64 fp32, 128 bf16/fp16 or 256 8-bit values and one instruction processes one register,
so an op on n elements of a w-bit type costs n * w / 32 element-ops, whatever the type
(facts 1.2, S8: ~51 fp32 ops/cycle for simple ops, 13 for div, 8 for special functions):

- simple: add, sub, mul, max, min, abs, neg, fill, mov, select, compare, fma, row
  reductions;
- div: div;
- special: exp (``exp(x - m)`` is one fused special op, as Ascend's ``vexpdif``), log,
  sqrt, rsqrt, tanh;
- cast: one conversion per element at fp32 width, two when a 16-bit type goes to or from
  an 8/4-bit float (through fp32, as TileKernels' Ascend casts do); an fp4 source also
  passes the FP4 decoder (64 B/cycle, facts 1.2, S3).

An op alone is one ``VecOp`` whose UB traffic is every operand's bytes. Ops inside ``with
T.vf():`` fuse into one vector function, as ``T.SimdVF`` does: values stay in registers,
so each buffer is read once and written once, and the element-ops of all classes run on
the one VALU one after another (``VecOp.ops`` in simple-op equivalents). A buffer whose
first use in the function is a write is produced there; one that is read first and then
written is updated in place (its data is not new).
"""

from __future__ import annotations

from simnode.instr import isa
from simnode.tile import dtypes
from simnode.tile.builder import current
from simnode.tile.regions import Buffer, Region, whole
from simnode.tile.site import caller, fail
from simnode.tile.sync import TileOp

CLASSES = {"add": "simple", "sub": "simple", "mul": "simple", "max": "simple", "min": "simple",
           "abs": "simple", "neg": "simple", "fill": "simple", "select": "simple",
           "compare": "simple", "fma": "simple", "reduce": "simple", "mov": "simple",
           "div": "div", "exp": "special", "log": "special", "sqrt": "special",
           "rsqrt": "special", "tanh": "special"}

_NARROW_FLOATS = ("fp8", "fp4")


class VF:
    """An open fused vector function: element-ops by class, and the buffers it touches."""
    __slots__ = ("label", "at", "ops", "reads", "writes", "order", "decode")

    def __init__(self, label, at):
        self.label, self.at = label, at
        self.ops = {"simple": 0.0, "div": 0.0, "special": 0.0}
        self.reads: dict = {}        #: Buffer -> (lo, hi, bytes, elements) read from outside
        self.writes: dict = {}       #: Buffer -> (lo, hi, bytes, elements)
        self.order: dict = {}        #: Buffer -> "r" or "w", its first use
        self.decode = 0

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


def _width(regions) -> float:
    return max(dtypes.bits(r.obj.dtype) for r in regions) / 32.0


_BITS = dtypes.BITS


def op(name: str, dst, *srcs, elements=None, label=None) -> None:
    """One vector op of class ``CLASSES[name]`` writing ``dst`` from ``srcs`` (regions or
    scalars); ``elements`` overrides the count (reductions count what they read)."""
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
    vf = current().vf
    if vf is not None:                      # the common case inside T.vf(): accumulate here
        for r in ins:
            if r.obj.scope != "reg":
                vf.touch(r, False)
        if d.obj.scope != "reg":
            vf.touch(d, True)
        vf.ops[CLASSES[name]] += n * bits / 32.0
        return
    _issue(CLASSES[name], n * bits / 32.0, [d], ins, label or name, None)


def cast(dst, src, label=None) -> None:
    at = None
    d, s = _ub(dst, "destination", at), _ub(src, "source", at)
    if d.elements != s.elements:
        fail(f"cast {s.describe()} -> {d.describe()}: {s.elements} vs {d.elements} elements", at)
    a, b_ = s.obj.dtype, d.obj.dtype
    steps = 2 if ((a in _NARROW_FLOATS) != (b_ in _NARROW_FLOATS) and 32 not in
                  (dtypes.bits(a), dtypes.bits(b_))) else 1
    decode = s.nbytes if a == "fp4" else 0
    _issue("simple", s.elements * steps, [d], [s], label or f"cast {a}->{b_}", at, decode)


def reduce(kind: str, dst, src, label=None) -> None:
    """Row reduction (sum / max / min / absmax) of ``src`` into ``dst``: any grouping whose
    result count divides the input (rows, per-32 groups, columns) costs one op per input."""
    at = None
    d, s = _ub(dst, "destination", at), _ub(src, "source", at)
    if s.elements % d.elements:
        fail(f"reduce_{kind} {s.describe()} -> {d.describe()}: {d.elements} results do not divide "
             f"{s.elements} inputs", at)
    per = 2 if kind == "absmax" else 1            # |x| then max
    _issue("simple", s.elements * per * _width([s]), [d], [s], label or f"reduce_{kind}", at)


def custom(reads, writes, simple=0.0, div=0.0, special=0.0, label="vf") -> None:
    """A vector function given by its instruction counts (256 B registers each), as
    ``T.SimdVF(latency=...)`` annotates one: for code the tile ops do not express."""
    at = caller()
    rs = [_ub(x, "operand", at) for x in reads]
    ws = [_ub(x, "destination", at) for x in writes]
    b = current()
    lanes = 64                                    # fp32 lanes of one 256 B register (facts 1.2)
    own = b.vf is None
    if own:
        b.vf = VF(label, at)
    vf = b.vf
    vf.use(rs, ws)
    vf.ops["simple"] += simple * lanes
    vf.ops["div"] += div * lanes
    vf.ops["special"] += special * lanes
    if own:
        b.vf = None
        _close(b, vf)


def _issue(cls, ops, dsts, srcs, label, at, decode=0) -> None:
    """Add an op to the open vector function, or issue it alone as one of its own."""
    b = current()
    vf = b.vf
    alone = vf is None
    if alone:
        b.need_block("run a vector op")
        vf = VF(label, at or caller())
    vf.use(srcs, dsts)
    vf.ops[cls] += ops
    vf.decode += decode
    if alone:
        _close(b, vf, sum_bytes=sum(r.nbytes for r in srcs if r.obj.scope != "reg")
               + sum(r.nbytes for r in dsts if r.obj.scope != "reg"))


_VECOPS: dict = {}


def _close(b, vf: VF, sum_bytes=None) -> None:
    """Issue one VecOp per AIV in scope for a finished vector function."""
    if not any(vf.ops.values()) and not vf.decode:
        return
    rates = b.chip.vector.ops_per_cycle
    used = [c for c, v in vf.ops.items() if v]
    if len(used) == 1:
        cls, ops = used[0], vf.ops[used[0]]
    else:
        # one VALU runs every class in turn: simple-op equivalents keep the sum of the times
        cls = "simple"
        ops = sum(v * rates["simple"] / rates[c] for c, v in vf.ops.items())
    ub = sum_bytes if sum_bytes is not None else (
        sum(x[2] for x in vf.reads.values()) + sum(x[2] for x in vf.writes.values()))
    key = (round(ops, 6), cls, ub, vf.label, vf.at[1], vf.decode)
    ins = _VECOPS.get(key)
    if ins is None:
        ins = _VECOPS[key] = isa.VecOp(ops, cls, ub, f"{vf.label} (line {vf.at[1]})", vf.decode)
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
            _close(b, vf)
        return False
