"""Completions: members served (commit), their events or callbacks (retire), then dropped.

A wake of the share serves every member finishing within the batch window
(``Completions.commit``): each is retired at its own exact time (a ``Transfer`` fires, a
``start_cb`` callback is queued for the end of the wake, a group member is told to its
``GroupBook``), but it stays in its class as a ghost, holding its share, until the window's
last finish; then ``release`` drops the ghosts from their classes and takes back the units
they were credited with after their finish (their share idled meanwhile). A group's members
in classes of their own (solo classes) are committed and released as arrays.

Releasing is representation-specific: ``release_lists`` for the list backend and
``release_arrays`` for the array backend (each backend's ``release``); both give the same
unit counters, series and freed rows.
"""

from __future__ import annotations

import heapq

import numpy as np

from simnode.engine.share.events import Group
from simnode.engine.share.loops import (EPS_REL, EPS_UNITS, INF, assign, gather, id_range,
                                        release_members, row_len)


class Completions:
    """The members of one share that are done (see the module docstring). ``share``: the
    share whose counters (``transfers_done``, ``last_served_ns``) and hooks (``on_served``)
    completions update and call."""

    def __init__(self, share):
        self.share = share
        #: done, still holding their share: (class, tag, served ns, weights) of a keyed
        #: class's member, or (None, class, tags, served, weights) arrays of its group members
        self.ghosts: list = []
        self.solo_ghosts: list = []         #: (classes, tags, served ns) arrays of solo classes
        self.hold_until: float | None = None   #: no solve before this (a commit's last finish)
        self.deferred: list = []            #: callbacks of finished ``start_cb`` transfers

    @property
    def holding(self) -> bool:
        """Whether committed members wait for their release."""
        return bool(self.ghosts or self.solo_ghosts)

    def retire(self, member, served_in_ns: float) -> None:
        """``member`` (a ``Transfer``, a ``start_cb`` (callback, argument) or a (group, index))
        was served ``served_in_ns`` from now: fire it, queue its callback or tell its group."""
        share = self.share
        share.transfers_done += 1
        served = share.env.now + served_in_ns
        if served > share.last_served_ns:
            share.last_served_ns = served
        if type(member) is tuple:
            obj, k = member
            if type(obj) is Group:                  # a group member in a shared class
                share.groups.note(obj.gid, [k], [served])
            else:
                self.deferred.append((member, served))
        else:
            member.finish(served_in_ns)
            if share.on_served is not None:
                share.on_served(member)

    def run_deferred(self) -> None:
        """Call the callbacks of finished ``start_cb`` transfers (they may start new ones,
        which join this wake's solve)."""
        while self.deferred:
            done, self.deferred = self.deferred, []
            for (fn, arg), served in done:
                fn(served, arg)

    def commit(self, table, now: float) -> float:
        """Serve every member of ``table``'s classes finishing within the window (their
        completions fire at their own times); returns the last finish (``now`` if none).
        Members stay in their classes, as ghosts, until then."""
        share = self.share
        window = share.batch_window_ns + now * 1e-15    # + float resolution of the clock
        solo, gids, multi = table.due(window)
        end = now
        exact = share.batch_window_ns == 0.0
        if len(solo):
            end = max(end, self._commit_solo(table, solo, gids, now, exact))
        heappop, deferred, ghosts = heapq.heappop, self.deferred, self.ghosts
        groups = share.groups
        for c in multi:
            heap, v, r = table.heaps[c], table.V[c], table.crate[c]
            lim = v + r * window + EPS_UNITS + EPS_REL * v
            bulk = table.bulk.get(c)
            if bulk is not None:
                nb = int(np.searchsorted(bulk[0], lim, side="right"))
                if nb and heap and heap[0][0] <= lim:
                    # members of both kinds due: let the heap order them all (rare)
                    for i in range(nb):
                        heapq.heappush(heap, (float(bulk[0][i]), int(bulk[1][i]),
                                              (groups.groups[bulk[2][i]], int(bulk[3][i])),
                                              tuple(bulk[4][i].tolist())))
                elif nb:
                    due = [a[:nb] for a in bulk]
                    end = max(end, self._commit_bulk(table, c, due, now, exact))
                if nb:
                    bulk = [a[nb:] for a in bulk]
                    table.bulk[c] = bulk if bulk[0].shape[0] else None
                    if table.bulk[c] is None:
                        del table.bulk[c]
            while heap and heap[0][0] <= lim:
                tag, _, member, mw = heappop(heap)
                # W = 0: whatever is left is below the clock's resolution: served now
                served_in = 0.0 if exact else (max(tag - v, 0.0) / r if r > 0 else 0.0)
                if type(member) is tuple and type(member[0]) is not Group:
                    # ``retire`` of a ``start_cb`` transfer written out (a chip's copies)
                    share.transfers_done += 1
                    served = now + served_in
                    if served > share.last_served_ns:
                        share.last_served_ns = served
                    deferred.append((member, served))
                else:
                    self.retire(member, served_in)
                ghosts.append((c, tag, now + served_in, mw))
                if now + served_in > end:
                    end = now + served_in
            top = heap[0][0] if heap else INF
            bulk = table.bulk.get(c)
            if bulk is not None and bulk[0][0] < top:
                top = float(bulk[0][0])
            table.top[c] = top
        groups.flush()
        return end

    def _commit_solo(self, table, solo, gids: np.ndarray, now: float, exact: bool) -> float:
        """Serve the due solo classes ``solo`` (of groups ``gids``) at once, as arrays: each
        member at its own time, groups told in ascending order, members in class order;
        returns their last finish."""
        ids = table.ids(solo)
        tags = table.column(table.top, solo)
        if exact:
            served = np.full(ids.shape, now)
        else:
            v, r = table.column(table.V, solo), table.column(table.crate, solo)
            served = now + np.where(r > 0, np.maximum(tags - v, 0.0) / np.where(r > 0, r, 1.0),
                                    0.0)
        # released before any keyed class's members (their order in the unit counters)
        self.solo_ghosts.append((ids, tags, served))
        table.assign(table.top, solo, INF)
        order = np.argsort(gids, kind="stable")
        self.share.groups.done(gids[order], table.column(table.sk, solo, np.int64)[order],
                               served[order])
        return float(served.max())

    def _commit_bulk(self, table, c: int, due: list, now: float, exact: bool) -> float:
        """Serve the due group members ``due`` (bulk arrays, in order) of keyed class c, as
        the heap loop of ``commit`` would one by one; returns their last finish."""
        tags, _, gids, ks, mw = due
        v, r = table.V[c], table.crate[c]
        if exact or not r > 0:
            served = np.full(tags.shape, now)
        else:
            served = now + np.maximum(tags - v, 0.0) / r
        share = self.share
        share.transfers_done += tags.shape[0]
        m = float(served.max())
        if m > share.last_served_ns:
            share.last_served_ns = m
        for g in np.unique(gids).tolist():
            sel = gids == g
            share.groups.note(g, ks[sel], served[sel])
        self.ghosts.append((None, c, tags, served, mw))
        return m

    def release(self, table) -> None:
        """Drop the ghosts from ``table``'s classes (see the module docstring)."""
        self.hold_until = None
        if not self.ghosts and not self.solo_ghosts:
            return
        ghosts, self.ghosts = self.ghosts, []
        solos, self.solo_ghosts = self.solo_ghosts, []
        table.release(ghosts, solos, self.share.env.now, self.share.series)


