"""The class table: the share's classes and resources, and the one interface of its backends.

Transfers with the same (cap, resources) form a class and always get the same rate (they
rise together and stop at the same resource), so a class solves as one with the sum of its
members' weights: exact, and one class for, e.g., a rank's reductions of every peer's rows.
A class is a row of per-class columns, reused once it empties; it is either keyed (its
members, from ``start``/``start_cb``/``start_keyed`` or a group's members with a repeated
row, merge: a heap of (finish tag, seq, member, weights), and ``bulk`` arrays for a group's)
or solo (one member of a group, whose finish tag is ``top``). Within a class a virtual clock
``V`` (units served per member) orders completions.

Columns, per class row: ``links`` (resource ids, -1 padded), ``w`` (weight per resource,
the members' sum), ``sw`` (how many of them the solver visits), ``ccap`` (cap), ``n``
(members), ``V``, ``crate`` (rate per member), ``top`` (first finish tag), ``sg``/``sk``
(a solo class's group and member), ``cls_key`` (a keyed class's key); per resource ``cap``,
``fcfs``, ``bytes`` (units served), ``busy`` (ns), ``rate``, ``skip`` (left out of solves,
``simnode.engine.share.covers``). ``layout`` changes whenever a live class is added or
changes its row, weights or ``sw``, or a resource's skip flag changes: the solver's index is
reused while it stays.

Two backends hold them: ``ListTable`` (``lists``: Python lists, loops interpreted: the
fastest form for a chip's few classes and for short runs) and ``ArrayTable`` (``arrays``:
numpy arrays, loops compiled by numba). A share starts with a list table and swaps it for an
array table, once, when its solves have done enough work (``ListTable.compiled_form``);
results are identical either way. ``Table`` holds what both share: the keyed classes and
placing new members in them. A backend provides the rest of the interface:

- ``add_resources(caps, fcfs)``, ``active()`` (the active classes in row order), ``act_add``
  (a class becomes active), ``new_row(resources)``, ``reserve(groups)``, ``place_solo(...)``,
  ``note_placed(fresh, grown)``;
- ``advance(dt)``, ``due(window)``, ``next_finish()``; ``ids``, ``column``, ``assign`` (a
  set of classes as an id array, a column's values there, one value there);
- ``release(ghosts, solos, now, series)`` (``simnode.engine.share.release``) and ``solve()``
  (``simnode.engine.share.solve``: returns whether to compile now).
"""

from __future__ import annotations

import heapq

import numpy as np

from simnode.engine.share.loops import INF


