"""The solve dispatcher: which max-min solver sets a share's rates, per backend.

A share's backend holds a solver (``simnode.engine.share.lists`` / ``arrays``):

- ``ListSolver`` (interpreted, the start of every run): a small solve (a chip's few classes)
  through the memo (``simnode.engine.share.memo``) and ``maxmin.small_rates``; a large one
  (at least ``VECTOR_SOLVE`` incidences) by ``maxmin.vector_rates`` (numpy; equal to the
  sequential fill to 1e-12 relative, not to the bit); others by the progressive fill on
  lists (``maxmin.rates``). It counts the incidences it solves: past ``COMPILE_AFTER``, the
  share moves to arrays and compiled loops.
- ``ArraySolver`` (compiled): the progressive fill compiled by numba, on arrays.

Both keep the fill's scratch (``maxmin.Scratch``) between solves: it holds the fill's index,
reused while the table's ``layout`` stays.
"""

from __future__ import annotations

import numpy as np

from simnode.engine import maxmin
from simnode.engine.share.memo import SMALL_SOLVE, Memo

#: incidences (class x resource) solved interpreted before a share compiles its loops: about
#: a second of interpreted solving (~2.5 us each), against ~0.8 s to import numba and load
#: its cached code
COMPILE_AFTER = 400_000
#: only solves of at least this many incidences count towards ``COMPILE_AFTER``: a chip's
#: few classes (a handful of pipes' copies against its L2 and HBM) solve faster interpreted,
#: where each wake's bookkeeping is plain Python on lists rather than on numpy scalars
COMPILE_MIN = 64
#: interpreted solves of at least this many incidences run ``maxmin.vector_rates`` (numpy,
#: resources at one fill level frozen together: equal to the sequential fill up to rounding)
VECTOR_SOLVE = 20_000


def _check(err: int) -> None:
    if err:
        raise ValueError("unbounded rates: a transfer crosses no limited resource and has no "
                         "cap (a first-come-first-served resource does not bound its users by "
                         "itself)")


def _zero(rate) -> None:
    for r in range(len(rate)):
        rate[r] = 0.0


class _Solver:
    """The progressive fill (``fn``: ``maxmin.rates`` or its compiled form) with its scratch
    kept between solves; ``arrays``: the table's columns are numpy arrays."""

    def __init__(self, fn, arrays: bool, scratch: maxmin.Scratch | None = None):
        self.fn = fn
        self.arrays = arrays
        self.scratch = scratch
        self._one = None

    def fill(self, table, act) -> int:
        """Rates of the active classes ``act`` by the fill; 0, or 1 if a class is unbounded."""
        err, self.scratch = maxmin.solve(
            self.fn, (act, table.links, table.w, table.sw, self.ones(len(table.n)), table.ccap,
                      table.cap, table.fcfs, table.any_fcfs, table.skip, table.crate,
                      table.rate, table.layout),
            self._scratch_for(len(table.cap), len(table.n)), self.arrays)
        return err

    def ones(self, rows: int):
        """The fill's multiplicity per class: 1 (a class's weights sum its members')."""
        if self._one is None or len(self._one) < rows:
            self._one = np.ones(rows) if self.arrays else [1.0] * rows
        return self._one

    def _scratch_for(self, nres: int, rows: int) -> maxmin.Scratch:
        """The scratch, sized for ``nres`` resources and ``rows`` classes (``maxmin.solve``
        grows its per-incidence part as needed)."""
        s = self.scratch
        if s is None or not s.fits(nres, rows, self.arrays):
            slots, blocks = s.sizes()[2:] if s is not None else (0, 0)
            # the old buffers go before the new ones are made (a large run's are ~100 B per
            # class: both at once would be the run's peak)
            s = self.scratch = None
            s = maxmin.scratch(nres, rows, slots, blocks, self.arrays)
        # handed over: ``maxmin.solve`` returns it, or larger buffers that replace it
        self.scratch = None
        return s


class ListSolver(_Solver):
    """The interpreted dispatcher (see the module docstring)."""

    def __init__(self):
        super().__init__(maxmin.rates, False)
        self.memo = Memo()
        self.work = 0                       #: incidences solved so far (those counted)

    def solve(self, table) -> bool:
        """Set the rates of the list table ``table``'s active classes; returns whether the
        share should now compile (``COMPILE_AFTER``)."""
        if self.memo.solve(table, self.dispatch):
            return False
        return self.dispatch(table)

    def dispatch(self, table) -> bool:
        """``solve`` without the memo."""
        act = table.active()
        block = None
        if table.lazy and len(act):
            if len(act) * table.width >= VECTOR_SOLVE and (table.any_fcfs
                                                           or len(act) > SMALL_SOLVE):
                block = table.lazy_block(act)   # the vector solve reads them as arrays
            if block is None:
                table.materialize()
        if len(act) == 0:
            _zero(table.rate)
            return False
        if not table.any_fcfs and len(act) <= SMALL_SOLVE:
            _check(maxmin.small_rates(act, table.links, table.w, table.ccap, table.cap,
                                      table.crate, table.rate))
            return False
        inc = len(act) * table.width
        if inc >= VECTOR_SOLVE:
            # one large solve, interpreted: numpy (same rates up to rounding, maxmin)
            _check(maxmin.vector_rates(act, table.links, table.w, table.sw,
                                       self.ones(len(table.n)), table.ccap, table.cap,
                                       table.fcfs, table.any_fcfs, table.skip, table.crate,
                                       table.rate, block))
            self.work += inc
        else:
            _check(self.fill(table, act))
            if inc >= COMPILE_MIN:              # small solves stay interpreted
                self.work += inc
        return self.work > COMPILE_AFTER


class ArraySolver(_Solver):
    """The compiled fill on the array table. ``scratch``: the list solver's, whose sizes it
    keeps."""

    def __init__(self, fn, scratch: maxmin.Scratch | None = None):
        super().__init__(fn, True, scratch)

    def solve(self, table) -> bool:
        """Set the rates of the array table ``table``'s active classes (returns False)."""
        act = table.active()
        if len(act) == 0:
            _zero(table.rate)
        else:
            _check(self.fill(table, act))
        return False
