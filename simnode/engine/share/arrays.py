"""The array backend of the class table: numpy arrays, inner loops compiled by numba.

Made once from the list table (``ListTable.compiled_form``) when a run has solved enough
to repay numba; from then on the loops of ``simnode.engine.share.loops`` and the fill of
``simnode.engine.maxmin`` run compiled (``kern``, ``ArraySolver``), with the same results.
Class rows are -1 padded to the widest row (``widen``) and added in blocks (``grow``: by
what a batch needs, not by doubling). Covers (``simnode.engine.share.covers``) are watched
here: every class that comes or goes is noted, so solves may leave redundant resources out.
"""

from __future__ import annotations

import numpy as np

from simnode.engine.share.loops import INF
from simnode.engine.share.release import release_arrays
from simnode.engine.share.solve import ArraySolver
from simnode.engine.share.table import Table

#: dtype of the class rows' resource ids: every solve streams them (half the bytes of int64)
LINK = np.int32


class ArrayTable(Table):
    """Classes and resources in numpy arrays (see the module docstring and ``table``).
    ``lists``: the list table whose state it takes; ``covers``: the share's;
    ``kern``: the compiled loops by name; ``fn``: the compiled fill."""
    compiled = True

    def __init__(self, lists, covers, kern, fn):
        super().__init__()
        self.key2cls, self.bulk, self.seq, self.layout = lists.key2cls, lists.bulk, lists.seq, \
            lists.layout
        self.covers = covers
        self.kern = kern
        rows = len(lists.cls_key)
        width = self.width = lists.width
        links = np.full((rows, width), -1, dtype=LINK)
        w = np.zeros((rows, width))
        for c in range(rows):
            m = len(lists.links[c]) if lists.links[c] is not None else 0   # (None: a free row)
            if m:
                links[c, :m] = lists.links[c]
                w[c, :m] = lists.w[c]
        self.links, self.w = links, w
        self.ccap = np.asarray(lists.ccap, dtype=float)
        self.n = np.asarray(lists.n, dtype=np.int64)
        self.sw = np.full(rows, width, dtype=np.int64)
        self.sg = np.asarray(lists.sg, dtype=np.int64)
        self.sk = np.asarray(lists.sk, dtype=np.int64)
        self.unc = np.zeros(rows, dtype=np.bool_)     # per class: crosses a resource uncovered
        self.V = np.asarray(lists.V, dtype=float)
        self.crate = np.asarray(lists.crate, dtype=float)
        self.top = np.asarray(lists.top, dtype=float)
        self.cap = np.asarray(lists.cap, dtype=float)
        self.bytes = np.asarray(lists.bytes, dtype=float)
        self.busy = np.asarray(lists.busy, dtype=float)
        self.rate = np.asarray(lists.rate, dtype=float)
        self.fcfs = np.asarray(lists.fcfs, dtype=np.bool_)
        self.any_fcfs = lists.any_fcfs
        self.skip = np.asarray(lists.skip, dtype=np.bool_)
        # ghosts (members done, waiting for release) keep their weight rows as they are
        self.cls_key, self.heaps, self.free = lists.cls_key, lists.heaps, lists.free
        self.solver = ArraySolver(fn, lists.solver.scratch)
        self._due_scratch = None
        self.note_covers(np.flatnonzero(self.n > 0))

    @property
    def tracks_covers(self) -> bool:
        """Whether placing classes must tell the covers (some are declared)."""
        return bool(self.covers.cover_of)

    # -- rows and resources -----------------------------------------------------------------
    def add_resources(self, caps: list, fcfs: bool) -> None:
        self.any_fcfs = self.any_fcfs or fcfs
        self.cap = np.concatenate([self.cap, caps])
        self.fcfs = np.concatenate([self.fcfs, np.full(len(caps), fcfs)])
        self.skip = np.concatenate([self.skip, np.zeros(len(caps), dtype=np.bool_)])
        self.bytes = np.concatenate([self.bytes, np.zeros(len(caps))])
        self.busy = np.concatenate([self.busy, np.zeros(len(caps))])
        self.rate = np.concatenate([self.rate, np.zeros(len(caps))])

    def active(self):
        """The active classes in row order."""
        if self.act_arr is None:
            self.act_arr = np.flatnonzero(self.n > 0)
        return self.act_arr

    def act_add(self, c: int) -> None:
        """(The active classes are those with members: ``active``.)"""

    def new_row(self, resources: tuple) -> int:
        """A row for a new keyed class over ``resources`` (weights 0)."""
        width = len(resources)
        if width > self.width:
            self.widen(width)
        if not self.free:
            self.grow(max(64, len(self.cls_key) // 8))
        c = self.free.pop()
        self.links[c] = -1
        self.links[c, :width] = resources
        self.w[c] = 0.0
        return c

    def widen(self, width: int) -> None:
        """Room for classes crossing ``width`` resources."""
        pad = width - self.width
        self.links = np.hstack([self.links, np.full((self.links.shape[0], pad), -1, LINK)])
        self.w = np.hstack([self.w, np.zeros((self.w.shape[0], pad))])
        self.width = width

    def grow(self, grow: int) -> None:
        """Add ``grow`` free class rows (popped lowest first)."""
        start = self.links.shape[0]
        self.links = np.vstack([self.links, np.full((grow, self.width), -1, LINK)])
        self.w = np.vstack([self.w, np.zeros((grow, self.width))])
        self.ccap = np.concatenate([self.ccap, np.zeros(grow)])
        self.V = np.concatenate([self.V, np.zeros(grow)])
        self.crate = np.concatenate([self.crate, np.zeros(grow)])
        self.top = np.concatenate([self.top, np.full(grow, INF)])
        self.n = np.concatenate([self.n, np.zeros(grow, dtype=np.int64)])
        self.sw = np.concatenate([self.sw, np.zeros(grow, dtype=np.int64)])
        self.sg = np.concatenate([self.sg, np.full(grow, -1, dtype=np.int64)])
        self.sk = np.concatenate([self.sk, np.zeros(grow, dtype=np.int64)])
        self.unc = np.concatenate([self.unc, np.zeros(grow, dtype=np.bool_)])
        self.cls_key.extend([None] * grow)
        self.heaps.extend([None] * grow)            # a heap only for a keyed class
        # popped after the rows already free, lowest first: as the list table, which
        # reuses freed rows before it appends new ones (same rows, same results)
        self.free[:0] = range(start + grow - 1, start - 1, -1)
        self.act_arr = None

    def reserve(self, groups: list) -> None:
        """Room for the solo rows of ``groups`` at once, widest row first: widening copies
        every row, so it is done before the rows are added (at EP1024, ~1 M rows copied 4
        times)."""
        if not groups:
            return
        width = max(g[3].shape[1] for g in groups)
        if width > self.width:
            self.widen(width)
        need = sum(g[1].shape[0] for g in groups)
        if len(self.free) < need:
            self.grow(need - len(self.free) + len(self.cls_key) // 4 + 64)

    def place_solo(self, gid, ks, sizes, rows, weights, caps) -> None:
        """Solo classes for the members ``ks`` of group ``gid``, vectorized."""
        m = sizes.shape[0]
        width = rows.shape[1]
        if width > self.width:
            self.widen(width)
        if len(self.free) < m:
            self.grow(m - len(self.free) + len(self.cls_key) // 8 + 64)
        ids = np.array(self.free[:-m - 1:-1], dtype=np.int64)      # lowest rows first
        del self.free[-m:]
        self.links[ids] = -1
        self.links[ids, :width] = rows
        self.w[ids] = 0.0
        self.w[ids, :width] = weights
        self.sw[ids] = width
        self.ccap[ids] = caps
        self.V[ids] = 0.0
        self.crate[ids] = 0.0
        self.top[ids] = sizes
        self.n[ids] = 1
        self.sg[ids] = gid
        self.sk[ids] = ks
        self.note_covers(ids)

    def note_placed(self, fresh: list, grown: list) -> None:
        """Keyed classes made (``fresh``) or grown by ``place``: their covers."""
        self.note_covers(np.array(fresh, dtype=np.int64), 1)
        self.note_covers(np.unique(np.array(grown, dtype=np.int64)), 0)

    def note_covers(self, ids: np.ndarray, delta: int = 1) -> None:
        """Classes ``ids`` came (+1), changed (0) or left (-1): ``Covers.note``."""
        self.covers.note(self, ids, delta)

    # -- the loops ----------------------------------------------------------------------------
    def advance(self, dt: float) -> None:
        """Serve the active classes and count the resources' units and busy time for ``dt``."""
        kern = self.kern
        kern.advance(self.active(), self.V, self.crate, dt)
        kern.accrue(self.rate, self.bytes, self.busy, dt)

    def due(self, window: float):
        """The classes whose first member finishes within ``window``, as (solo classes,
        their groups' ids, keyed classes)."""
        act = self.active()
        out = self._due_buf(len(act))
        k = self.kern.due(act, self.top, self.V, self.crate, window, out)
        due = out[:k]
        sg = self.sg[due]
        return due[sg >= 0], sg[sg >= 0], due[sg < 0].tolist()

    def _due_buf(self, n: int) -> np.ndarray:
        """Room for ``n`` class ids (``due`` writes the first k it returns; the rest is never
        read): one buffer kept and grown, not a fresh [active classes] array per wake (a large
        run's ~1 M classes: 8 MB zeroed at every completion)."""
        buf = self._due_scratch
        if buf is None or buf.shape[0] < n:
            buf = self._due_scratch = np.empty(max(n, 1024), dtype=np.int64)
        return buf

    def next_finish(self) -> float:
        """Time from now to the first finish among the active classes (inf if none moves)."""
        return self.kern.next_finish(self.active(), self.top, self.V, self.crate)

    @staticmethod
    def ids(idx: np.ndarray) -> np.ndarray:
        return idx

    @staticmethod
    def column(arr: np.ndarray, idx: np.ndarray, dtype=float) -> np.ndarray:
        return arr[idx]

    @staticmethod
    def assign(arr: np.ndarray, idx: np.ndarray, value) -> None:
        arr[idx] = value

    release = release_arrays

    def solve(self) -> bool:
        return self.solver.solve(self)
