"""The one max-min fair rate solver (progressive filling), for every shared rate in simnode.

``max_min(links, weights, mult, cap, capacity, fcfs)`` returns the rate of each class.
A class stands for ``mult`` identical transfers; each of them crosses the resources of
its row of ``links`` (resource ids, padded with -1) and uses ``weight x rate`` of each
(e.g. HBM bytes per byte of a message); it may not exceed ``cap`` (inf: uncapped).
Resource r serves at most ``capacity[r]``. All classes rise together; a class stops when
a resource it crosses fills or it reaches its cap. The answer is unique.

First come, first served (``fcfs[r]``): such a resource serves overloaded users in
proportion to the load they offer, as a memory controller that queues requests in
arrival order (``memory.hbm_arbitration: fcfs``). Offered rates are the max-min rates
with FCFS resources unlimited; each overloaded FCFS resource scales its classes'
offered rates down to fit (a class on two takes the smaller factor), and these become
caps of a second max-min fill under the real capacities, which therefore never
over-uses a resource. Without overload this is plain max-min.

One algorithm, two speeds. ``_rates`` and ``_fill`` are written once, in the subset of
Python that numba compiles; they run interpreted on Python lists (small problems: a
chip's few transfer classes, one solve of a network) or compiled on numpy arrays
(``compiled()``, once a run has many large solves; numba is imported only then). Same
code, same floating-point operations in the same order: identical results
(tests/engine/test_maxmin.py checks bit equality).

One exception, for speed: a single large solve while a run is still interpreted (say one
all-to-all of 16 k classes, too few solves to repay numba) runs ``vector_rates``, the
same filling in numpy: each step freezes every class whose cap is within reach and every
resource at the lowest level at once, and updates only the frozen classes' incidences.
Its sums run in another order, so it is NOT bit-identical to the sequential fill: it
agrees with it to 1e-12 relative (tests/engine/test_maxmin.py, random problems with
caps, multiplicities, FCFS and skipped resources). It is deterministic.

Algorithm: per resource the fill level (remaining capacity / unfrozen demand); a heap
of levels and a heap of caps; pop whichever is lower and freeze its classes at that
level, taking their demand off the other resources they cross. Levels only rise as
classes freeze, so a resource's heap entry is re-filed only when it reaches the top
with a stale level. O(incidences x log) per solve. If every resource can serve all
its classes at their caps, the caps are the answer (checked first, O(incidences)).
"""

from __future__ import annotations

import heapq
import math

REL_TOL = 1e-9      # a cap within this relative distance of the lowest fill level freezes at its cap
#: ``_prune`` compacts the index once the slots of classes that left exceed 1/PRUNE_SLACK of
#: the live ones (speed only: the fills skip such slots, results are the same)
PRUNE_SLACK = 8
INF = math.inf


# ``info`` (small int scratch kept with the index): sizes a fill asked for, list lengths,
# the index's block layout, and which problem the index was built for
NEED_SLOTS, NEED_BLOCKS, N_VIS, N_ZERO, MOST, OWN, GEN, KIND = range(8)
INFO_LEN = 8
SLOTS, BLOCKS = 15, 18     # positions in ``scratch()`` of the first per-slot and per-block buffer


