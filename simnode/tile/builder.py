"""The tracer: runs a tile program's Python once per block and records what it does.

``Builder(chip)`` is the state of one build (held in a context variable, so builds in one
process never share state). The language functions (``simnode.tile.lang``) call it:

- ``kernel`` / ``block``: the ``T.Kernel`` grid being traced and the current block, mapped
  to an AI core (mixed kernel: block b on core b mod cores) or to one AIV (vector kernel:
  block b on AIV b mod (cores x AIVs per core), core-major);
- ``alloc``: a buffer in a scope; the k-th allocation of a block on a unit is the same
  physical buffer in every block the unit runs (as on the hardware), and the sum over a
  unit's buffers is checked against the scope's capacity (facts 1.3) when it is made or
  grows;
- ``record(op)``: a tile op goes to the innermost pipelined loop, which reorders its
  stages, or straight to its core's emitter (``simnode.tile.sync``);
- ``access``: the generation a read sees and a write makes (module ``regions``): a write
  that does not read its buffer starts new data unless it fills a disjoint part of data
  the same loop iteration started (the halves of a dual copy).
"""

from __future__ import annotations

import contextvars
import linecache
import math
import re

from simnode.config.chip import ChipSpec
from simnode.instr import isa
from simnode.tile import dtypes
from simnode.tile.regions import SCOPE_UNIT, Buffer, Phys, Tensor
from simnode.tile.site import caller, fail
from simnode.tile.sync import CoreEmitter

#: the most instructions a program may record: 3.5x the GQA forward's 6.8 M (the largest
#: shipped program), ~2.7 GB at the ~110 B an instruction takes through the run (tile-gemm:
#: 1.27 M instructions, 208 MB peak), under the 4 GiB a run may use
MAX_RECORDED_OPS = 24_000_000

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("simnode_tile_builder", default=None)
_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")


def current() -> "Builder":
    b = _CURRENT.get()
    if b is None:
        fail("tile language called outside a program build (run it through a tile workload)")
    return b


class KernelState:
    __slots__ = ("blocks", "vector", "sync", "at")

    def __init__(self, blocks, vector, sync, at):
        self.blocks, self.vector, self.sync, self.at = blocks, vector, sync, at


class BlockState:
    __slots__ = ("index", "core", "aic", "aivs", "allocs")

    def __init__(self, index, core, aic, aivs):
        self.index, self.core, self.aic, self.aivs = index, core, aic, aivs
        self.allocs = {}             #: unit -> allocations made so far in this block


