"""The tile language: what a program calls, as ``import simnode.tile.lang as T``.

Declarations: ``@T.program`` (the kernel function; its parameters are the workload's
fields, with ``T.param(default, doc=, choices=, min=)`` for documented ones), ``T.tensor``
(a GM tensor), ``T.meta`` (figures for the result), ``T.chip()``, ``T.num_ai_cores()``,
``T.num_vector_cores()``, ``T.ceildiv``.

Grid and loops (``simnode.tile.loops``): ``T.Kernel``, ``T.Vector``, ``T.Pipelined``,
``T.Persistent``, ``T.stage``.

Buffers: ``T.alloc_l1``, ``T.alloc_l0a``, ``T.alloc_l0b``, ``T.alloc_l0c``, ``T.alloc_ub``
(``T.alloc_shared`` is UB, as in TileLang's Ascend kernels), ``T.alloc_reg`` (a register
tile inside vector functions), ``T.alloc(scope, ...)``,
``T.annotate_buffer_versions``.

Data movement and compute (``simnode.tile.ops``, ``simnode.tile.vector``): ``T.copy``,
``T.dual_copy``, ``T.gemm``, ``T.load_mx_scales``; vector ops on UB tiles ``T.fill``, ``T.mov``,
``T.add``, ``T.sub``, ``T.mul``, ``T.div``, ``T.max``, ``T.min``, ``T.abs``, ``T.exp``,
``T.log``, ``T.sqrt``, ``T.rsqrt``, ``T.fma``, ``T.select``, ``T.compare``, ``T.cast``,
``T.reduce_sum``, ``T.reduce_max``, ``T.reduce_min``, ``T.reduce_absmax``, ``T.vf``
(fuse the ops inside into one vector function) and ``T.vector_work`` (a vector function
given by its instruction counts).

Manual synchronization (``T.Kernel(..., sync="manual")``): ``T.set_flag``,
``T.wait_flag``, ``T.cross_set``, ``T.cross_wait``, ``T.barrier``.

A program is traced, not computed: no value is ever held, so scalars given to ops (a
fill value, a comparison's kind, a scale) only document the kernel; shapes, dtypes, scopes
and the order of statements decide the schedule and its cost.
"""

from __future__ import annotations

from simnode.tile import flags as _flags
from simnode.tile import ops as _ops
from simnode.tile import vector as _vec
from simnode.tile.builder import current as _current
from simnode.tile.loops import Kernel, Persistent, Pipelined, Vector, stage  # noqa: F401
from simnode.tile.program import param, program  # noqa: F401
from simnode.tile.regions import SCOPES as _SCOPES
from simnode.tile.site import caller as _caller, fail as _fail

copy = _ops.copy
dual_copy = _ops.dual_copy
gemm = _ops.gemm
load_mx_scales = _ops.load_mx_scales
vf = _vec.vf_scope
SimdVF = _vec.vf_scope
vector_work = _vec.custom
cast = _vec.cast


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)


def chip():
    """The chip the program is built for (``simnode.config.chip.ChipSpec``)."""
    return _current().chip


def num_ai_cores() -> int:
    return _current().chip.num_ai_cores


def num_vector_cores() -> int:
    c = _current().chip
    return c.num_ai_cores * c.aiv_per_core


def tensor(name: str, shape, dtype: str):
    """A global-memory tensor of the kernel (an input, an output or both)."""
    return _current().tensor(name, shape, dtype)


_RESERVED_META = ("kind", "program", "sync", "kernel", "blocks", "flags_inserted")


def meta(**figures) -> None:
    """Figures the program reports (tile sizes ...): they appear in the result's details."""
    taken = [k for k in figures if k in _RESERVED_META]
    if taken:
        _fail(f"T.meta({taken[0]}=...): the lowering reports {', '.join(_RESERVED_META)} itself")
    _current().meta.update(figures)


# -- buffers -----------------------------------------------------------------------------

def alloc(scope: str, shape, dtype: str, name=None, versions=None):
    if scope not in _SCOPES:
        _fail(f"unknown scope {scope!r}: expected l1, l0a, l0b, l0c or ub")
    return _current().alloc(scope, shape, dtype, name, versions)


def alloc_l1(shape, dtype, name=None, versions=None):
    return _current().alloc("l1", shape, dtype, name, versions)