def _fill(act, links, wts, sw, mult, ccap, res_cap, unlimited, watch, rate, gen, kind,
          info, wsum, cnt, used, ver, ptr, hl, hr, hv, frozen, vis, zero,
          slot_cls, slot_dw, slot_blk, blk_res, blk_dw):
    """Progressive filling of the classes ``act`` (see the module docstring); writes
    ``rate[c]``. Class c's resources are the first ``sw[c]`` of its row (the rest, if any,
    never fill); resources with ``unlimited[r]`` are ignored. The classes that visit a
    resource with ``watch[r]`` are listed: ``vis[:info[N_VIS]]``, in the order of ``act``.

    The index (``_count`` and ``_sort``: each resource's classes, with what their freezes
    need) is kept in the scratch and reused (``_prune``) while ``gen`` (>= 0) and ``kind``
    are those it was built for: the caller changes ``gen`` whenever a class is added or
    changes its row, weights or ``sw``, or ``unlimited`` changes, so only classes that
    left ``act`` differ. The remaining arguments are scratch: per resource (``wsum``,
    ``cnt``, ``used``, ``ver``, the level heap ``hl``, ``hr``, ``hv``: len >= resources;
    ``ptr``: resources + 1), per class row (``frozen``, ``vis``, ``zero``), per
    incidence (``slot_*``) and per block entry (``blk_*``).

    The heap of levels holds (level, resource, version) entries (``_sift``); its content
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
        all_capped = _prune(act, ccap, nres, info, wsum, cnt, used, ptr, frozen, vis, zero,
                            slot_cls, slot_dw, slot_blk, blk_res, blk_dw)
    else:
        info[GEN] = -1
        all_capped = _count(act, links, wts, sw, mult, ccap, nres, unlimited, watch, info,
                            wsum, cnt, used, frozen, vis, zero)
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
        if _sort(act, links, wts, sw, mult, nres, unlimited, info, cnt, ver, ptr, frozen, left,
                 slot_cls, slot_dw, slot_blk, blk_res, blk_dw):
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
        _sift(hl, hr, hv, hn, i)
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
                _sift(hl, hr, hv, hn, i)
            stale = 0
        while hn > 0:
            r = hr[0]
            if cnt[r] == 0:                 # drop it
                hn -= 1
                hl[0] = hl[hn]
                hr[0] = hr[hn]
                hv[0] = hv[hn]
                _sift(hl, hr, hv, hn, 0)
                continue
            if hv[0] != ver[r]:             # stale: levels only rise, so re-file it
                rem = res_cap[r] - used[r]
                if rem < 0.0:
                    rem = 0.0
                hl[0] = rem / wsum[r]
                hv[0] = ver[r]
                _sift(hl, hr, hv, hn, 0)
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
            stale += _freeze(ccls, cmin, links, wts, sw, mult, unlimited, rate, wsum, cnt, used,
                             ver, frozen)
        else:
            hn -= 1                         # pop lres
            hl[0] = hl[hn]
            hr[0] = hr[hn]
            hv[0] = hv[hn]
            _sift(hl, hr, hv, hn, 0)
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


def _sift(hl, hr, hv, n, i):
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


def _count(act, links, wts, sw, mult, ccap, nres, unlimited, watch, info, wsum, cnt, used,
           frozen, vis, zero):
    """First pass of an index build: per resource the demand (``wsum``: sum of mult x
    weight), its classes (``cnt``) and their load at their caps (``used``), in the order of
    ``act``; the classes visiting a watched resource (``vis``) and those crossing no
    limited resource (``zero``), and the most limited resources of a class (``info``).
    Returns whether every class has a cap."""
    for r in range(nres):
        wsum[r] = 0.0
        cnt[r] = 0
        used[r] = 0.0
    all_capped = True
    most = 0
    nv = 0
    n0 = 0
    for i in range(len(act)):
        c = act[i]
        frozen[c] = False
        m = mult[c]
        cp = ccap[c]
        if cp == INF:
            all_capped = False
        n_lim = 0
        seen = False
        for j in range(sw[c]):
            r = links[c][j]
            if r < 0:
                break
            if watch[r]:
                seen = True
            if unlimited[r]:
                continue
            dw = m * wts[c][j]
            wsum[r] += dw
            cnt[r] += 1
            used[r] += dw * cp
            n_lim += 1
        if seen:
            vis[nv] = c
            nv += 1
        if n_lim == 0:
            zero[n0] = c
            n0 += 1
        elif n_lim > most:
            most = n_lim
    info[N_VIS] = nv
    info[N_ZERO] = n0
    info[MOST] = most
    return all_capped


def _sort(act, links, wts, sw, mult, nres, unlimited, info, cnt, ver, ptr, frozen, left,
          slot_cls, slot_dw, slot_blk, blk_res, blk_dw):
    """Second pass of an index build: resource -> its classes in the order of ``act``
    (counting sort), with what freezing them needs, copied into slot order.

    Memory layout (speed only). A resource's classes are frozen in the order of its slots,
    which is not the order of their rows: reading each class's row there would cost cache
    misses in half a dozen arrays. Slot k holds its class (``slot_cls``), its resource's
    mult x weight (``slot_dw``, for ``_prune``'s sums) and a block of (resource, mult x
    weight) entries (``blk_res``, ``blk_dw``, ended by -1 if shorter than the block). With
    at most 3 limited resources per class, each slot has a block of its own at k x width,
    of the class's other resources, read in sequence (the slot's own resource is full once
    popped and never read again); with more, the slots of a class share one block of all
    its resources at ``slot_blk[k]``, as a copy per slot would cost too much memory. Either
    way a freeze runs the same floating-point operations in the same order as one from the
    class's row. Returns 0, or 2 if the scratch is too small (``info``: the sizes needed)."""
    ptr[0] = 0
    for r in range(nres):
        ptr[r + 1] = ptr[r] + cnt[r]
    most = info[MOST]
    own = most <= 3
    bw = most - 1 if own else most
    need_blk = ptr[nres] * bw if own else left * bw
    if ptr[nres] > len(slot_cls) or need_blk > len(blk_res):
        info[NEED_SLOTS] = ptr[nres]
        info[NEED_BLOCKS] = need_blk
        return 2
    info[OWN] = 1 if own else 0
    fill_at = ver                           # scratch reuse: next free slot per resource
    for r in range(nres):
        fill_at[r] = ptr[r]
    nb = 0                                  # next free block entry (shared blocks)
    for i in range(len(act)):
        c = act[i]
        if frozen[c]:
            continue
        m = mult[c]
        for j in range(sw[c]):
            r = links[c][j]
            if r < 0:
                break
            if unlimited[r]:
                continue
            k = fill_at[r]
            fill_at[r] = k + 1
            slot_cls[k] = c
            slot_dw[k] = m * wts[c][j]
            if own:
                b = k * bw
                t = 0
                for j2 in range(sw[c]):
                    r2 = links[c][j2]
                    if r2 < 0:
                        break
                    if j2 == j or unlimited[r2]:
                        continue
                    blk_res[b + t] = r2
                    blk_dw[b + t] = m * wts[c][j2]
                    t += 1
                if t < bw:
                    blk_res[b + t] = -1
            else:
                slot_blk[k] = nb
        if not own:
            t = 0
            for j in range(sw[c]):
                r = links[c][j]
                if r < 0:
                    break
                if unlimited[r]:
                    continue
                blk_res[nb + t] = r
                blk_dw[nb + t] = m * wts[c][j]
                t += 1
            if t < bw:
                blk_res[nb + t] = -1
            nb += bw
    return 0


