"""The progressive fill with an index: the max-min solver of long runs and large problems.

``rates`` (both policies) and ``fill`` (one progressive filling) are written in the subset of
Python that numba compiles: they run interpreted on Python lists or compiled on numpy arrays
(``simnode.engine.maxmin.compiled``), with the same floating-point operations in the same
order. ``fill`` builds its index of each resource's classes with ``simnode.engine.maxmin.
index`` and reuses it while only classes have left.

Algorithm: per resource the fill level (remaining capacity / unfrozen demand); a heap of
levels and a heap of caps; pop whichever is lower and freeze its classes at that level,
taking their demand off the other resources they cross. Levels only rise as classes freeze,
so a resource's heap entry is re-filed only when it reaches the top with a stale level.
O(incidences x log) per solve. If every resource can serve all its classes at their caps,
the caps are the answer (checked first, O(incidences)).
"""

from __future__ import annotations

import heapq
import math

from simnode.engine.maxmin.index import (GEN, KIND, MOST, N_VIS, N_ZERO, OWN, index_count,
                                         index_prune, index_sort)

#: a cap within this relative distance of the lowest fill level freezes at its cap
REL_TOL = 1e-9
INF = math.inf


def fill(act, links, wts, sw, mult, ccap, res_cap, unlimited, watch, rate, gen, kind,
         info, wsum, cnt, used, ver, ptr, hl, hr, hv, frozen, vis, zero,
         slot_cls, slot_dw, slot_blk, blk_res, blk_dw):
    """Progressive filling of the classes ``act`` (see the module docstring); writes
    ``rate[c]``. Class c's resources are the first ``sw[c]`` of its row (the rest, if any,
    never fill); resources with ``unlimited[r]`` are ignored. The classes that visit a
    resource with ``watch[r]`` are listed: ``vis[:info[N_VIS]]``, in the order of ``act``.

    The index (``index_count`` and ``index_sort``: each resource's classes, with what their
    freezes need) is kept in the scratch and reused (``index_prune``) while ``gen`` (>= 0)
    and ``kind`` are those it was built for: the caller changes ``gen`` whenever a class is added or
    changes its row, weights or ``sw``, or ``unlimited`` changes, so only classes that
    left ``act`` differ. The remaining arguments are scratch: per resource (``wsum``,
    ``cnt``, ``used``, ``ver``, the level heap ``hl``, ``hr``, ``hv``: len >= resources;
    ``ptr``: resources + 1), per class row (``frozen``, ``vis``, ``zero``), per
    incidence (``slot_*``) and per block entry (``blk_*``).

    The heap of levels holds (level, resource, version) entries (``sift``); its content
    evolves exactly as the algorithm says (entries re-filed when stale at the top, all
    rebuilt once more updates than entries have accumulated: stale ones refreshed, those of
    resources without classes dropped), so any heap gives the same sequence of pops; this
    one lives in arrays, which numba handles faster than a list of tuples.

    Returns 0; 1 if some class is bounded by nothing (no cap, no limited resource); 2 if
    the slot or block scratch is too small (``info[NEED_SLOTS]``, ``info[NEED_BLOCKS]``:
    the sizes needed)."""
    nres = len(res_cap)
    built = gen >= 0 and info[GEN] == gen and info[KIND] == kind
    if built:
        all_capped = index_prune(act, ccap, nres, info, wsum, cnt, used, ptr, frozen, vis,
                                 zero, slot_cls, slot_dw, slot_blk, blk_res, blk_dw)
    else:
        info[GEN] = -1
        all_capped = index_count(act, links, wts, sw, mult, ccap, nres, unlimited, watch,
                                 info, wsum, cnt, used, frozen, vis, zero)
    # a class that crosses no limited resource: its cap only
    for i in range(info[N_ZERO]):
        c = zero[i]
        if ccap[c] == INF:
            return 1
        frozen[c] = True
        rate[c] = ccap[c]
    left = len(act) - info[N_ZERO]
    if all_capped:
        fits = True
        for r in range(nres):
            if cnt[r] > 0 and used[r] > res_cap[r]:
                fits = False
                break
        if fits:                            # every class at its cap: nothing fills
            for i in range(len(act)):
                c = act[i]
                rate[c] = ccap[c]
            return 0
    for r in range(nres):
        used[r] = 0.0
    if not built:
        if index_sort(act, links, wts, sw, mult, nres, unlimited, info, cnt, ver, ptr, frozen,
                      left, slot_cls, slot_dw, slot_blk, blk_res, blk_dw):
            return 2
        info[GEN] = gen
        info[KIND] = kind
    own = info[OWN] == 1
    bw = info[MOST] - 1 if own else info[MOST]   # block width
    hn = 0                                  # entries in the level heap
    for r in range(nres):
        ver[r] = 0
        if cnt[r] > 0:
            hl[hn] = res_cap[r] / wsum[r]
            hr[hn] = r
            hv[hn] = 0
            hn += 1
    for i in range(hn // 2 - 1, -1, -1):
        sift(hl, hr, hv, hn, i)
    cheap = [(0.0, 0)]
    cheap.pop()
    for i in range(len(act)):
        c = act[i]
        if not frozen[c] and ccap[c] < INF:
            cheap.append((ccap[c], c))
    heapq.heapify(cheap)
    stale = 0                               # level updates since the heap was built
    while left > 0:
        lmin = INF
        lres = -1
        if stale > hn:
            # many entries are stale (classes spread over many resources with levels close
            # together): rebuilding costs less than re-filing them one by one
            # (every resource with classes left has one entry: drop the others, refresh
            # the stale ones)
            n2 = 0
            for i in range(hn):
                r = hr[i]
                if cnt[r] > 0:
                    if hv[i] != ver[r]:
                        rem = res_cap[r] - used[r]
                        if rem < 0.0:
                            rem = 0.0
                        hl[n2] = rem / wsum[r]
                        hv[n2] = ver[r]
                    else:
                        hl[n2] = hl[i]
                        hv[n2] = hv[i]
                    hr[n2] = r
                    n2 += 1
            hn = n2
            for i in range(hn // 2 - 1, -1, -1):
                sift(hl, hr, hv, hn, i)
            stale = 0
        while hn > 0:
            r = hr[0]
            if cnt[r] == 0:                 # drop it
                hn -= 1
                hl[0] = hl[hn]
                hr[0] = hr[hn]
                hv[0] = hv[hn]
                sift(hl, hr, hv, hn, 0)
                continue
            if hv[0] != ver[r]:             # stale: levels only rise, so re-file it
                rem = res_cap[r] - used[r]
                if rem < 0.0:
                    rem = 0.0
                hl[0] = rem / wsum[r]
                hv[0] = ver[r]
                sift(hl, hr, hv, hn, 0)
                continue
            lmin = hl[0]
            lres = r
            break
        cmin = INF
        ccls = -1
        while len(cheap) > 0:
            cv, c = cheap[0]
            if frozen[c]:
                heapq.heappop(cheap)
                continue
            cmin = cv
            ccls = c
            break
        if lres < 0 and ccls < 0:
            return 1
        if ccls >= 0 and cmin <= lmin * (1.0 + REL_TOL):
            heapq.heappop(cheap)
            left -= 1
            stale += freeze(ccls, cmin, links, wts, sw, mult, unlimited, rate, wsum, cnt, used,
                             ver, frozen)
        else:
            hn -= 1                         # pop lres
            hl[0] = hl[hn]
            hr[0] = hr[hn]
            hv[0] = hv[hn]
            sift(hl, hr, hv, hn, 0)
            x = lmin
            done = 0
            for k in range(ptr[lres], ptr[lres + 1]):
                c = slot_cls[k]
                if frozen[c]:
                    continue
                # freeze c at x: take its demand off every resource it crosses (their heap
                # entries go stale; they are re-filed when they reach the top)
                frozen[c] = True
                rate[c] = x
                done += 1
                b = k * bw if own else slot_blk[k]
                for t in range(bw):
                    r = blk_res[b + t]
                    if r < 0:
                        break
                    dw = blk_dw[b + t]
                    used[r] += dw * x
                    wsum[r] -= dw
                    cnt[r] -= 1
                    ver[r] += 1
                    stale += 1
            left -= done
            if own:                         # lres itself: full, never read again
                stale += done
                cnt[lres] = 0
                ver[lres] += done
    return 0


def sift(hl, hr, hv, n, i):
    """Move the entry at i of the level heap (``hl``, ``hr``, ``hv``: level, resource,
    version; ``n`` entries) down to its place: a min-heap on (level, resource)."""
    lv = hl[i]
    r = hr[i]
    v = hv[i]
    while True:
        ch = 2 * i + 1
        if ch >= n:
            break
        if ch + 1 < n and (hl[ch + 1] < hl[ch] or (hl[ch + 1] == hl[ch] and hr[ch + 1] < hr[ch])):
            ch += 1
        if hl[ch] < lv or (hl[ch] == lv and hr[ch] < r):
            hl[i] = hl[ch]
            hr[i] = hr[ch]
            hv[i] = hv[ch]
            i = ch
        else:
            break
    hl[i] = lv
    hr[i] = r
    hv[i] = v


def freeze(c, x, links, wts, sw, mult, unlimited, rate, wsum, cnt, used, ver, frozen):
    """Freeze class c at rate x from its row (a class reaching its cap; see ``fill``).
    Returns how many resources it updated."""
    frozen[c] = True
    k = 0
    rate[c] = x
    m = mult[c]
    for j in range(sw[c]):
        r = links[c][j]
        if r < 0:
            break
        if unlimited[r]:
            continue
        dw = m * wts[c][j]
        used[r] += dw * x
        wsum[r] -= dw
        cnt[r] -= 1
        ver[r] += 1
        k += 1
    return k


def rates(act, links, wts, sw, mult, ccap, res_cap, fcfs, any_fcfs, skip, rate, res_rate, gen,
          unl, cap2, factor, info, wsum, cnt, used, ver, ptr, hl, hr, hv, frozen, vis, zero,
          slot_cls, slot_dw, slot_blk, blk_res, blk_dw):
    """Rates of the classes ``act`` into ``rate`` and the load per resource into
    ``res_rate`` (both policies, see the module docstring). ``skip[r]``: resource r cannot
    fill whatever the rates (its users are covered by other resources that fill first,
    ``simnode.engine.share.Share.cover``), so it is left out of the fills; ``sw[c]``: how
    many of class c's resources (from the left of its row) the fills visit, all of them
    but skipped ones moved to the end of the row (``load`` visits every one). ``gen``:
    the index of the first fill is reused while it is unchanged (``fill``; -1: never).
    The rest are scratch (``scratch``). Returns 0; 1 if a class is bounded by nothing; 2
    if the scratch is too small (``solve`` grows it and calls again)."""
    nres = len(res_cap)
    if not any_fcfs:
        err = fill(act, links, wts, sw, mult, ccap, res_cap, skip, fcfs, rate, gen, 1,
                   info, wsum, cnt, used, ver, ptr, hl, hr, hv, frozen, vis, zero,
                   slot_cls, slot_dw, slot_blk, blk_res, blk_dw)
    else:
        # offered rates: FCFS resources unlimited
        for r in range(nres):
            unl[r] = fcfs[r] or skip[r]
        err = fill(act, links, wts, sw, mult, ccap, res_cap, unl, fcfs, rate, gen, 1,
                   info, wsum, cnt, used, ver, ptr, hl, hr, hv, frozen, vis, zero,
                   slot_cls, slot_dw, slot_blk, blk_res, blk_dw)
        if err:
            return err
        load_fcfs(vis, info[N_VIS], links, wts, sw, mult, rate, res_rate, fcfs)
        over = False
        for r in range(nres):
            factor[r] = 1.0
            if fcfs[r] and res_rate[r] > res_cap[r] * (1.0 + REL_TOL):
                factor[r] = res_cap[r] / res_rate[r]
                over = True
        if over:
            for i in range(len(act)):
                c = act[i]
                f = 1.0
                for j in range(len(links[c])):
                    r = links[c][j]
                    if r < 0:
                        break
                    if factor[r] < f:
                        f = factor[r]
                cp = ccap[c]
                if f < 1.0 and rate[c] * f < cp:
                    cp = rate[c] * f
                cap2[c] = cp
            # other resources limited: its own index (the next first fill builds again)
            err = fill(act, links, wts, sw, mult, cap2, res_cap, skip, fcfs, rate, gen, 2,
                       info, wsum, cnt, used, ver, ptr, hl, hr, hv, frozen, vis, zero,
                       slot_cls, slot_dw, slot_blk, blk_res, blk_dw)
    if err:
        return err
    load(act, links, wts, mult, rate, res_rate)
    return 0


def load_fcfs(vis, nv, links, wts, sw, mult, rate, res_rate, fcfs):
    """``load`` of the FCFS resources only (others 0), over the resources the fills visit
    (a skipped FCFS resource cannot be overloaded: the resources covering it fill first),
    of the classes ``vis[:nv]`` (those that visit one, in the order of ``act``)."""
    for r in range(len(res_rate)):
        res_rate[r] = 0.0
    for i in range(nv):
        c = vis[i]
        x = mult[c] * rate[c]
        for j in range(sw[c]):
            r = links[c][j]
            if r < 0:
                break
            if fcfs[r]:
                res_rate[r] += wts[c][j] * x


def load(act, links, wts, mult, rate, res_rate):
    """Per resource, the rate it serves (sum of mult x weight x class rate)."""
    for r in range(len(res_rate)):
        res_rate[r] = 0.0
    for i in range(len(act)):
        c = act[i]
        x = mult[c] * rate[c]
        for j in range(len(links[c])):
            r = links[c][j]
            if r < 0:
                break
            res_rate[r] += wts[c][j] * x