class Builder:
    """State of one program build on one chip (see the module docstring)."""

    def __init__(self, chip: ChipSpec, keep_meta: bool = False):
        self.recorded = 0                  #: instructions the program recorded so far
        self.chip = chip
        self.keep_meta = keep_meta
        self.aivs_per_core = chip.aiv_per_core
        self.units = ("aic",) + tuple(f"aiv{i}" for i in range(chip.aiv_per_core))
        self.pipes = tuple((u, p) for u in self.units for p in isa.pipes_of(u))
        self.pipe_index = {up: i for i, up in enumerate(self.pipes)}
        self.tensors: dict = {}
        self.kernel: KernelState | None = None
        self.block: BlockState | None = None
        self.cores: dict = {}                      #: core -> CoreEmitter
        self.phys: dict = {}                       #: (core, unit) -> [Phys] in allocation order
        self.loops: list = []                      #: pipelined loops being traced, innermost last
        self.sink = None                           #: where ops go (update_sink)
        self.scope: tuple = ()                     #: AIV units the vector statements run on
        self.vf = None                             #: open fused vector function (simnode.tile.vector)
        self.alloc_seq = 0
        self.alloc_clock = 0                       #: allocations made so far (pipelined loops compare)
        self.loop_seq = 0
        self.vec_explicit = False                  #: inside `for sid in T.Vector()`
        self.meta: dict = {}
        self.flops = 0.0
        self.gemms: list = []                      #: (m, n, k, dtype) of every MMAD, for the roofline
        self._token = None

    # -- context -------------------------------------------------------------------------
    def __enter__(self):
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc):
        _CURRENT.reset(self._token)
        return False

    # -- tensors and buffers -------------------------------------------------------------
    def tensor(self, name: str, shape, dtype: str) -> Tensor:
        dt = self.dtype(dtype)
        shape = self.shape(shape, f"tensor '{name}'")
        if not isinstance(name, str) or not name:
            fail(f"a tensor needs a name (got {name!r})")
        if name in self.tensors:
            fail(f"tensor '{name}' declared twice")
        t = self.tensors[name] = Tensor(name, shape, dt)
        return t

    def dtype(self, name) -> str:
        dt = dtypes.canonical(name)
        if dt is None:
            fail(f"unknown dtype {name!r} (known: {', '.join(dtypes.BITS)})")
        return dt

    @staticmethod
    def shape(shape, what: str) -> tuple:
        if isinstance(shape, int):
            shape = (shape,)
        try:
            shape = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            fail(f"{what}: shape {shape!r} is not a tuple of integers")
        if not shape or any(s <= 0 for s in shape):
            fail(f"{what}: shape {list(shape)} needs positive sizes")
        return shape

    def alloc(self, scope: str, shape, dtype: str, name=None, versions=None) -> Buffer:
        at = caller()
        b = self.need_block("allocate a buffer")
        if scope == "reg":
            return self._reg(shape, dtype, name, at)
        dt = self.dtype(dtype)
        shape = self.shape(shape, f"{scope.upper()} buffer")
        name = name or _assigned_name(at) or f"{scope}@{at[1]}"
        kind = SCOPE_UNIT[scope]
        if kind == "aic":
            if self.kernel.vector:
                fail(f"{scope.upper()} buffer '{name}' in a vector kernel: only the AIC has "
                     f"{scope.upper()} (use T.Kernel(n) for a mixed kernel)", at)
            units = (b.aic,)
        else:
            units = b.aivs
        size = dtypes.nbytes(math.prod(shape), dt)
        phys = {}
        self.alloc_clock += 1
        for u in units:
            ph = self._phys_for(b, u, name, scope, size, at)
            ph.clock = self.alloc_clock
            ph.label = f"{name} {list(shape)} {dt}"
            phys[u] = ph
        buf = Buffer(name, scope, shape, dt, phys, at)
        if versions is not None:
            self.set_versions(buf, versions, at)
        else:
            for ph in phys.values():
                self.check_capacity(b.core, ph.unit, ph.scope, at)
        return buf

    def _reg(self, shape, dtype, name, at) -> Buffer:
        """A vector-register tile: it lives inside vector functions (TileLang's ``S.alloc_var``
        registers), so it takes no UB, moves no UB bytes and needs no flags."""
        return Buffer(name or _assigned_name(at) or f"reg@{at[1]}", "reg",
                      self.shape(shape, "register tile"), self.dtype(dtype), {}, at)

    def _phys_for(self, b: BlockState, unit, name, scope, size, at, implicit=False) -> Phys:
        lst = self.phys.setdefault((b.core, unit), [])
        k = b.allocs.get(unit, 0)
        b.allocs[unit] = k + 1
        if k < len(lst):
            ph = lst[k]
            if ph.scope != scope:
                fail(f"buffer '{name}' ({scope}) is allocation {k} on {unit}, which an earlier "
                     f"block on this core made as '{ph.name}' ({ph.scope}): blocks on one core "
                     f"must allocate alike", at)
            ph.size_bytes = max(ph.size_bytes, size)
        else:
            ph = Phys(name, scope, unit, size, at, implicit)
            self.alloc_seq += 1
            lst.append(ph)
        return ph

    def hidden(self, key: str, scope: str, size: int, versions: int) -> Phys:
        """A buffer the lowering reserves (gemm staging), one per AIC, made on first use."""
        b = self.block
        lst = self.phys.setdefault((b.core, "aic"), [])
        for ph in lst:
            if ph.implicit and ph.name == key:
                return ph
        ph = Phys(key, scope, "aic", size, caller(), implicit=True)
        ph.label = key
        ph.versions = versions
        ph.explicit = True
        lst.append(ph)
        if scope in ("l0a", "l0b", "l0c", "l1", "ub"):
            self.check_capacity(b.core, "aic", scope, caller())
        return ph

    def set_versions(self, buf: Buffer, n, at) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            fail(f"versions of '{buf.name}' = {n!r}: expected an integer >= 1", at)
        for ph in buf.phys.values():
            ph.versions = max(ph.versions, n) if ph.explicit else n
            ph.explicit = True
            self.check_capacity(self.block.core, ph.unit, ph.scope, at)

    def check_capacity(self, core: int, unit: str, scope: str, at, why: str = "") -> None:
        if scope == "l0s":
            return                  # the MX scale buffer's size is not in facts 1.3: not checked
        cap = self.chip.buffers.capacity_bytes(scope)
        bufs = [ph for ph in self.phys.get((core, unit), ()) if ph.scope == scope]
        need = sum(ph.size_bytes * ph.versions for ph in bufs)
        if need > cap:
            parts = "; ".join(f"{ph.name} {ph.size_bytes} B x {ph.versions} (line {ph.at[1]})"
                              for ph in bufs)
            fail(f"{scope.upper()} of {unit} overflows{why}: demand {need} B ({parts}) exceeds "
                 f"the capacity {cap} B ({cap // 1024} KiB) of '{self.chip.name}'. Use smaller "
                 f"tiles or fewer versions", at)

    # -- blocks --------------------------------------------------------------------------
    def need_block(self, what: str) -> BlockState:
        if self.block is None:
            fail(f"cannot {what} outside a `for bx in T.Kernel(...)` loop")
        return self.block

    def begin_block(self, index: int) -> None:
        k = self.kernel
        cores = self.chip.num_ai_cores
        if k.vector:
            v = index % (cores * self.aivs_per_core)
            core, aiv = divmod(v, self.aivs_per_core)
            aivs = (f"aiv{aiv}",)
        else:
            core = index % cores
            aivs = self.units[1:]
        self.block = BlockState(index, core, "aic", aivs)
        self.scope = aivs
        if core not in self.cores:
            self.cores[core] = CoreEmitter(core, self, k.sync == "manual" or self.keep_meta)

    def end_block(self) -> None:
        if self.loops:
            fail("a pipelined loop is still open at the end of the block")
        if self.vf is not None:
            fail("a T.vf() vector function is still open at the end of the block")
        self.block = None
        self.scope = ()

    # -- recording -----------------------------------------------------------------------
    def token(self):
        """The loop iteration a write belongs to (innermost pipelined loop), or None."""
        return self.loops[-1].token if self.loops else None

    def read_acc(self, ph: Phys, lo: int, hi: int) -> tuple:
        return (ph, lo, hi, ph.gen)

    def write_acc(self, ph: Phys, lo: int, hi: int, accumulate: bool) -> tuple:
        if not accumulate:
            tok = self.token()
            if ph.gen and ph.gen_token == tok and all(hi <= a or lo >= b for a, b in ph.gen_ranges):
                ph.gen_ranges.append((lo, hi))
            else:
                ph.gen += 1
                ph.gen_token = tok
                ph.gen_ranges = [(lo, hi)]
        return (ph, lo, hi, ph.gen)

    def record(self, op) -> None:
        self.recorded += 1
        if self.recorded > MAX_RECORDED_OPS:
            fail(f"the program records more than {MAX_RECORDED_OPS:,} instructions: a run holds every "
                 f"one in memory (~110 B each, with its flags), and this many would pass the 4 GiB a "
                 f"run may use; make its shape smaller", op.at)
        if self.sink is None:
            self.cores[op.core].emit(op)
        else:
            self.sink.record(op)

    def update_sink(self) -> None:
        """Ops go to the innermost loop that still orders stages, else straight to the core."""
        self.sink = None
        for loop in reversed(self.loops):
            if not loop.direct:
                self.sink = self.loops[-1]
                break


def _assigned_name(at) -> str | None:
    """``x_ub`` from a line ``x_ub = T.alloc_ub(...)``: buffers are named after their variable."""
    m = _ASSIGN.match(linecache.getline(at[0], at[1]))
    return m.group(1) if m else None