def _prune(act, ccap, nres, info, wsum, cnt, used, ptr, frozen, vis, zero,
           slot_cls, slot_dw, slot_blk, blk_res, blk_dw):
    """Reuse the index for ``act`` when only classes have left since it was built: sum the
    demands over the classes that remain, as ``_count`` does, in the same order. The slots
    of classes that left stay where they are (marked by ``frozen``, which the fills skip)
    until they are more than ``1/PRUNE_SLACK`` of the live ones; then the lists are
    compacted (they keep their order). A solve of a large run drops a few classes of
    ~10^6: moving every slot each time cost more than summing them. Returns whether every
    class has a cap."""
    for c in range(len(frozen)):
        frozen[c] = True                    # left (not in act)
    all_capped = True
    for i in range(len(act)):
        c = act[i]
        frozen[c] = False
        if ccap[c] == INF:
            all_capped = False
    nv = 0
    for i in range(info[N_VIS]):
        c = vis[i]
        if not frozen[c]:
            vis[nv] = c
            nv += 1
    info[N_VIS] = nv
    n0 = 0
    for i in range(info[N_ZERO]):
        c = zero[i]
        if not frozen[c]:
            zero[n0] = c
            n0 += 1
    info[N_ZERO] = n0
    live = 0
    for r in range(nres):
        ws = 0.0
        n = 0
        u = 0.0
        for k in range(ptr[r], ptr[r + 1]):
            c = slot_cls[k]
            if frozen[c]:
                continue
            dw = slot_dw[k]
            ws += dw
            n += 1
            if all_capped:
                u += dw * ccap[c]
        wsum[r] = ws
        cnt[r] = n
        used[r] = u
        live += n
    if (ptr[nres] - live) * PRUNE_SLACK <= live:
        return all_capped
    own = info[OWN] == 1
    bw = info[MOST] - 1 if own else info[MOST]
    q = 0
    start = ptr[0]
    for r in range(nres):
        end = ptr[r + 1]
        ptr[r] = q
        for k in range(start, end):
            c = slot_cls[k]
            if frozen[c]:
                continue
            if q != k:
                slot_cls[q] = c
                slot_dw[q] = slot_dw[k]
                if own:
                    for t in range(bw):
                        blk_res[q * bw + t] = blk_res[k * bw + t]
                        blk_dw[q * bw + t] = blk_dw[k * bw + t]
                else:
                    slot_blk[q] = slot_blk[k]
            q += 1
        start = end
    ptr[nres] = q
    return all_capped


