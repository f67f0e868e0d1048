"""GM tensors, on-chip buffers and the regions (slices) that copies and ops name.

- ``Tensor``: a global-memory tensor declared by the program (``T.tensor``); its regions
  name L2 tiles (``gm_key``) and its footprint gives the roofline's HBM bytes.
- ``Buffer``: one allocation in a scope (l1, l0a, l0b, l0c, ub) made by a block; it maps
  to one ``Phys`` per unit holding it (a UB buffer of a mixed kernel has one per AIV).
- ``Phys``: the physical buffer on one unit, with its versions (multi-buffer slots), its
  size and the generation state that decides which slot a write fills.
- ``Region``: ``obj[starts : starts + extents]``; all-integer indexing gives a *point*
  whose extents come from the other operand of a copy (TileLang's convention).

Dependencies are tracked per slot on row ranges of dimension 0 (``Region.lo`` to ``hi``):
enough to tell the two halves of a dual copy apart; other dimensions count as whole rows.
"""

from __future__ import annotations

import math
import numbers

from simnode.tile import dtypes
from simnode.tile.site import fail

SCOPES = ("l1", "l0a", "l0b", "l0c", "ub")
#: scope -> the unit kind that holds it (facts 1.3)
SCOPE_UNIT = {"l1": "aic", "l0a": "aic", "l0b": "aic", "l0c": "aic", "ub": "aiv", "l0s": "aic"}


class _Array:
    """What a tensor and a buffer share: a named, shaped, typed array that slicing turns
    into a ``Region``."""
    __slots__ = ()

    @property
    def nbytes(self) -> int:
        return dtypes.nbytes(math.prod(self.shape), self.dtype)

    def __getitem__(self, idx) -> "Region":
        return make_region(self, idx)

    def __repr__(self) -> str:
        return f"{self.name}{list(self.shape)} {self.dtype} ({self.scope})"


class Tensor(_Array):
    """A global-memory tensor: name, shape, dtype; ``read`` / ``written`` record its use."""
    __slots__ = ("name", "shape", "dtype", "read", "written")
    scope = "gm"

    def __init__(self, name: str, shape: tuple, dtype: str):
        self.name, self.shape, self.dtype = name, shape, dtype
        self.read = self.written = False


class Phys:
    """A buffer as it sits on one unit: size per version, versions, and the record-time
    generation state (a new generation is new data; it takes the next slot when emitted)."""
    __slots__ = ("name", "scope", "unit", "size_bytes", "versions", "explicit", "at", "label",
                 "gen", "gen_token", "gen_ranges", "implicit", "state", "clock")

    def __init__(self, name, scope, unit, size_bytes, at, implicit=False):
        self.name, self.scope, self.unit = name, scope, unit
        self.size_bytes = size_bytes
        self.versions = 1
        self.explicit = False        #: versions set by the program (not promoted by a loop)
        self.at = at                 #: (file, line) of the allocation
        self.label = ""
        self.implicit = implicit     #: created by the lowering (gemm staging), not the program
        self.gen = 0                 #: generation of the data as the program wrote it
        self.gen_token = None        #: loop iteration that started the generation
        self.gen_ranges = []         #: row ranges written in this generation
        self.state = None            #: emission-time slot state (simnode.tile.sync)
        self.clock = 0               #: the builder's allocation count when last (re)allocated


class Buffer(_Array):
    """An on-chip allocation of one block: scope, shape, dtype, and its ``Phys`` per unit."""
    __slots__ = ("name", "scope", "shape", "dtype", "phys", "at", "_whole")

    def __init__(self, name, scope, shape, dtype, phys: dict, at):
        self.name, self.scope, self.shape, self.dtype = name, scope, shape, dtype
        self.phys = phys             #: unit -> Phys
        self.at = at
        self._whole = None

    def whole(self) -> "Region":
        r = self._whole
        if r is None:
            r = self._whole = Region(self, (0,) * len(self.shape), self.shape)
        return r


