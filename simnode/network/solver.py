"""Max-min fair rate allocation (progressive filling / water-filling) over flows x links.

``max_min_rates(flow_links, link_capacity, flow_cap, flow_weights)`` is the fast,
vectorized solver used by the flow network (``fcfs_max_min_rates`` adds links that
serve first come, first served); ``max_min_rates_exact`` is a simple,
slow reference in exact rational arithmetic used to check it in tests.

Problem. Flow f has one rate x_f (bytes/ns). It crosses the links in row f of
``flow_links`` (link ids, padded with -1) and uses ``weight * x_f`` of each; link l
carries at most ``link_capacity[l]``; x_f <= ``flow_cap[f]`` (inf = uncapped). A flow
that stands for n identical transfers is one row with its weights multiplied by n
(its rate is then the rate of each member). The answer is the max-min fair vector:
all rates rise together; a flow stops when a link it crosses fills or it hits its cap.

Speed: each pass freezes the flows of every "ready" link among the lowest few (a
link whose fill level is the lowest of all links its flows cross, and below every
cap: nothing can change its level before it fills), so links that share no flow
fill in one pass; the lowest link is always ready. Per pass the work is O(links)
plus the incidences of the candidate links (found through a link-sorted index), and
a link's level is updated only when one of its flows freezes: no Python loop runs
over flows (EP128: ~5000 flow classes over 288 links in ~30 passes, ~2 ms).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

REL_TOL = 1e-9      # links/caps within this relative distance of the level fill together
CANDIDATES = 16     # lowest links tested for readiness per pass, at least (speed only;
                    # any value is exact); 1/32 of the live links if that is more


def max_min_rates(flow_links: np.ndarray, link_capacity: np.ndarray,
                  flow_cap: np.ndarray | None = None,
                  flow_weights: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates (bytes/ns) of the flows; see the module docstring.

    ``flow_links``: int array (flows, max links per flow), -1 padded. ``link_capacity``:
    GB/s (= bytes/ns) per link, > 0. ``flow_cap``: GB/s per flow, > 0, inf for none.
    ``flow_weights``: same shape as ``flow_links``, > 0 where a link is listed (default 1).
    A flow with no links gets its cap (inf if uncapped).
    """
    flow_links = np.asarray(flow_links)
    if flow_links.ndim != 2:
        raise ValueError("flow_links must be a 2-D (flows, links per flow) array")
    num_flows, width = flow_links.shape
    capacity = np.asarray(link_capacity, dtype=float)
    num_links = capacity.shape[0]
    cap = np.full(num_flows, np.inf) if flow_cap is None else np.asarray(flow_cap, dtype=float)
    rate = np.empty(num_flows)
    if num_flows == 0:
        return rate
    valid = flow_links >= 0
    dense = bool(valid.all())                       # no padding: skip the masks below
    w2d = np.ones(flow_links.shape) if flow_weights is None else np.asarray(flow_weights, float)
    fi, slot = np.nonzero(valid)                    # incidences, flow-major
    li, wi = flow_links[fi, slot], w2d[fi, slot]
    # per link: weighted demand and count of unfrozen flows, capacity used by frozen ones,
    # and lvl = the level at which it fills if its unfrozen flows rise together (inf: none;
    # lvl[num_links] = inf also serves the -1 padding of flow_links)
    wsum = np.bincount(li, weights=wi, minlength=num_links)
    ucount = np.bincount(li, minlength=num_links)
    used = np.zeros(num_links)
    lvl = np.full(num_links + 1, np.inf)
    live = np.flatnonzero(ucount)
    lvl[live] = capacity[live] / wsum[live]
    links_lvl = lvl[:num_links]                     # a view
    frozen = ~valid.any(axis=1)                     # flows without links: their cap only
    rate[frozen] = cap[frozen]
    # link-sorted incidences: flows crossing link l are by_link_flow[ptr[l]:ptr[l+1]]
    key = li.astype(np.uint16) if num_links < 65536 else li     # uint16 sorts by radix
    by_link_flow = fi[np.argsort(key, kind="stable")]
    ptr = np.zeros(num_links + 1, dtype=np.int64)
    np.cumsum(ucount, out=ptr[1:])
    stamp = np.zeros(num_flows, dtype=np.int64)     # scratch for de-duplicating flow ids
    capped = np.flatnonzero(np.isfinite(cap) & ~frozen)
    capped = capped[np.argsort(cap[capped], kind="stable")]     # consumed by pointer cp
    ncap, cp = capped.size, 0
    n_left = int(num_flows - frozen.sum())
    while n_left > 0:
        link_min = links_lvl.min()
        while cp < ncap and frozen[capped[cp]]:
            cp += 1
        cap_min = cap[capped[cp]] if cp < ncap else np.inf
        if link_min == np.inf and cap_min == np.inf:
            raise ValueError("unbounded rates: a flow crosses no link with finite capacity")
        if cap_min <= link_min * (1 + REL_TOL):
            # caps below every link's fill level: those flows stop at their cap
            hi = cp
            while hi < ncap and cap[capped[hi]] <= link_min * (1 + REL_TOL):
                hi += 1
            newly = capped[cp:hi]
            newly = newly[~frozen[newly]]
            cp = hi
            r = cap[newly]
        else:
            newly, r = _freeze_ready_links(flow_links, links_lvl, lvl, cap_min, by_link_flow,
                                           ptr, frozen, stamp, width)
        frozen[newly] = True
        rate[newly] = r
        n_left -= newly.size
        rows, w_rows = flow_links[newly], w2d[newly]
        if dense:
            links_of, w_of, r_of = rows.ravel(), w_rows.ravel(), np.repeat(r, width)
        else:
            m = rows >= 0
            links_of, w_of = rows[m], w_rows[m]
            r_of = np.broadcast_to(r[:, None], rows.shape)[m]
        np.add.at(used, links_of, w_of * r_of)
        np.subtract.at(wsum, links_of, w_of)
        np.subtract.at(ucount, links_of, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lvl[links_of] = np.where(ucount[links_of] > 0,
                                     np.maximum(capacity[links_of] - used[links_of], 0.0)
                                     / wsum[links_of], np.inf)
    return rate


def fcfs_max_min_rates(flow_links: np.ndarray, link_capacity: np.ndarray, fcfs: np.ndarray,
                       flow_cap: np.ndarray | None = None,
                       flow_weights: np.ndarray | None = None) -> np.ndarray:
    """Rates when the links marked in ``fcfs`` serve first come, first served: an
    overloaded FCFS link gives each flow a share in proportion to the rate it offers.

    Offered rates are the max-min rates with FCFS links unlimited (so every flow must
    also cross a non-FCFS link or have a cap). Each overloaded FCFS link scales its
    flows' offered rates down to fit (by its capacity / its offered load; a flow on two
    takes the smaller factor), and these become caps of a second max-min solve under the
    real capacities, which therefore never over-uses a link. One scaling pass: an
    approximation of the FCFS fixed point. Without overload this is ``max_min_rates``.
    """
    flow_links = np.asarray(flow_links)
    capacity = np.asarray(link_capacity, dtype=float)
    fcfs = np.asarray(fcfs, dtype=bool)
    num_flows = flow_links.shape[0]
    cap = np.full(num_flows, np.inf) if flow_cap is None else np.asarray(flow_cap, dtype=float)
    w2d = np.ones(flow_links.shape) if flow_weights is None else np.asarray(flow_weights, float)
    if num_flows == 0 or not fcfs.any():
        return max_min_rates(flow_links, capacity, cap, w2d)
    offered = max_min_rates(flow_links, np.where(fcfs, np.inf, capacity), cap, w2d)
    valid = flow_links >= 0
    load = np.bincount(flow_links[valid], weights=(w2d * offered[:, None])[valid],
                       minlength=capacity.shape[0])
    over = fcfs & (load > capacity * (1 + REL_TOL))
    if not over.any():
        return offered
    scale = np.ones(capacity.shape[0] + 1)          # scale[-1] serves the -1 padding
    scale[:-1][over] = capacity[over] / load[over]
    factor = scale[flow_links].min(axis=1)
    return max_min_rates(flow_links, capacity,
                         np.where(factor < 1.0, np.minimum(cap, offered * factor), cap), w2d)


def _freeze_ready_links(flow_links, links_lvl, lvl, cap_min, by_link_flow, ptr, frozen,
                        stamp, width):
    """Flows to freeze on the 'ready' links among the lowest few, and their rates.

    A link is ready when it has the lowest fill level of every link its unfrozen flows
    cross, and that level is below every cap: then nothing can change its level before
    it fills, so its flows freeze at its level. The lowest link is always ready; links
    whose flows do not meet fill in the same pass. Sets ready links' levels to inf.
    """
    live = int(np.count_nonzero(links_lvl < np.inf))
    k = max(CANDIDATES, live // 32)
    if live > k:
        cand = np.argpartition(links_lvl, k)[:k]
    else:
        cand = np.flatnonzero(links_lvl < np.inf)
    cand = cand[links_lvl[cand] * (1 + REL_TOL) < cap_min]
    starts = ptr[cand]
    lengths = ptr[cand + 1] - starts
    seg = np.repeat(np.arange(cand.size), lengths)          # candidate index per incidence
    flows = by_link_flow[np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
                         + np.arange(seg.size)]
    um = ~frozen[flows]
    flows, seg = flows[um], seg[um]
    lv_rows = lvl[flow_links[flows]]
    lowest = lv_rows[:, 0]
    for j in range(1, width):                              # (faster than .min(axis=1))
        lowest = np.minimum(lowest, lv_rows[:, j])
    lv = links_lvl[cand]
    blocked = lowest * (1 + REL_TOL) < lv[seg]
    ready = np.bincount(seg, weights=blocked, minlength=cand.size) == 0
    take = ready[seg]
    newly, r = flows[take], lv[seg[take]]
    if newly.size > 1:                  # a flow on two ready links of equal level: once
        idx = np.arange(newly.size)
        stamp[newly] = idx
        keep = stamp[newly] == idx
        newly, r = newly[keep], r[keep]
    links_lvl[cand[ready]] = np.inf
    return newly, r


def max_min_rates_exact(flow_links, link_capacity, flow_cap=None, flow_weights=None) -> list:
    """Reference progressive filling in exact rationals (slow; for tests).

    Same arguments as ``max_min_rates`` (numbers should be integers or Fractions for
    exactness); returns a list of Fractions (or ``inf`` for an uncapped linkless flow).
    """
    num_flows = len(flow_links)
    flows = [[l for l in row if l >= 0] for row in flow_links]
    weights = [[Fraction(1) if flow_weights is None else Fraction(flow_weights[f][j])
                for j, l in enumerate(flow_links[f]) if l >= 0] for f in range(num_flows)]
    cap = [None if flow_cap is None or flow_cap[f] == float("inf") else Fraction(flow_cap[f])
           for f in range(num_flows)]
    capacity = [Fraction(c) for c in link_capacity]
    rate: list = [None] * num_flows
    for f in range(num_flows):
        if not flows[f]:
            rate[f] = cap[f] if cap[f] is not None else float("inf")
    while any(r is None for r in rate):
        active = [f for f in range(num_flows) if rate[f] is None]
        used = [Fraction(0)] * len(capacity)
        demand = [Fraction(0)] * len(capacity)
        for f in range(num_flows):
            for l, w in zip(flows[f], weights[f]):
                if rate[f] is None:
                    demand[l] += w
                else:
                    used[l] += w * rate[f]
        shares = {l: (capacity[l] - used[l]) / demand[l] for l in range(len(capacity)) if demand[l]}
        level = min(list(shares.values()) + [cap[f] for f in active if cap[f] is not None])
        for f in active:
            if (cap[f] is not None and cap[f] == level) or any(
                    shares.get(l) == level for l in flows[f]):
                rate[f] = level
    return rate
