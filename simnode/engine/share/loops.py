"""The share's inner loops over its classes, and list helpers for the interpreted backend.

The loops (``advance``, ``accrue``, ``due``, ``next_finish``, ``release_members``,
``note_covers``, ``relayout``) are written once, in the subset of Python that numba compiles:
the list backend (``simnode.engine.share.lists``) runs them interpreted on Python lists, the
array backend (``simnode.engine.share.arrays``) compiled on numpy arrays (``KERNELS``), with
the same floating-point operations in the same order. ``advance_vec``, ``due_vec`` and
``next_finish_vec`` are three of them in numpy for interpreted wakes with many active
classes: the same operations element by element, so the same results to the bit
(tests/engine/test_share.py).
"""

from __future__ import annotations

import math
from operator import itemgetter

import numpy as np

INF = math.inf
EPS_UNITS = 1e-6          # completion tolerance: a transfer within this many units is done
EPS_REL = 1e-12           # ... plus this share of the units its class has served


def gather(lst: list, idx: list) -> tuple:
    """``lst[i]`` for each i of ``idx``, as a tuple (``itemgetter``: one C call, not a loop)."""
    return itemgetter(*idx)(lst) if len(idx) > 1 else tuple(lst[i] for i in idx)


def assign(lst: list, idx: list, value) -> None:
    """``lst[i] = value`` for each i of ``idx`` (distinct ids, ascending): one slice
    assignment when they are a range (a group's solo classes usually are)."""
    span = id_range(idx)
    if span:
        lst[span[0]:span[1]] = [value] * len(idx)
    else:
        for i in idx:
            lst[i] = value


# -- the loops (numba-compatible: run interpreted on lists or compiled on arrays) -----------------
def row_len(row):
    """How many resources a class's ``row`` holds (they lead it; -1 pads the rest)."""
    k = 0
    while k < len(row) and row[k] >= 0:
        k += 1
    return k


def advance(act, V, crate, dt):
    """Serve every active class for ``dt``: its virtual clock moves by rate x dt."""
    for i in range(len(act)):
        c = act[i]
        V[c] += crate[c] * dt


def accrue(res_rate, res_bytes, res_busy, dt):
    """Units served and busy time per resource over ``dt`` at the current rates."""
    for r in range(len(res_rate)):
        x = res_rate[r]
        if x > 0.0:
            res_bytes[r] += x * dt
            res_busy[r] += dt


def due(act, top, V, crate, window, out):
    """Classes whose first member finishes within ``window``; their ids into ``out``,
    returns how many."""
    k = 0
    for i in range(len(act)):
        c = act[i]
        v = V[c]
        if top[c] - v <= crate[c] * window + EPS_UNITS + EPS_REL * v:
            out[k] = c
            k += 1
    return k


def next_finish(act, top, V, crate):
    """Time from now to the first finish among the active classes (inf if none moves)."""
    best = INF
    for i in range(len(act)):
        c = act[i]
        r = crate[c]
        if r > 0.0:
            t = (top[c] - V[c]) / r
            if t < best:
                best = t
    return best


def release_members(cs, tags, mw, V, links, w, res_bytes, n, over):
    """Drop finished members (class ``cs[i]``, finish tag ``tags[i]``, weights ``mw[i]`` in
    the order of its class's row) from their classes: their weights leave the class's sum,
    and the units they were credited with after their finish are taken back (``over[i]``,
    units of the member, is written out for the series)."""
    for i in range(len(cs)):
        c = cs[i]
        o = V[c] - tags[i]
        if o < 0.0:
            o = 0.0
        over[i] = o
        row = links[c]
        wr = w[c]
        mwr = mw[i]
        for j in range(row_len(row)):
            r = row[j]
            if o > 0.0:
                res_bytes[r] -= mwr[j] * o
            wr[j] -= mwr[j]
        n[c] -= 1


