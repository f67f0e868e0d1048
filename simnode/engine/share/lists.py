"""The list backend of the class table: Python lists, inner loops interpreted.

The form every share starts in: the fastest for a chip's few classes (a handful of pipes'
copies against its L2 and HBM, where each wake's bookkeeping is plain Python on lists rather
than on numpy scalars) and for short runs. ``compiled_form`` makes the array backend from it
(``simnode.engine.share.arrays``), once the share has solved enough to repay numba.

A group's solo rows are appended as the group's arrays (``lazy``) and made lists only when a
reader needs lists (``materialize``): a large group's rows are read only by the vector
solve, which wants arrays (``lazy_block``). Wakes with at least ``VECTOR_LOOPS`` active
classes advance them and find the next and the due finishes in numpy (``loops.advance_vec``
...: the same operations element by element, so the same results).
"""

from __future__ import annotations

import types

import numpy as np

from simnode.engine.share import loops
from simnode.engine.share.loops import INF, assign, gather
from simnode.engine.share.release import release_lists
from simnode.engine.share.solve import ListSolver
from simnode.engine.share.table import Table

#: interpreted wakes with at least this many active classes run the numpy loops
VECTOR_LOOPS = 2048
#: a commit of at most this many due classes tests them for group members in plain Python
#: (a chip's few keyed classes: no arrays per wake)
SMALL_DUE = 32


