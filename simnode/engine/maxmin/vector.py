"""The max-min solver for one large problem in an interpreted run: numpy, many freezes a step.

``vector_rates`` is the progressive fill of ``simnode.engine.maxmin.fill`` in numpy, for a
single large solve while a run is still interpreted (say one all-to-all of 16 k classes, too
few solves to repay numba): each step freezes every class whose cap is within reach and
every resource at the lowest level at once, and updates only the frozen classes'
incidences. Its sums run in another order, so it is NOT bit-identical to the sequential
fill: it agrees with it to 1e-12 relative (tests/engine/test_maxmin.py, random problems
with caps, multiplicities, FCFS and skipped resources). It is deterministic.
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter

import numpy as np

from simnode.engine.maxmin.fill import REL_TOL


def vector_rates(act, links, wts, sw, mult, ccap, res_cap, fcfs, any_fcfs, skip, rate,
                 res_rate, block=None) -> int:
    """``rates`` (without the index or scratch) for a large problem given as Python lists,
    with numpy: the same progressive filling and the same two fills for FCFS resources,
    but each step freezes at once every class whose cap is within reach (``REL_TOL``) and
    every resource whose fill level equals the lowest, and updates only the frozen classes'
    incidences (sums by ``np.bincount``). Not bit-identical to the sequential fill (its
    sums run in another order): equal to it up to floating-point rounding
    (tests/engine/test_maxmin.py: 1e-12 relative on random problems). Rows hold their
    resources first, then -1 pads only (as ``Share`` and ``max_min`` make them). ``block``:
    the rows and weights of the classes ``act`` as two [n, width] arrays (``links`` and
    ``wts`` are then not read; the same arrays as from those lists, so the same rates),
    ``act`` then being consecutive rows (the share's block of one group's rows).
    Returns 0, or 1 if a class is bounded by nothing."""
    n = len(act)
    nres = len(res_cap)
    get = itemgetter(*act) if n > 1 else (lambda lst: (lst[act[0]],) if n else ())
    if block is not None:
        a0 = act[0]
        get = lambda lst: lst[a0:a0 + n]   # noqa: E731 (consecutive rows: a slice)
        rows, wb = block
        width = rows.shape[1]
        res = rows.ravel()
        w = wb.ravel()
        cls = np.repeat(np.arange(n), width)
        pos = np.tile(np.arange(width), n)
    else:
        rows = get(links)
        lens = np.fromiter(map(len, rows), np.int64, n)
        total = int(lens.sum())
        res = np.fromiter(chain.from_iterable(rows), np.int64, total)
        w = np.fromiter(chain.from_iterable(get(wts)), float, total)
        if w.shape[0] != total:
            raise ValueError("one weight per resource of a row is needed")
        cls = np.repeat(np.arange(n), lens)
        pos = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
    ok = res >= 0                           # -1 pads a row
    cls, res, w, pos = cls[ok], res[ok], w[ok], pos[ok]
    m = np.array(get(mult), dtype=float)
    cp = np.array(get(ccap), dtype=float)
    cap_r = np.array(res_cap, dtype=float)
    skip_r = np.array(skip, dtype=np.bool_)
    visit = pos < np.array(get(sw), dtype=np.int64)[cls]
    dw = m[cls] * w
    if not any_fcfs:
        got = vfill(n, cls, res, dw, cp, cap_r, visit & ~skip_r[res])
        if got is None:
            return 1
    else:
        fcfs_r = np.array(fcfs, dtype=np.bool_)
        got = vfill(n, cls, res, dw, cp, cap_r, visit & ~(fcfs_r | skip_r)[res])
        if got is None:
            return 1
        sel = visit & fcfs_r[res]           # offered load on FCFS resources (``load_fcfs``)
        offered = np.bincount(res[sel], w[sel] * (m * got)[cls[sel]], nres)
        over = fcfs_r & (offered > cap_r * (1.0 + REL_TOL))
        if over.any():
            factor = np.ones(nres)
            factor[over] = cap_r[over] / offered[over]
            f = np.ones(n)
            np.minimum.at(f, cls, factor[res])
            cap2 = np.where((f < 1.0) & (got * f < cp), got * f, cp)
            got = vfill(n, cls, res, dw, cap2, cap_r, visit & ~skip_r[res])
            if got is None:
                return 1
    if block is not None:
        rate[a0:a0 + n] = got.tolist()
    else:
        for c, x in zip(act, got.tolist()):
            rate[c] = x
    res_rate[:] = np.bincount(res, w * (m * got)[cls], nres).tolist()   # ``load``
    return 0


def vfill(n, cls, res, dw, cp, cap_r, keep):
    """``fill`` of ``vector_rates``: rates of classes 0..n-1 (incidences ``cls``, ``res``
    with demand ``dw`` = mult x weight, grouped by class), caps ``cp``, resources
    only the incidences ``keep`` filled (others: unlimited, skipped or past the row's
    ``sw``); None if a class is bounded by nothing."""
    nres = cap_r.shape[0]
    ic, ir, idw = cls[keep], res[keep], dw[keep]
    rate = np.zeros(n)
    frozen = np.zeros(n, dtype=np.bool_)
    ninc = np.bincount(ic, minlength=n)
    zero = ninc == 0
    if np.isinf(cp[zero]).any():
        return None
    rate[zero] = cp[zero]
    frozen[zero] = True
    wsum = np.bincount(ir, idw, nres)
    cnt = np.bincount(ir, minlength=nres)
    if np.isfinite(cp).all():
        lim = cnt > 0
        if not (np.bincount(ir, idw * cp[ic], nres)[lim] > cap_r[lim]).any():
            return cp.copy()                # every class at its cap: nothing fills
    used = np.zeros(nres)
    # resource -> its incidences (by resource, class order kept); class -> its incidences.
    # A stable sort has one result whatever the key's dtype: int16 ids sort by radix, ~10x
    # faster than int64 ones
    by_res = np.argsort(ir.astype(np.int16) if nres <= 32767 else ir, kind="stable")
    rcls = ic[by_res]
    rptr = np.zeros(nres + 1, dtype=np.int64)
    np.cumsum(cnt, out=rptr[1:])
    cptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ninc, out=cptr[1:])
    capped = np.flatnonzero(~frozen & np.isfinite(cp))
    capped = capped[np.argsort(cp[capped], kind="stable")]
    cap_sorted = cp[capped]
    ci = 0
    left = n - int(zero.sum())
    while left > 0:
        live = cnt > 0
        lev = np.full(nres, np.inf)
        lev[live] = np.maximum(cap_r[live] - used[live], 0.0) / wsum[live]
        lmin = lev.min() if nres else np.inf
        j = int(np.searchsorted(cap_sorted, lmin * (1.0 + REL_TOL), side="right"))
        if j > ci:                          # caps within reach: frozen at their caps
            cs = capped[ci:j]
            ci = j
            cs = cs[~frozen[cs]]
            if cs.shape[0] == 0:
                continue
            x = cp[cs]
        else:
            if lmin == np.inf:
                return None
            full = np.flatnonzero(lev == lmin)
            a, b = rptr[full], rptr[full + 1]
            mark = np.zeros(n, dtype=np.bool_)     # (np.unique would import numpy.ma)
            mark[rcls[ranges(a, b)]] = True
            cs = np.flatnonzero(mark & ~frozen)
            x = np.full(cs.shape[0], lmin)
        frozen[cs] = True
        rate[cs] = x
        left -= cs.shape[0]
        inc = ranges(cptr[cs], cptr[cs + 1])
        r = ir[inc]
        d = idw[inc]
        used += np.bincount(r, d * np.repeat(x, ninc[cs]), nres)
        wsum -= np.bincount(r, d, nres)
        cnt -= np.bincount(r, minlength=nres)
    return rate


def ranges(a, b):
    """The indices of the ranges [a[i], b[i]) one after the other."""
    ln = b - a
    tot = int(ln.sum())
    if tot == 0:
        return np.zeros(0, dtype=np.int64)
    start = np.repeat(a - (np.cumsum(ln) - ln), ln)
    return start + np.arange(tot)