class Region:
    """``obj[starts : starts + extents]``; ``extents`` None is a point (see module doc).
    ``lo``, ``hi`` are the row range on dimension 0 and ``n`` the element count."""
    __slots__ = ("obj", "starts", "extents", "lo", "hi", "n")

    def __init__(self, obj, starts: tuple, extents: tuple | None):
        self.obj, self.starts, self.extents = obj, starts, extents
        if extents is not None:
            self.lo = starts[0]
            self.hi = starts[0] + extents[0]
            self.n = math.prod(extents)

    @property
    def is_point(self) -> bool:
        return self.extents is None

    @property
    def shape(self) -> tuple:
        return self.extents

    @property
    def elements(self) -> int:
        return self.n

    @property
    def nbytes(self) -> int:
        return dtypes.nbytes(self.n, self.obj.dtype)

    def key(self) -> tuple:
        """The L2 tile name of a GM region: tensor, start and extent."""
        return (self.obj.name, self.starts, self.extents)

    def describe(self) -> str:
        if self.extents is None:
            return f"{self.obj.name}[{', '.join(map(str, self.starts))}]"
        dims = ", ".join(f"{s}:{s + e}" for s, e in zip(self.starts, self.extents))
        return f"{self.obj.name}[{dims}]"


def whole(x) -> Region:
    """A buffer, tensor or region as a region (a bare buffer is all of it)."""
    if type(x) is Region:
        return x
    if type(x) is Buffer:
        return x.whole()
    if isinstance(x, (Buffer, Tensor)):
        return Region(x, (0,) * len(x.shape), tuple(x.shape))
    fail(f"expected a buffer, tensor or a slice of one, got {x!r}")


def make_region(obj, idx) -> Region:
    if type(idx) is not tuple:
        idx = (idx,)
    shape = obj.shape
    nd = len(shape)
    if len(idx) > nd:
        fail(f"{obj.name} has {nd} dimensions; indexed with {len(idx)}")
    starts, exts = [], []
    all_int = len(idx) == nd
    for d, i in enumerate(idx):
        n = shape[d]
        if type(i) is slice:
            a, b, step = i.start, i.stop, i.step
            a = 0 if a is None else (a if type(a) is int else _int(a, obj, d))
            b = n if b is None else (b if type(b) is int else _int(b, obj, d))
            if step not in (None, 1):
                fail(f"{obj.name}: slice steps are not supported (dimension {d})")
            if not 0 <= a < b <= n:
                fail(f"{obj.name}[... {a}:{b} ...] on dimension {d} lies outside its shape "
                     f"{list(shape)}: a shape that does not tile")
            starts.append(a)
            exts.append(b - a)
            all_int = False
        else:
            a = i if type(i) is int else _int(i, obj, d)
            if not 0 <= a < n:
                fail(f"{obj.name}: index {a} on dimension {d} lies outside its shape {list(shape)}")
            starts.append(a)
            exts.append(1)
    for d in range(len(idx), nd):
        starts.append(0)
        exts.append(shape[d])
    return Region(obj, tuple(starts), None if all_int else tuple(exts))


def _int(v, obj, d) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        fail(f"{obj.name}: index {v!r} on dimension {d} is not an integer")
    return int(v)


def resolve_point(r: Region, partner_shape: tuple) -> Region:
    """A point region given the shape of the other operand: extents right-aligned."""
    shape = r.obj.shape
    ps = list(partner_shape)
    while len(ps) > len(shape) and ps[0] == 1:
        ps.pop(0)
    if len(ps) > len(shape):
        fail(f"{r.describe()}: a point in {len(shape)} dimensions cannot take the shape "
             f"{list(partner_shape)} of the other operand")
    ext = [1] * (len(shape) - len(ps)) + ps
    for d, (s, e) in enumerate(zip(r.starts, ext)):
        if s + e > shape[d]:
            fail(f"{r.describe()} with extent {ext} reaches {s + e} on dimension {d}, past "
                 f"{r.obj.name}'s shape {list(shape)}: a shape that does not tile")
    return Region(r.obj, r.starts, tuple(ext))