def release_arrays(table, ghosts: list, solos: list, now: float, series) -> None:
    """``Completions.release`` on the array table (``simnode.engine.share.arrays``)."""
    width = table.width
    # a solo class's member weights are its row: gathered into ``mw`` below, once
    parts = [(c, t, sv, None) for c, t, sv in solos]
    singles = []                                # a run of one-member ghosts

    def flush():
        if singles:
            mw = np.zeros((len(singles), width))
            for i, g in enumerate(singles):
                mw[i, :len(g[3])] = g[3]
            parts.append((np.array([g[0] for g in singles], dtype=np.int64),
                          np.array([g[1] for g in singles]),
                          np.array([g[2] for g in singles]), mw))
            singles.clear()
    for g in ghosts:
        if g[0] is None:                        # group members of a keyed class
            flush()
            _, c, t, sv, m = g
            mw = np.zeros((t.shape[0], width))
            mw[:, :m.shape[1]] = m
            parts.append((np.full(t.shape, c, dtype=np.int64), t, sv, mw))
        else:
            singles.append(g)
    flush()
    # (memory: a release can hold most classes of a large run, so no array of it is
    # built twice and the series' spans are scaled in place)
    cs = np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)
    tags = np.concatenate([p[1] for p in parts]).astype(float, copy=False)
    served = np.concatenate([p[2] for p in parts]).astype(float, copy=False)
    mw = np.empty((cs.shape[0], width))
    o = 0
    for p in parts:
        k = p[0].shape[0]
        if p[3] is None:
            np.take(table.w, p[0], axis=0, out=mw[o:o + k])
        else:
            mw[o:o + k] = p[3]
        o += k
    del parts
    over = np.zeros(cs.shape[0])
    table.kern.release_members(cs, tags, mw, table.V, table.links, table.w, table.bytes,
                               table.n, over)
    if series is not None and (over > 0).any():
        m = over > 0
        if m.all():
            rows, t0, units = table.links[cs], served, mw
            units *= over[:, None]
        else:
            rows, t0, units = table.links[cs[m]], served[m], mw[m]
            units *= over[m][:, None]
        del mw
        np.negative(units, out=units)           # = -(weight x over): units taken back
        series.add_spans(t0, now, rows, units)
        del rows, t0, units
    if (table.n[cs] > 0).any():                 # a keyed class changed its weights
        table.layout += 1
    freed = np.unique(cs[table.n[cs] == 0])
    table.note_covers(freed, -1)
    keyed = freed[table.sg[freed] < 0]          # solo classes have no key
    for c in keyed.tolist():
        table.bulk.pop(c, None)
    table.top[freed] = INF
    table.crate[freed] = 0.0
    table.sg[freed] = -1
    for c in keyed.tolist():
        if table.cls_key[c] is not None:
            del table.key2cls[table.cls_key[c]]
            table.cls_key[c] = None
    table.free.extend(freed[::-1].tolist())
    if table.act_arr is not None and freed.size:   # classes only left
        table.act_arr = np.delete(table.act_arr, np.searchsorted(table.act_arr, freed))