def note_covers(ids, links, w, keys, nres, has, covering, ratio, uncov, unc, delta):
    """For each class in ``ids`` and each covered resource X on it: the largest weight on X
    / weight on Y over its covering resources Y (pair key X * nres + Y in the sorted
    ``keys``; ``covering[Y]``: Y covers some resource) into ``ratio`` (when ``delta`` > 0);
    ``uncov[X] += delta`` if the class crosses none of them (delta = +1 for a new class, -1
    for one that left, 0: ratios only). ``unc[c]``: whether class c crosses such an X (set
    when it comes; a class that leaves without one is skipped: its resources do not change).
    Returns whether a ratio grew."""
    npairs = len(keys)
    grew = False
    for t in range(len(ids)):
        c = ids[t]
        if delta < 0 and not unc[c]:
            continue
        if delta > 0:
            unc[c] = False
        row = links[c]
        wr = w[c]
        m = row_len(row)
        for j in range(m):
            x = row[j]
            if not has[x]:
                continue
            found = False
            for i in range(m):
                y = row[i]
                if i == j or not covering[y]:
                    continue
                key = x * nres + y
                lo = 0
                hi = npairs
                while lo < hi:
                    mid = (lo + hi) // 2
                    if keys[mid] < key:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < npairs and keys[lo] == key:
                    found = True
                    if delta >= 0:
                        q = wr[j] / wr[i]
                        if q > ratio[lo]:
                            ratio[lo] = q
                            grew = True
            if not found:
                uncov[x] += delta
                if delta > 0:
                    unc[c] = True
    return grew


def relayout(ids, links, w, skip, sw):
    """Move each class's skipped resources to the end of its row (order otherwise kept) and
    set ``sw[c]``: how many of its resources the solver's fills visit."""
    for t in range(len(ids)):
        c = ids[t]
        row = links[c]
        wr = w[c]
        n = row_len(row)
        k = 0
        for j in range(n):                      # keep: the unskipped, in order, to the front
            if not skip[row[j]]:
                if k != j:
                    r = row[j]
                    x = wr[j]
                    for i in range(j, k, -1):   # shift the skipped ones between right by one
                        row[i] = row[i - 1]
                        wr[i] = wr[i - 1]
                    row[k] = r
                    wr[k] = x
                k += 1
        sw[c] = k


# -- the same three loops for many classes, interpreted (lists in, numpy inside) ------------------
def column(lst: list, act: list, span) -> np.ndarray:
    """``lst[c]`` for c in ``act`` (a slice when they are the range ``span``)."""
    return np.array(lst[span[0]:span[1]] if span else gather(lst, act), dtype=float)


def id_range(act: list):
    """(first, stop) if the ascending distinct ids ``act`` are one range, else None."""
    return (act[0], act[-1] + 1) if act and act[-1] - act[0] + 1 == len(act) else None


def advance_vec(act, V, crate, dt):
    """``advance``: V[c] + crate[c] x dt, the same two roundings per class."""
    span = id_range(act)
    v = (column(V, act, span) + column(crate, act, span) * dt).tolist()
    if span:
        V[span[0]:span[1]] = v
    else:
        for c, x in zip(act, v):
            V[c] = x


def due_vec(act, top, V, crate, window, out):
    """``due``: the loop's test, term by term in its order."""
    span = id_range(act)
    v = column(V, act, span)
    due = np.flatnonzero(column(top, act, span) - v
                         <= column(crate, act, span) * window + EPS_UNITS + EPS_REL * v)
    k = due.shape[0]
    out[:k] = (due + span[0]).tolist() if span else gather(act, due.tolist())
    return k


def next_finish_vec(act, top, V, crate):
    """``next_finish``: the least (top - V) / rate over moving classes; as the loop, a time that is
    not below inf (inf, nan) is never the answer."""
    span = id_range(act)
    r = column(crate, act, span)
    moving = r > 0.0
    with np.errstate(invalid="ignore"):         # (inf - inf: nan, never the answer)
        t = (column(top, act, span)[moving] - column(V, act, span)[moving]) / r[moving]
    t = t[t < INF]
    return float(t.min()) if t.shape[0] else INF


#: the loops the compiled backend runs compiled (``simnode.engine.jit``), and their constants
KERNELS = (row_len, advance, accrue, due, next_finish, release_members, note_covers, relayout)
KERNEL_CONSTANTS = {"INF": INF, "EPS_UNITS": EPS_UNITS, "EPS_REL": EPS_REL}