def alloc_l0a(shape, dtype, name=None, versions=None):
    return _current().alloc("l0a", shape, dtype, name, versions)


def alloc_l0b(shape, dtype, name=None, versions=None):
    return _current().alloc("l0b", shape, dtype, name, versions)


def alloc_l0c(shape, dtype="fp32", name=None, versions=None):
    return _current().alloc("l0c", shape, dtype, name, versions)


def alloc_ub(shape, dtype, name=None, versions=None):
    return _current().alloc("ub", shape, dtype, name, versions)


alloc_shared = alloc_ub


def alloc_reg(shape, dtype, name=None):
    """A register tile for values inside a vector function (no UB, no UB traffic)."""
    return _current().alloc("reg", shape, dtype, name)


def annotate_buffer_versions(versions: dict) -> None:
    """Versions (multi-buffer slots) per buffer, as TileLang's ``T.annotate_buffer_versions``."""
    b = _current()
    at = _caller()
    if not isinstance(versions, dict):
        _fail(f"annotate_buffer_versions expects {{buffer: versions}}, got {versions!r}", at)
    for buf, n in versions.items():
        b.set_versions(buf, n, at)


# -- vector ops --------------------------------------------------------------------------
# Each is one ``simnode.tile.vector`` op under TileLang's name; the factories keep every
# signature explicit, so a call with the wrong operands fails as a Python call would.

def _named(fn, name: str, doc: str):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _unary(name: str, doc: str):
    def op(dst, src):
        _vec.op(name, dst, src)
    return _named(op, name, doc)


def _binary(name: str, doc: str):
    def op(dst, a, b):
        _vec.op(name, dst, a, b)
    return _named(op, name, doc)


def _reduction(kind: str):
    def op(dst, src):
        _vec.reduce(kind, dst, src)
    return _named(op, f"reduce_{kind}", f"Row reduction ({kind}) of ``src`` into ``dst``.")


def fill(dst, value=0.0):
    _vec.op("fill", dst)


mov = _unary("mov", "dst = src on UB / register tiles (a vector move, not a DMA copy).")
add = _binary("add", "dst = a + b.")
sub = _binary("sub", "dst = a - b.")
mul = _binary("mul", "dst = a * b.")
div = _binary("div", "dst = a / b.")
max = _binary("max", "dst = max(a, b).")  # noqa: A001 (TileLang's name)
min = _binary("min", "dst = min(a, b).")  # noqa: A001
abs = _unary("abs", "dst = |src|.")  # noqa: A001
log = _unary("log", "dst = ln(src).")
sqrt = _unary("sqrt", "dst = sqrt(src).")
rsqrt = _unary("rsqrt", "dst = 1 / sqrt(src).")
reduce_sum = _reduction("sum")
reduce_max = _reduction("max")
reduce_min = _reduction("min")
reduce_absmax = _reduction("absmax")


def exp(dst, src, sub=None):
    """exp(src), or exp(src - sub) as one fused special op (Ascend's vexpdif)."""
    _vec.op("exp", dst, src, *(() if sub is None else (sub,)))


def fma(dst, a, b, c):
    """dst = a * b + c in one op (Ascend's vmula)."""
    _vec.op("fma", dst, a, b, c)


def select(dst, mask, a, b):
    _vec.op("select", dst, mask, a, b)


def compare(dst, a, b, op="eq"):
    """A lane-wise comparison into a mask (its kind ``op`` costs the same: one simple op)."""
    _vec.op("compare", dst, a, b)


# -- manual synchronization ----------------------------------------------------------------

def set_flag(src, dst=None, event=None):
    """``T.set_flag("mte2", "mte1", 0)`` or ``T.set_flag("MTE2_MTE1", 0)``."""
    _flags.flag("set", src, dst, event)


def wait_flag(src, dst=None, event=None):
    _flags.flag("wait", src, dst, event)


def cross_set(pipe, to_unit: str, flag: int):
    """Set cross-core flag ``flag`` from this unit's ``pipe`` to ``to_unit`` (aic / aivN)."""
    _flags.cross("set", pipe, to_unit, flag)


def cross_wait(pipe, from_unit: str, flag: int):
    """Wait on this unit's ``pipe`` for cross-core flag ``flag`` from ``from_unit``."""
    _flags.cross("wait", pipe, from_unit, flag)


def barrier(pipe):
    _flags.barrier(pipe)
