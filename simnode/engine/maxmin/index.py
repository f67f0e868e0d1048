"""The index of the progressive fill (``simnode.engine.maxmin.fill``): each resource's classes.

A fill freezes a resource's classes together, so it needs, per resource, the list of its
classes with what freezing each costs the other resources it crosses. ``index_count`` and
``index_sort`` build that index (counting sort, in the order of the active classes);
``index_prune`` reuses it when only classes have left since. Like the fill, these are written
in the subset of Python that numba compiles (interpreted on lists, compiled on arrays).

``info`` is the small int scratch kept with the index (positions below): the sizes a fill
asked for, list lengths, the index's block layout, and which problem it was built for.
"""

from __future__ import annotations

import math

INF = math.inf
#: ``index_prune`` compacts the index once the slots of classes that left exceed
#: 1/PRUNE_SLACK of the live ones (speed only: the fills skip such slots, results are the same)
PRUNE_SLACK = 8
NEED_SLOTS, NEED_BLOCKS, N_VIS, N_ZERO, MOST, OWN, GEN, KIND = range(8)
INFO_LEN = 8


def index_count(act, links, wts, sw, mult, ccap, nres, unlimited, watch, info, wsum, cnt,
                used, frozen, vis, zero):
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


def index_sort(act, links, wts, sw, mult, nres, unlimited, info, cnt, ver, ptr, frozen, left,
               slot_cls, slot_dw, slot_blk, blk_res, blk_dw):
    """Second pass of an index build: resource -> its classes in the order of ``act``
    (counting sort), with what freezing them needs, copied into slot order.

    Memory layout (speed only). A resource's classes are frozen in the order of its slots,
    which is not the order of their rows: reading each class's row there would cost cache
    misses in half a dozen arrays. Slot k holds its class (``slot_cls``), its resource's
    mult x weight (``slot_dw``, for ``index_prune``'s sums) and a block of (resource, mult x
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
        n = 0                               # entries of its shared block (not own)
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
                blk_res[nb + n] = r
                blk_dw[nb + n] = slot_dw[k]
                n += 1
        if not own:
            if n < bw:
                blk_res[nb + n] = -1
            nb += bw
    return 0


def index_prune(act, ccap, nres, info, wsum, cnt, used, ptr, frozen, vis, zero,
                slot_cls, slot_dw, slot_blk, blk_res, blk_dw):
    """Reuse the index for ``act`` when only classes have left since it was built: sum the
    demands over the classes that remain, as ``index_count`` does, in the same order. The slots
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
    info[N_VIS] = keep_live(vis, info[N_VIS], frozen)
    info[N_ZERO] = keep_live(zero, info[N_ZERO], frozen)
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


def keep_live(ids, n, frozen):
    """Keep, in order, the classes of ``ids[:n]`` that are not ``frozen`` (left) at the front
    of ``ids``; returns how many."""
    k = 0
    for i in range(n):
        c = ids[i]
        if not frozen[c]:
            ids[k] = c
            k += 1
    return k