def _freeze(c, x, links, wts, sw, mult, unlimited, rate, wsum, cnt, used, ver, frozen):
    """Freeze class c at rate x from its row (a class reaching its cap; see ``_fill``).
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


def _rates(act, links, wts, sw, mult, ccap, res_cap, fcfs, any_fcfs, skip, rate, res_rate, gen,
           unl, cap2, factor, info, wsum, cnt, used, ver, ptr, hl, hr, hv, frozen, vis, zero,
           slot_cls, slot_dw, slot_blk, blk_res, blk_dw):
    """Rates of the classes ``act`` into ``rate`` and the load per resource into
    ``res_rate`` (both policies, see the module docstring). ``skip[r]``: resource r cannot
    fill whatever the rates (its users are covered by other resources that fill first,
    ``simnode.engine.share.Share.cover``), so it is left out of the fills; ``sw[c]``: how
    many of class c's resources (from the left of its row) the fills visit, all of them
    but skipped ones moved to the end of the row (``_load`` visits every one). ``gen``:
    the index of the first fill is reused while it is unchanged (``_fill``; -1: never).
    The rest are scratch (``scratch``). Returns 0; 1 if a class is bounded by nothing; 2
    if the scratch is too small (``solve`` grows it and calls again)."""
    nres = len(res_cap)
    if not any_fcfs:
        err = _fill(act, links, wts, sw, mult, ccap, res_cap, skip, fcfs, rate, gen, 1,
                    info, wsum, cnt, used, ver, ptr, hl, hr, hv, frozen, vis, zero,
                    slot_cls, slot_dw, slot_blk, blk_res, blk_dw)
    else:
        # offered rates: FCFS resources unlimited
        for r in range(nres):
            unl[r] = fcfs[r] or skip[r]
        err = _fill(act, links, wts, sw, mult, ccap, res_cap, unl, fcfs, rate, gen, 1,
                    info, wsum, cnt, used, ver, ptr, hl, hr, hv, frozen, vis, zero,
                    slot_cls, slot_dw, slot_blk, blk_res, blk_dw)
        if err:
            return err
        _load_fcfs(vis, info[N_VIS], links, wts, sw, mult, rate, res_rate, fcfs)
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
            err = _fill(act, links, wts, sw, mult, cap2, res_cap, skip, fcfs, rate, gen, 2,
                        info, wsum, cnt, used, ver, ptr, hl, hr, hv, frozen, vis, zero,
                        slot_cls, slot_dw, slot_blk, blk_res, blk_dw)
    if err:
        return err
    _load(act, links, wts, mult, rate, res_rate)
    return 0


def _load_fcfs(vis, nv, links, wts, sw, mult, rate, res_rate, fcfs):
    """``_load`` of the FCFS resources only (others 0), over the resources the fills visit
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