def release_lists(table, ghosts: list, solos: list, now: float, series) -> None:
    """``Completions.release`` on the list table (``simnode.engine.share.lists``)."""
    freed_solo, spans, solo_range = [], None, False
    if solos:                                       # solo classes of groups (``_commit_group``)
        freed_solo, spans, solo_range = _release_solos(table, solos, series)
    cs = [g[0] for g in ghosts]
    if None in cs:                                  # expand group members of keyed classes
        ghosts = [e for g in ghosts for e in (
            zip([g[1]] * g[2].shape[0], g[2].tolist(), g[3].tolist(),
                map(tuple, g[4].tolist())) if g[0] is None else (g,))]
        cs = [g[0] for g in ghosts]
    # (lists, not ``zip(*ghosts)``: that holds the argument tuple and four result tuples of
    # every ghost at once, ~0.2 GB more at EP2048's peak)
    tags = [g[1] for g in ghosts]
    mws = [g[3] for g in ghosts]
    over = [0.0] * len(cs)
    release_members(cs, tags, mws, table.V, table.links, table.w, table.bytes, table.n, over)
    if series is not None and (spans or any(o > 0.0 for o in over)):
        # one call for all (the solo members first, as they were served first)
        t0, links, ws, overs = spans or ([], [], [], [])
        for i, o in enumerate(over):
            if o > 0.0:
                t0.append(ghosts[i][2])
                links.append(table.links[cs[i]])
                ws.append(mws[i])
                overs.append(o)
        width = max(len(x) for x in links)
        rows = np.array([tuple(x) + (-1,) * (width - len(x)) for x in links], dtype=np.int64)
        w = np.array([tuple(x) + (0.0,) * (width - len(x)) for x in ws])
        series.add_spans(np.array(t0), now, rows, -(w * np.array(overs)[:, None]))
    n = table.n
    if any(n[c] > 0 for c in cs):                  # a class kept members: new weights
        table.layout += 1
    freed = {c for c in cs if n[c] == 0}
    for c in freed:
        table.bulk.pop(c, None)
        if table.cls_key[c] is not None:
            del table.key2cls[table.cls_key[c]]
            table.cls_key[c] = None
        table.top[c] = INF
        table.crate[c] = 0.0
        table.sg[c] = -1
    table.act.difference_update(freed)
    if freed_solo:                                  # no key, no bulk; tags already inf
        if solo_range:                              # (ascending: ``assign`` may slice)
            assign(table.crate, freed_solo, 0.0)
            assign(table.sg, freed_solo, -1)
        else:
            crate, sg = table.crate, table.sg
            for c in freed_solo:
                crate[c] = 0.0
                sg[c] = -1
        if len(freed_solo) == len(table.act):      # (distinct active classes: all of them)
            table.act.clear()
        else:
            table.act.difference_update(freed_solo)
        if freed:
            freed.update(freed_solo)
        else:                                       # distinct: sorted as their set would be
            freed = freed_solo
    table.free.extend(sorted(freed, reverse=True))
    table.act_arr = None


