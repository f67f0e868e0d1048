"""The max-min solver for a few classes: a chip's handful of transfer classes, interpreted.

``small_rates`` is the progressive fill of ``simnode.engine.maxmin.fill`` without its index,
on dicts: for a handful of classes the index costs more than the filling. The same floating-
point operations in the same order, so the same rates to the bit (tests/engine/
test_maxmin.py).
"""

from __future__ import annotations

from simnode.engine.maxmin.fill import INF, REL_TOL, load


def small_rates(act, links, wts, ccap, res_cap, rate, res_rate) -> int:
    """``rates`` for a few classes (multiplicity 1, no FCFS or skipped resource), interpreted:
    the same progressive filling, the same floating-point operations in the same order, so
    the same rates to the bit, without building ``fill``'s index (which, for a chip's
    handful of classes, costs more than the filling). Returns 0, or 1 if a class is bounded
    by nothing."""
    wsum = {}
    cnt = {}
    used = {}
    all_capped = True
    live = []                               # classes crossing some resource, in act order
    for c in act:
        cp = ccap[c]
        if cp == INF:
            all_capped = False
        n = 0
        for r, w in zip(links[c], wts[c]):
            if r < 0:
                break
            wsum[r] = wsum.get(r, 0.0) + w
            cnt[r] = cnt.get(r, 0) + 1
            used[r] = used.get(r, 0.0) + w * cp
            n += 1
        if n:
            live.append(c)
        elif cp == INF:
            return 1
        else:
            rate[c] = cp                    # crosses nothing: its cap
    fits = all_capped
    if fits:
        for r in used:
            if used[r] > res_cap[r]:
                fits = False
                break
    if fits:
        for c in act:
            rate[c] = ccap[c]
    else:
        for r in used:
            used[r] = 0.0
        res = sorted(wsum)                  # ties between levels: the lower resource first
        capped = sorted((ccap[c], c) for c in live if ccap[c] < INF)
        ci = 0
        frozen = set()
        left = len(live)
        while left > 0:
            lmin = INF
            lres = -1
            for r in res:
                if cnt[r] > 0:
                    rem = res_cap[r] - used[r]
                    if rem < 0.0:
                        rem = 0.0
                    lv = rem / wsum[r]
                    if lv < lmin:
                        lmin = lv
                        lres = r
            while ci < len(capped) and capped[ci][1] in frozen:
                ci += 1
            if ci < len(capped) and capped[ci][0] <= lmin * (1.0 + REL_TOL):
                x, c = capped[ci]
                ci += 1
                todo = (c,)
            elif lres < 0:
                return 1
            else:
                x = lmin
                todo = [c for c in live if c not in frozen and lres in links[c]]
            for c in todo:                  # freeze: its demand off its resources
                frozen.add(c)
                rate[c] = x
                left -= 1
                for r, w in zip(links[c], wts[c]):
                    if r < 0:
                        break
                    used[r] += w * x
                    wsum[r] -= w
                    cnt[r] -= 1
    load(act, links, wts, _ONES, rate, res_rate)
    return 0


class _Ones:
    """mult[c] = 1.0 for every class."""

    def __getitem__(self, _c):
        return 1.0


_ONES = _Ones()
