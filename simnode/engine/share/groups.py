"""The share's running groups (``Share.start_group``) and the preparation of their rows.

``GroupBook`` keeps, per running group, its first row in the member arrays, its members not
served yet, its latest arrival and whether it watches its members (``Group.on_served``); per
member, its served time (nan until then) and latency. Completions of many groups are handled
at once, as arrays (``done``); a group whose last member is served takes its own copy and
fires at its last arrival. Members served within a wake from shared classes are gathered
(``note``) and told in one call at its end (``flush``).

``pack_rows`` moves each member's used resources to the front of its row; ``has_repeats``
tells whether two members share a row and cap (they then share a class).
"""

from __future__ import annotations

import numpy as np

from simnode.engine import mix


def _odd_multipliers(n: int, seed: int = 17) -> np.ndarray:
    """``n`` odd 63-bit multipliers from splitmix64 (any fixed odd numbers would do: the
    hash only filters, ``has_repeats`` checks meeting hashes exactly; numpy.random is not
    imported for them, ~25 ms of a short run's start)."""
    return np.array([(z >> 2) * 2 + 1 for z in mix.sequence(seed, n)], dtype=np.int64)


#: the row hash's multipliers (``has_repeats``)
HASH = _odd_multipliers(64)


def has_repeats(key: np.ndarray) -> bool:
    """Whether two rows of ``key`` (int64) are equal. Rows whose hashes all differ differ;
    only hashes that meet are checked exactly."""
    n, width = key.shape
    if n < 2:
        return False
    if width <= HASH.shape[0]:
        h = (key * HASH[:width]).sum(axis=1)                # wraps around: a hash
        order = np.argsort(h)
        hs = h[order]
        meet = np.flatnonzero(hs[1:] == hs[:-1])
        if not meet.size:
            return False
        if (key[order[meet]] == key[order[meet + 1]]).all(axis=1).any():
            return True                                     # two rows are equal
        # (only rows that differ met: rare; decided exactly below)
    return np.unique(key, axis=0).shape[0] < n


def pack_rows(rows, weights, n: int):
    """(rows, weights, used) of ``n`` members: each row's resources with a positive weight
    (a resource of weight 0 or id -1 is not used) moved to its front in their order, -1 /
    0.0 padded to the widest; ``used[k]``: how many member k uses."""
    rows = np.asarray(rows, dtype=np.int64).reshape(n, -1)
    weights = np.asarray(weights, dtype=float).reshape(n, -1)
    valid = (rows >= 0) & (weights > 0)
    used = valid.sum(axis=1)                # resources each member uses
    width = max(int(used.max()), 1)
    if (valid[:, 1:] <= valid[:, :-1]).all():
        # every row's used resources lead already (the usual case)
        return np.where(valid, rows, -1)[:, :width], np.where(valid, weights, 0.0)[:, :width], used
    # the used ones moved to the front of their rows, in their order: the k-th used one of
    # row i to flat position i * width + k (one masked scatter per array)
    at = (np.cumsum(valid, axis=1) - 1 + (np.arange(n) * width)[:, None])[valid]
    packed = np.full((n, width), -1, dtype=np.int64)
    packed.ravel()[at] = rows[valid]
    w = np.zeros((n, width))
    w.ravel()[at] = weights[valid]
    return packed, w, used