def _release_solos(table, solos: list, series):
    """Release the members of solo classes ``solos`` ((classes, tags,
    served_ns) arrays, in the order they were served), as ``release_members`` would one by one:
    a member's weights are its class's row (unchanged since it was served); only members
    credited past their finish change the unit counters (in member order); each class
    empties (its row is rebuilt when it is reused). Returns the classes, for the series
    the past-credited members' (served_ns, rows, weights, units over) lists (None if none
    or no series), and whether the classes are one ascending range."""
    ids = np.concatenate([p[0] for p in solos]) if len(solos) > 1 else solos[0][0]
    tags = np.concatenate([p[1] for p in solos]) if len(solos) > 1 else solos[0][1]
    served = np.concatenate([p[2] for p in solos]) if len(solos) > 1 else solos[0][2]
    cs = ids.tolist()
    n = table.n
    ov = np.array(gather(table.V, cs)) - tags
    past = np.flatnonzero(ov > 0.0).tolist()
    spans = None
    if past:
        over = ov.tolist()
        if table.lazy:
            table.materialize()
        links, w = table.links, table.w
        res_bytes = table.bytes
        for i in past:
            o = over[i]
            row, wr = links[cs[i]], w[cs[i]]
            for j in range(row_len(row)):
                res_bytes[row[j]] -= wr[j] * o
        if series is not None:
            spans = ([float(served[i]) for i in past], [links[cs[i]] for i in past],
                     [tuple(w[cs[i]]) for i in past], [over[i] for i in past])
    span = id_range(cs) is not None and bool((np.diff(ids) > 0).all())
    if span:                                # the classes are the range cs[0] .. cs[-1]
        n[cs[0]:cs[-1] + 1] = [x - 1 for x in n[cs[0]:cs[-1] + 1]]
    else:
        for c in cs:
            n[c] -= 1
    if table.lazy:                          # drop the blocks whose rows all left
        for b in table.lazy:
            b[3] -= int(np.count_nonzero((ids >= b[0]) & (ids < b[0] + b[1].shape[0])))
        table.lazy = [b for b in table.lazy if b[3] > 0]
    return cs, spans, span
