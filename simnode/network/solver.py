"""Max-min fair rate allocation (progressive filling / water-filling) over flows x links.

``max_min_rates(flow_links, link_capacity, flow_cap, flow_weights)`` is the fast,
vectorized solver used by the flow network; ``max_min_rates_exact`` is a simple,
slow reference in exact rational arithmetic used to check it in tests.

Problem. Flow f has one rate x_f (bytes/ns). It crosses the links in row f of
``flow_links`` (link ids, padded with -1) and uses ``weight * x_f`` of each; link l
carries at most ``link_capacity[l]``; x_f <= ``flow_cap[f]`` (inf = uncapped). A flow
that stands for n identical transfers is one row with its weights multiplied by n
(its rate is then the rate of each member). The answer is the max-min fair vector:
all rates rise together; a flow stops when a link it crosses fills or it hits its cap.

Speed: one pass per distinct bottleneck level; per pass O(links) numpy work plus the
incidences of the flows frozen in it (found through a link-sorted incidence index),
and each link's fill level is updated only when one of its flows freezes: a solve
costs O(nnz + levels x links), with no Python loop over flows (EP128, ~6000 flow
classes over 288 links, ~180 levels: ~3.5 ms).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

REL_TOL = 1e-9      # links/caps within this relative distance of the level fill together


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
    # and the level at which it fills if all its unfrozen flows rise together (inf: none)
    wsum = np.bincount(li, weights=wi, minlength=num_links)
    ucount = np.bincount(li, minlength=num_links)
    used = np.zeros(num_links)
    lvl = np.full(num_links, np.inf)
    live = ucount > 0
    lvl[live] = capacity[live] / wsum[live]
    frozen = ~valid.any(axis=1)                     # flows without links: their cap only
    rate[frozen] = cap[frozen]
    # link-sorted incidences: flows crossing link l are by_link_flow[ptr[l]:ptr[l+1]]
    key = li.astype(np.uint16) if num_links < 65536 else li     # uint16 sorts by radix
    by_link_flow = fi[np.argsort(key, kind="stable")]
    ptr = np.zeros(num_links + 1, dtype=np.int64)
    np.cumsum(ucount, out=ptr[1:])
    srt = np.sort(flow_links, axis=1)
    dup_rows = bool(((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)).any())
    stamp = np.zeros(num_flows, dtype=np.int64)     # scratch for de-duplicating flow ids
    capped = np.flatnonzero(np.isfinite(cap) & ~frozen)
    capped = capped[np.argsort(cap[capped], kind="stable")]     # consumed by pointer cp
    ncap, cp = capped.size, 0
    level = 0.0
    n_left = int(num_flows - frozen.sum())
    while n_left > 0:
        link_min = lvl.min()
        while cp < ncap and frozen[capped[cp]]:
            cp += 1
        cap_min = cap[capped[cp]] if cp < ncap else np.inf
        new_level = min(link_min, cap_min)
        if new_level == np.inf:
            raise ValueError("unbounded rates: a flow crosses no link with finite capacity")
        level = max(level, new_level)               # levels never fall (float guard)
        threshold = level * (1 + REL_TOL)
        cand, multi = None, dup_rows
        if link_min <= threshold:                   # saturated links freeze their flows
            sat = np.flatnonzero(lvl <= threshold)
            if sat.size == 1:
                cand = by_link_flow[ptr[sat[0]]:ptr[sat[0] + 1]]
            else:
                multi = True
                starts = ptr[sat]
                lengths = ptr[sat + 1] - starts
                offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
                cand = by_link_flow[offsets + np.arange(offsets.size)]
            lvl[sat] = np.inf
        if cap_min <= threshold:                    # flows at their cap freeze too
            hi = cp
            while hi < ncap and cap[capped[hi]] <= threshold:
                hi += 1
            multi = multi or cand is not None
            cand = capped[cp:hi] if cand is None else np.concatenate((cand, capped[cp:hi]))
            cp = hi
        newly = cand[~frozen[cand]]
        if multi and newly.size > 1:
            idx = np.arange(newly.size)
            stamp[newly] = idx
            newly = newly[stamp[newly] == idx]
        if newly.size == 0:
            continue
        frozen[newly] = True
        n_left -= newly.size
        rows, w_rows = flow_links[newly], w2d[newly]
        if dense:
            links_of, w_of = rows.ravel(), w_rows.ravel()
        else:
            m = rows >= 0
            links_of, w_of = rows[m], w_rows[m]
        if ncap:                                    # capped flows may stop below the level
            r = np.minimum(level, cap[newly])
            rate[newly] = r
            r_of = np.repeat(r, width) if dense else np.broadcast_to(r[:, None], rows.shape)[m]
            np.add.at(used, links_of, w_of * r_of)
        else:
            rate[newly] = level
            np.add.at(used, links_of, w_of * level)
        np.subtract.at(wsum, links_of, w_of)
        np.subtract.at(ucount, links_of, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lvl[links_of] = np.where(ucount[links_of] > 0,
                                     np.maximum(capacity[links_of] - used[links_of], 0.0)
                                     / wsum[links_of], np.inf)
    return rate


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