class ListTable(Table):
    """Classes and resources in Python lists (see the module docstring and ``table``)."""

    def __init__(self):
        super().__init__()
        # resources
        self.cap: list = []
        self.fcfs: list = []
        self.any_fcfs = False
        self.bytes: list = []
        self.busy: list = []
        self.rate: list = []
        self.skip: list = []
        # class rows (``table``); a solo row held in ``lazy`` has None in ``links`` and ``w``
        self.links: list = []
        self.w: list = []
        self.sw: list = []
        self.ccap: list = []
        self.n: list = []
        self.V: list = []
        self.crate: list = []
        self.top: list = []
        self.sg: list = []
        self.sk: list = []
        self.cls_key: list = []
        self.heaps: list = []               # a keyed class's heap, None for a solo class
        self.free: list = []                # rows free for reuse (popped from the end)
        self.width = 1                      # the most resources of a row
        #: solo rows still held as a group's arrays: [first row, rows, weights, how many of
        #: them are live]; a block whose rows all left is dropped
        self.lazy: list = []
        self.act: set = set()               # the active classes (n > 0)
        self.act_add = self.act.add
        self.solver = ListSolver()

    # -- rows and resources -----------------------------------------------------------------
    def add_resources(self, caps: list, fcfs: bool) -> None:
        self.any_fcfs = self.any_fcfs or fcfs
        self.cap.extend(caps)
        self.fcfs.extend([fcfs] * len(caps))
        self.skip.extend([False] * len(caps))
        for lst in (self.bytes, self.busy, self.rate):
            lst.extend([0.0] * len(caps))

    def active(self):
        """The active classes in row order (both backends visit them in the same order, so
        their floating-point sums agree to the bit)."""
        if self.act_arr is None:
            self.act_arr = sorted(self.act)
        return self.act_arr

    def new_row(self, resources: tuple) -> int:
        """A row for a new keyed class over ``resources`` (weights 0)."""
        width = len(resources)
        if width > self.width:
            self.width = width
        if self.free:
            if self.lazy:
                self.materialize()          # (before a reused row is written)
            c = self.free.pop()
            self.links[c], self.w[c] = resources, [0.0] * width
            return c
        c = len(self.cls_key)
        self.links.append(resources)
        self.w.append([0.0] * width)
        self.sw.append(width)
        for lst, v in ((self.ccap, 0.0), (self.n, 0), (self.V, 0.0), (self.crate, 0.0),
                       (self.top, INF), (self.cls_key, None), (self.sg, -1), (self.sk, 0)):
            lst.append(v)
        self.heaps.append(None)
        return c

    def reserve(self, groups: list) -> None:
        """(Rows are appended as needed.)"""

    def place_solo(self, gid, ks, sizes, rows, weights, caps) -> None:
        """Solo classes for the members ``ks`` of group ``gid``: rows stay -1 padded (the
        loops stop at the first -1); freed rows are reused first, new ones appended in bulk."""
        m = sizes.shape[0]
        width = rows.shape[1]
        if width > self.width:
            self.width = width
        reuse = min(len(self.free), m)
        if reuse:
            self.materialize()                  # (before reused rows are written)
            link_rows = list(map(tuple, rows[:reuse].tolist()))
            w_rows = weights[:reuse].tolist()
        ids = [self.free.pop() for _ in range(reuse)]
        for i, c in enumerate(ids):
            self.links[c], self.w[c], self.sw[c] = link_rows[i], w_rows[i], width
            self.ccap[c], self.V[c], self.crate[c] = float(caps[i]), 0.0, 0.0
            self.top[c], self.n[c] = float(sizes[i]), 1     # a new class: V = 0
            self.sg[c], self.sk[c] = gid, int(ks[i])
        first = len(self.cls_key)
        rest = m - reuse
        if rest:
            # the new rows stay arrays until a reader needs lists (``materialize``)
            self.links.extend([None] * rest)
            self.w.extend([None] * rest)
            self.lazy.append([first, rows[reuse:], weights[reuse:], rest])  # + rows live
            self.sw.extend([width] * rest)
            self.ccap.extend(caps[reuse:].tolist())
            self.top.extend(sizes[reuse:].tolist())
            self.sk.extend(ks[reuse:].tolist())
            for lst, v in ((self.n, 1), (self.V, 0.0), (self.crate, 0.0), (self.cls_key, None),
                           (self.sg, gid)):
                lst.extend([v] * rest)
            self.heaps.extend([None] * rest)   # solo: no heap (its tag is top)
        self.act.update(ids)
        self.act.update(range(first, first + rest))

    def materialize(self) -> None:
        """Make the rows still held as group arrays (``lazy``) lists, as ``place_solo`` would
        have made them at once (the same values)."""
        for first, rows, w, _ in self.lazy:
            stop = first + rows.shape[0]
            self.links[first:stop] = map(tuple, rows.tolist())
            self.w[first:stop] = w.tolist()
        self.lazy = []

    def lazy_block(self, act):
        """The (rows, weights) arrays of the active classes ``act`` (sorted) if they are
        exactly the rows of one lazy block, else None."""
        if len(self.lazy) != 1:
            return None
        first, rows, w, _ = self.lazy[0]
        m = rows.shape[0]
        if len(act) != m or act[0] != first or act[-1] != first + m - 1:
            return None                         # (sorted, distinct: then act is that range)
        return rows, w

    # -- the loops ----------------------------------------------------------------------------
    def advance(self, dt: float) -> None:
        """Serve the active classes and count the resources' units and busy time for ``dt``."""
        act = self.active()
        (loops.advance_vec if len(act) >= VECTOR_LOOPS else loops.advance)(
            act, self.V, self.crate, dt)
        loops.accrue(self.rate, self.bytes, self.busy, dt)

    def due(self, window: float):
        """The classes whose first member finishes within ``window``, as (solo classes,
        their groups' ids (array), keyed classes)."""
        act = self.active()
        out = [0] * len(act)
        k = (loops.due_vec if len(act) >= VECTOR_LOOPS else loops.due)(
            act, self.top, self.V, self.crate, window, out)
        sg = self.sg
        due = out[:k]                       # (ascending: ``due`` visits ``act`` in order)
        if k <= SMALL_DUE and (k == 0 or max(map(sg.__getitem__, due)) < 0):
            return (), None, due            # keyed classes only (a chip's few): no arrays
        gdue = np.array(gather(sg, due), dtype=np.int64)
        if (gdue >= 0).all():
            return due, gdue, []
        return [c for c in due if sg[c] >= 0], gdue[gdue >= 0], [c for c in due if sg[c] < 0]

    def next_finish(self) -> float:
        """Time from now to the first finish among the active classes (inf if none moves)."""
        act = self.active()
        return (loops.next_finish_vec if len(act) >= VECTOR_LOOPS else loops.next_finish)(
            act, self.top, self.V, self.crate)

    @staticmethod
    def ids(idx: list) -> np.ndarray:
        return np.array(idx, dtype=np.int64)

    @staticmethod
    def column(lst: list, idx: list, dtype=float) -> np.ndarray:
        return np.array(gather(lst, idx), dtype=dtype)

    @staticmethod
    def assign(lst: list, idx: list, value) -> None:
        assign(lst, idx, value)

    release = release_lists

    def solve(self) -> bool:
        return self.solver.solve(self)

    # -- the switch -----------------------------------------------------------------------------
    def compiled_form(self, covers):
        """The array table with these classes, resources and state, its loops compiled (the
        same results from here on); None without numba (this table then stays, and stops
        counting towards the switch). ``covers``: the share's (the array table watches them)."""
        from simnode.engine import maxmin
        from simnode.engine.jit import compile_functions
        from simnode.engine.share.arrays import ArrayTable
        fn = maxmin.compiled()
        self.materialize()
        kern = compile_functions(loops.KERNELS, loops.KERNEL_CONSTANTS)
        if fn is None or kern is None:
            self.solver.work = -INF             # numba missing: stay interpreted
            return None
        return ArrayTable(self, covers, types.SimpleNamespace(**kern), fn)