class GroupBook:
    """The running groups of one share (see the module docstring). ``share``: the share whose
    counters (``transfers_done``, ``last_served_ns``) completions update."""

    def __init__(self, share):
        self.share = share
        self.groups: list = []              #: Group per group index (None once done)
        # per group index: its first row in the member arrays, members not served yet,
        # latest arrival, whether it has an on_served callback (``Group`` reads them)
        self.off = np.zeros(0, dtype=np.int64)
        self.left = np.zeros(0, dtype=np.int64)
        self.last = np.zeros(0)
        self.watched = np.zeros(0, dtype=np.bool_)
        self.any_watched = False
        self.live = 0                       #: groups running
        # per member of a running group: served time (nan until then) and latency
        self.m_served = np.zeros(0)
        self.m_lat = np.zeros(0)
        self.m_used = 0
        #: members of shared classes served in this wake: group index -> (group, [member
        #: index arrays], [served arrays]), told at its end (``flush``)
        self.batch: dict = {}

    def add(self, group) -> int:
        """Give ``group`` its index and its members' rows in the member arrays."""
        n = group.latency_ns.shape[0]
        gid = len(self.groups)
        self.groups.append(group)
        if gid >= self.off.shape[0]:
            grow = max(64, gid // 2)
            self.off = np.concatenate([self.off, np.zeros(grow, dtype=np.int64)])
            self.left = np.concatenate([self.left, np.zeros(grow, dtype=np.int64)])
            self.last = np.concatenate([self.last, np.zeros(grow)])
            self.watched = np.concatenate([self.watched, np.zeros(grow, dtype=np.bool_)])
        off = self.m_used
        if off + n > self.m_served.shape[0]:
            grow = max(off + n - self.m_served.shape[0], self.m_served.shape[0] // 2, 1024)
            self.m_served = np.concatenate([self.m_served, np.zeros(grow)])
            self.m_lat = np.concatenate([self.m_lat, np.zeros(grow)])
        self.m_served[off:off + n] = np.nan
        self.m_lat[off:off + n] = group.latency_ns
        self.m_used = off + n
        self.off[gid] = off
        self.left[gid] = n
        self.last[gid] = self.share.env.now
        self.watched[gid] = False
        self.live += 1
        group.gid = gid
        group.book = self
        return gid

    def watch(self, gid: int, on: bool) -> None:
        """Group ``gid`` has (``on``) or no longer has an ``on_served`` callback."""
        self.watched[gid] = on
        self.any_watched = True

    def done(self, gids: np.ndarray, ks: np.ndarray, served: np.ndarray) -> None:
        """Members ``ks[i]`` of groups ``gids[i]`` were served at ``served[i]`` (arrays, groups
        in ascending order); each group's callback runs, and a group whose last member this
        was fires at its last arrival, in the order of the groups."""
        n = gids.shape[0]
        if n == 0:
            return
        share = self.share
        share.transfers_done += n
        m = float(served.max())
        if m > share.last_served_ns:
            share.last_served_ns = m
        idx = self.off[gids] + ks
        self.m_served[idx] = served
        arrive = served + self.m_lat[idx]
        starts = np.flatnonzero(np.r_[True, gids[1:] != gids[:-1]])
        ug = gids[starts]
        self.last[ug] = np.maximum(self.last[ug], np.maximum.reduceat(arrive, starts))
        self.left[ug] -= np.diff(np.r_[starts, n])
        ends = np.r_[starts[1:], n]
        for i in np.flatnonzero((self.left[ug] == 0) | self.watched[ug]
                                if self.any_watched else self.left[ug] == 0).tolist():
            g = int(ug[i])
            group = self.groups[g]
            if group.on_served is not None:
                a, b = int(starts[i]), int(ends[i])
                group.on_served(ks[a:b], served[a:b])
            if self.left[g] == 0:
                self._finish(group)

    def _finish(self, group) -> None:
        """``group``'s last member is served: it takes its state and fires at its last
        arrival."""
        g = group.gid
        o = self.off[g]
        group.settle(self.m_served[o:o + group.latency_ns.shape[0]].copy(), float(self.last[g]))
        self.groups[g] = None
        self.live -= 1
        if self.live == 0:
            self.m_used = 0                     # no group runs: the member rows are free
        group.fire_in(max(group.last_ns - self.share.env.now, 0.0), group.tag)

    def note(self, gid: int, ks, served) -> None:
        """Members ``ks`` of group ``gid`` (a list or array) were served at ``served`` from a
        shared class (already counted as done): told with the others at ``flush``."""
        got = self.batch.setdefault(gid, (self.groups[gid], [], []))
        got[1].append(ks)
        got[2].append(served)

    def flush(self) -> None:
        """Tell the members gathered by ``note`` (``done``, groups in ascending order)."""
        if self.batch:
            batch, self.batch = self.batch, {}
            gids = sorted(batch)
            ks = [np.concatenate(batch[g][1]).astype(np.int64) for g in gids]
            self.share.transfers_done -= sum(k.shape[0] for k in ks)   # counted already
            self.done(np.repeat(np.array(gids, dtype=np.int64), [k.shape[0] for k in ks]),
                      np.concatenate(ks),
                      np.concatenate([np.concatenate(batch[g][2]) for g in gids]).astype(float))