def _load(act, links, wts, mult, rate, res_rate):
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


# -- small problems ----------------------------------------------------------------------------
def small_rates(act, links, wts, ccap, res_cap, rate, res_rate) -> int:
    """``_rates`` for a few classes (multiplicity 1, no FCFS or skipped resource), interpreted:
    the same progressive filling, the same floating-point operations in the same order, so
    the same rates to the bit, without building ``_fill``'s index (which, for a chip's
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
    _load(act, links, wts, _ONES, rate, res_rate)
    return 0


class _Ones:
    """mult[c] = 1.0 for every class."""

    def __getitem__(self, _c):
        return 1.0


_ONES = _Ones()


# -- large problems, interpreted: numpy, resources at one level together -------------------------
def vector_rates(act, links, wts, sw, mult, ccap, res_cap, fcfs, any_fcfs, skip, rate,
                 res_rate, block=None) -> int:
    """``_rates`` (without the index or scratch) for a large problem given as Python lists,
    with numpy: the same progressive filling and the same two fills for FCFS resources,
    but each step freezes at once every class whose cap is within reach (``REL_TOL``) and
    every resource whose fill level equals the lowest, and updates only the frozen classes'
    incidences (sums by ``np.bincount``). Not bit-identical to the sequential fill (its
    sums run in another order): equal to it up to floating-point rounding
    (tests/engine/test_maxmin.py: 1e-12 relative on random problems). Rows hold their
    resources first, then -1 pads only (as ``Share`` and ``max_min`` make them). ``block``:
    the rows and weights of the classes ``act`` as two [n, width] arrays (``links`` and
    ``wts`` are then not read; the same arrays as from those lists, so the same rates),
    ``act`` then being consecutive rows (``Share``'s block of one group, ``_lazy_block``).
    Returns 0, or 1 if a class is bounded by nothing."""
    import numpy as np
    from itertools import chain
    from operator import itemgetter
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
        got = _vfill(n, cls, res, dw, cp, cap_r, visit & ~skip_r[res])
        if got is None:
            return 1
    else:
        fcfs_r = np.array(fcfs, dtype=np.bool_)
        got = _vfill(n, cls, res, dw, cp, cap_r, visit & ~(fcfs_r | skip_r)[res])
        if got is None:
            return 1
        sel = visit & fcfs_r[res]           # offered load on FCFS resources (``_load_fcfs``)
        offered = np.bincount(res[sel], w[sel] * (m * got)[cls[sel]], nres)
        over = fcfs_r & (offered > cap_r * (1.0 + REL_TOL))
        if over.any():
            factor = np.ones(nres)
            factor[over] = cap_r[over] / offered[over]
            f = np.ones(n)
            np.minimum.at(f, cls, factor[res])
            cap2 = np.where((f < 1.0) & (got * f < cp), got * f, cp)
            got = _vfill(n, cls, res, dw, cap2, cap_r, visit & ~skip_r[res])
            if got is None:
                return 1
    if block is not None:
        rate[a0:a0 + n] = got.tolist()
    else:
        for c, x in zip(act, got.tolist()):
            rate[c] = x
    res_rate[:] = np.bincount(res, w * (m * got)[cls], nres).tolist()   # ``_load``
    return 0


def _vfill(n, cls, res, dw, cp, cap_r, keep):
    """``_fill`` of ``vector_rates``: rates of classes 0..n-1 (incidences ``cls``, ``res``
    with demand ``dw`` = mult x weight, grouped by class), caps ``cp``, resources
    only the incidences ``keep`` filled (others: unlimited, skipped or past the row's
    ``sw``); None if a class is bounded by nothing."""
    import numpy as np
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
            mark[rcls[_ranges(a, b)]] = True
            cs = np.flatnonzero(mark & ~frozen)
            x = np.full(cs.shape[0], lmin)
        frozen[cs] = True
        rate[cs] = x
        left -= cs.shape[0]
        inc = _ranges(cptr[cs], cptr[cs + 1])
        r = ir[inc]
        d = idw[inc]
        used += np.bincount(r, d * np.repeat(x, ninc[cs]), nres)
        wsum -= np.bincount(r, d, nres)
        cnt -= np.bincount(r, minlength=nres)
    return rate


def _ranges(a, b):
    """The indices of the ranges [a[i], b[i]) one after the other."""
    import numpy as np
    ln = b - a
    tot = int(ln.sum())
    if tot == 0:
        return np.zeros(0, dtype=np.int64)
    start = np.repeat(a - (np.cumsum(ln) - ln), ln)
    return start + np.arange(tot)


# -- scratch and the driver ------------------------------------------------------------------
def scratch(nres: int, rows: int, slots: int = 0, blocks: int = 0, arrays: bool = False) -> tuple:
    """Scratch buffers of ``_rates`` (its arguments from ``unl`` on) for ``nres`` resources,
    ``rows`` class rows, ``slots`` incidences and ``blocks`` block entries (``solve`` grows
    the last two when a fill needs more); numpy arrays for the compiled form, else lists.
    They hold the fills' index between solves: keep them for the next one."""
    slots, blocks = max(1, slots), max(1, blocks)
    if arrays:
        import numpy as np
        z, i32, i64, b8 = np.zeros, np.int32, np.int64, np.bool_
        # class and resource ids of the index in int32: prunes and fills stream them
        return (z(nres, dtype=b8), z(rows), z(nres), np.full(INFO_LEN, -1, dtype=i64),
                z(nres), z(nres, dtype=i64), z(nres), z(nres, dtype=i64), z(nres + 1, dtype=i64),
                z(nres), z(nres, dtype=i64), z(nres, dtype=i64),
                z(rows, dtype=b8), z(rows, dtype=i64), z(rows, dtype=i64),
                z(slots, dtype=i32), z(slots), z(slots, dtype=i64), z(blocks, dtype=i32),
                z(blocks))
    return ([False] * nres, [0.0] * rows, [0.0] * nres, [-1] * INFO_LEN,
            [0.0] * nres, [0] * nres, [0.0] * nres, [0] * nres, [0] * (nres + 1),
            [0.0] * nres, [0] * nres, [0] * nres,
            [False] * rows, [0] * rows, [0] * rows,
            [0] * slots, [0.0] * slots, [0] * slots, [0] * blocks, [0.0] * blocks)


def solve(fn, problem: tuple, s: tuple, arrays: bool) -> tuple[int, tuple]:
    """``fn(*problem, *s)`` (``_rates`` or its compiled form), growing the scratch ``s``
    while a fill asks for more; returns (0 or 1 as ``_rates``, the scratch to keep)."""
    while True:
        err = fn(*problem, *s)
        if err != 2:
            return err, s
        info = s[3]
        slots = max(int(info[NEED_SLOTS]), len(s[SLOTS]))
        blocks = max(int(info[NEED_BLOCKS]), len(s[BLOCKS]))
        nres, rows = len(s[0]), len(s[1])
        s = info = None             # freed before the larger buffers are made (memory peak)
        # room to grow: a fill that needs more asks again, each time for at least 1/4 more
        s = scratch(nres, rows, slots + slots // 4, blocks + blocks // 4, arrays)


# -- the compiled form -----------------------------------------------------------------------
def compiled():
    """``_rates`` compiled with numba (cached on disk; ``simnode.engine.jit``), or None if
    numba is not installed."""
    from simnode.engine.jit import compile_functions
    fns = compile_functions((_freeze, _sift, _count, _sort, _prune, _load, _load_fcfs, _fill,
                             _rates),
                            {"INF": INF, "REL_TOL": REL_TOL, "N_VIS": N_VIS, "N_ZERO": N_ZERO,
                             "MOST": MOST, "OWN": OWN, "GEN": GEN, "KIND": KIND,
                             "NEED_SLOTS": NEED_SLOTS, "NEED_BLOCKS": NEED_BLOCKS,
                             "PRUNE_SLACK": PRUNE_SLACK})
    return fns["_rates"] if fns else None


# -- convenience for tests and one-off solves ---------------------------------------------------
def max_min(links, capacity, cap=None, weights=None, mult=None, fcfs=None, use_compiled=False,
            skip=None, vector=False):
    """Rates (list) of the classes in ``links`` (rows of resource ids, -1 padded). ``cap``,
    ``weights`` (like ``links``), ``mult`` (per class), ``fcfs`` and ``skip`` (per
    resource) default to uncapped, 1, 1, all False and all False. ``use_compiled``: run
    the numba form; ``vector``: ``vector_rates`` (for tests)."""
    import numpy as np
    n = len(links)
    nres = len(capacity)
    width = max((len(r) for r in links), default=1) or 1
    rows = [tuple(r) + (-1,) * (width - len(r)) for r in links]
    wts = [tuple(float(x) for x in w) + (0.0,) * (width - len(w)) for w in weights] if weights \
        else [(1.0,) * width for _ in range(n)]
    mult = [float(x) for x in mult] if mult is not None else [1.0] * n
    cap = [float(x) for x in cap] if cap is not None else [INF] * n
    fcfs = [bool(x) for x in fcfs] if fcfs is not None else [False] * nres
    res_cap = [float(x) for x in capacity]
    skip = [bool(x) for x in skip] if skip is not None else [False] * nres
    if any(skip):                           # skipped resources to the end of each row
        rows = [tuple([r for r in row if r >= 0 and not skip[r]]
                      + [r for r in row if r >= 0 and skip[r]] + [r for r in row if r < 0])
                for row in rows]
        wts = [tuple([w for r, w in zip(row, wr) if r >= 0 and not skip[r]]
                     + [w for r, w in zip(row, wr) if r >= 0 and skip[r]]
                     + [w for r, w in zip(row, wr) if r < 0])
               for row, wr in zip([tuple(r) + (-1,) * (width - len(r)) for r in links], wts)]
    sw = [sum(1 for r in row if r >= 0 and not skip[r]) for row in rows]
    if vector:
        rate = [0.0] * n
        err = vector_rates(list(range(n)), rows, wts, sw, mult, cap, res_cap, fcfs, any(fcfs),
                           skip, rate, [0.0] * nres)
    elif use_compiled:
        fn = compiled()
        if fn is None:
            raise RuntimeError("numba is not installed")
        rate = np.zeros(n)
        problem = (np.arange(n, dtype=np.int64), np.array(rows, dtype=np.int64).reshape(n, width),
                   np.array(wts, dtype=float).reshape(n, width), np.array(sw, dtype=np.int64),
                   np.array(mult), np.array(cap),
                   np.array(res_cap), np.array(fcfs, dtype=np.bool_), any(fcfs),
                   np.array(skip, dtype=np.bool_), rate, np.zeros(nres), -1)
        err, _ = solve(fn, problem, scratch(nres, n, arrays=True), True)
        rate = rate.tolist()
    else:
        rate = [0.0] * n
        problem = (list(range(n)), rows, wts, sw, mult, cap, res_cap, fcfs, any(fcfs),
                   skip, rate, [0.0] * nres, -1)
        err, _ = solve(_rates, problem, scratch(nres, n), False)
    if err:
        raise ValueError("unbounded rates: a class crosses no limited resource and has no cap")
    return rate
