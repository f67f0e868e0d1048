"""Covers: resources whose constraint is redundant, left out of the solves (speed only).

``Share.cover(X, Ys)`` declares that every transfer crossing resource X also crosses at least
one of the Ys (max-min resources without covers of their own). Once the share runs on arrays
(``simnode.engine.share.arrays``), ``Covers.note`` watches each class that comes or goes:
when the sum over Y of capacity(Y) x the largest (weight on X / weight on Y) seen is within
X's capacity, X can never fill before its Ys, so its constraint is redundant and the solves
leave it out (``skip``; exact, its load is still counted). A class on X that crosses no Y keeps
X in for good. Results are the same with or without covers.
"""

from __future__ import annotations

import numpy as np


class Covers:
    """The declared covers of one share and, once it runs on arrays, their state."""

    def __init__(self):
        self.cover_of: dict = {}            #: X -> [Y, ...]
        self.covering: set = set()          #: every Y of some cover
        self._arrays = None                 # (``_state``)
        self._bound = None                  # per covered resource: sum over Y of cap(Y) x ratio

    def declare(self, resource: int, by, names: list, fcfs) -> None:
        """``resource`` is covered by the resources ``by`` (see the module docstring);
        ``names`` and ``fcfs``: per resource, for the checks."""
        by = [int(y) for y in by]
        for y in by:
            if y in self.cover_of or fcfs[y]:
                raise ValueError(f"resource {names[y]!r} cannot cover others: it has a cover "
                                 f"of its own or serves first come, first served")
        if resource in self.cover_of or resource in by or resource in self.covering:
            raise ValueError(f"resource {names[resource]!r}: cover declared twice, by "
                             f"itself, or for a resource that covers others")
        self.cover_of[resource] = by
        self.covering.update(by)
        self._arrays = None
        self._bound = None

    def _state(self, nres: int):
        """(sorted pair keys X * nres + Y, their ratios, per-resource has-cover and covers-
        another flags, per-resource counts of live classes that cross it but none of its
        covers)."""
        if self._arrays is None:
            keys = sorted(x * nres + y for x, ys in self.cover_of.items() for y in ys)
            has = np.zeros(nres, dtype=np.bool_)
            has[list(self.cover_of)] = True
            covering = np.zeros(nres, dtype=np.bool_)
            covering[list(self.covering)] = True
            self._arrays = (np.array(keys, dtype=np.int64), np.zeros(len(keys)), has,
                            covering, np.zeros(nres, dtype=np.int64))
        return self._arrays

    def note(self, table, ids: np.ndarray, delta: int = 1) -> None:
        """Take the classes ``ids`` of the array table ``table`` into the cover state
        (``delta`` +1: new, their ratios and uncovered resources; 0: a keyed class's weights
        changed; -1: they left), decide which resources solves may leave out
        (``table.skip``), and lay solo classes' rows out for the solver (``relayout``; a
        keyed class keeps its order, its members' weights follow)."""
        if not self.cover_of:
            return
        nres = len(table.cap)
        keys, ratio, has, covering, uncov = self._state(nres)
        kern = table.kern
        grew = kern.note_covers(ids, table.links, table.w, keys, nres, has, covering, ratio,
                                uncov, table.unc, delta)
        if grew or self._bound is None:     # the ratios only grow
            x, y = keys // nres, keys % nres
            self._bound = np.bincount(x, weights=table.cap[y] * ratio, minlength=nres)
        skip = has & (uncov == 0) & (self._bound <= table.cap)
        if delta > 0:
            relay = ids
        else:
            relay = ids[:0]
        if (skip != table.skip).any():      # the rows of every live class follow suit
            table.layout += 1
            relay = np.union1d(relay, np.flatnonzero(table.n > 0))
            if (table.skip & ~skip).any():
                table.sw[relay] = table.width   # a resource to solve again: visit whole rows
        table.skip = skip
        solo = relay[table.sg[relay] >= 0]
        if solo.size:
            kern.relayout(solo, table.links, table.w, table.skip, table.sw)