class Table:
    """What both backends share (see the module docstring)."""
    compiled = False                #: whether the loops run compiled on arrays
    tracks_covers = False           #: whether placing classes must tell the covers

    def __init__(self):
        self.key2cls: dict = {}     #: a keyed class's key (cap, resources) -> its row
        self.bulk: dict = {}        #: keyed class -> [tags, seqs, group ids, member ids, weights]
        self.seq = 0                #: members placed so far (the heaps' tie-break)
        self.layout = 0
        self.act_arr = None         #: the active classes in row order (cached)

    def class_of(self, key) -> int:
        """The row of the class of ``key`` = (cap, resources), a new one if none."""
        c = self.key2cls.get(key)
        if c is not None:
            return c
        cap, resources = key
        c = self.new_row(resources)
        self.sw[c] = len(resources)         # a keyed class keeps its row order
        if self.heaps[c] is None:
            self.heaps[c] = []
        self.ccap[c] = cap
        self.V[c] = 0.0
        self.crate[c] = 0.0
        self.top[c] = INF
        self.cls_key[c] = key
        self.key2cls[key] = c
        return c

    def place(self, pending: list, groups: list) -> None:
        """Put the pending starts into their classes (their finish tags on the clocks):
        ``pending`` (key, weights, size, member) of single starts and, key None, a group's
        members with repeated rows (``place_bulk``); ``groups``: the solo classes of groups
        (``place_solo``)."""
        if pending or groups:
            self.layout += 1
        fresh, grown = [], []                       # keyed classes new / with a new member
        # (the loop runs once per start: a chip's ~100 k copies, so the rows it reads are
        # looked up once, and again after ``class_of`` or ``place_bulk``, which may replace
        # them with larger arrays once compiled)
        known, heappush, act_add = self.key2cls.get, heapq.heappush, self.act_add
        V, heaps, n, wts, top = self.V, self.heaps, self.n, self.w, self.top
        track = self.tracks_covers                  # (``fresh`` and ``grown`` read only then)
        seq = self.seq
        for key, weights, size, member in pending:
            if key is None:                         # a group's members (``start_group``)
                self.seq = seq
                self.place_bulk(*weights, fresh, grown)
                seq = self.seq
                V, heaps, n, wts, top = self.V, self.heaps, self.n, self.w, self.top
                continue
            c = known(key)
            if c is None:
                c = self.class_of(key)
                V, heaps, n, wts, top = self.V, self.heaps, self.n, self.w, self.top
            seq += 1
            tag = V[c] + size
            heappush(heaps[c], (tag, seq, member, weights))
            if n[c] == 0:
                act_add(c)
            n[c] += 1
            w = wts[c]                              # the class solves with its members' sum
            for j in range(len(weights)):
                w[j] += weights[j]
            if tag < top[c]:
                top[c] = tag
            if track:
                (fresh if n[c] == 1 else grown).append(c)
        self.seq = seq
        if track and pending:
            self.note_placed(fresh, grown)
        self.reserve(groups)
        for gid, ks, sizes, rows, weights, caps in groups:
            self.place_solo(gid, ks, sizes, rows, weights, caps)
        self.act_arr = None

    def place_bulk(self, group, gid, ks, sizes, key, weights, lengths, fresh, grown) -> None:
        """Members ``ks`` of group ``gid`` into the keyed classes of their rows (``key``: row,
        then cap), as ``place`` would one by one: classes made in the order their keys first
        appear, sequence numbers in member order, each class's weights summed member after
        member; the members are kept as arrays sorted by (finish tag, seq)."""
        m = ks.shape[0]
        seq = self.seq + 1 + np.arange(m)
        self.seq += m
        if (key == key[:1]).all():
            # one key (a rank's reductions of every peer's rows): np.unique over rows, which
            # sorts them as structured records, is the cost of this call at EP1024
            first, inv = np.zeros(1, dtype=np.int64), np.zeros(m, dtype=np.int64)
        else:
            _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
        inv = inv.ravel()
        caps = key[:, -1].view(float)
        for u in np.argsort(first, kind="stable").tolist():
            sel = np.flatnonzero(inv == u)
            k0 = int(sel[0])
            width = int(lengths[k0])
            c = self.class_of((float(caps[k0]), tuple(key[k0, :width].tolist())))
            was = self.n[c]
            tags = self.V[c] + sizes[sel]
            if was == 0:
                self.act_add(c)
            self.n[c] += sel.shape[0]
            w = self.w[c]                           # the class solves with its members' sum
            mw = weights[sel, :width]
            total = np.add.accumulate(np.vstack([np.asarray(w[:width], dtype=float), mw]),
                                      axis=0)[-1]
            for j in range(width):
                w[j] = float(total[j])
            t = float(tags.min())
            if t < self.top[c]:
                self.top[c] = t
            if was == 0:
                fresh.append(c)
            if was > 0 or sel.shape[0] > 1:
                grown.append(c)
            new = [tags, seq[sel], np.full(sel.shape, gid, dtype=np.int64), ks[sel], mw]
            old = self.bulk.get(c)
            if old is not None:
                new = [np.concatenate([a, b]) for a, b in zip(old, new)]
            order = np.lexsort((new[1], new[0]))
            self.bulk[c] = [a[order] for a in new]
