"""Bursts of GM reads: the reduced form of a gather.

A pipe that issues reads back to back (each the moment the previous one finished streaming:
the MTE2 queue has a free slot and each read streams at least its issue interval) keeps one
transfer of one class (its cap, L2) in the share from the first read to the last when they
all hit: the fluid share sees the same thing whether the reads come one by one or as one
transfer of their bytes. So such a run is started as one transfer (a KV gather: 16
descriptors). Its L2 lookups happen at its start rather than at each read's own start (a few
hundred ns later). A run with a region not in L2 then goes read by read, since which pipe
takes a miss depends on when each looks. With every region present, each lookup hits
whenever it happens unless an eviction reaches the region within the burst, which needs the
region at the LRU end of a thrashing L2; the LRU order differs only in the run's regions
turning recent a little earlier. ``ChipSim(gm_bursts=False)``: always read by read (the
detailed form). tests/hardware/test_bursts.py: the two agree to rounding on the sparse MLA
prefill and on contended hand-built runs (L2 not full), and within 0.1% of the makespan with
an L2 that thrashes.

``burst_len`` finds how many reads may go as one, ``burst_hits`` looks their regions up in L2
and ``burst_start`` starts the burst of a single core (``simnode.hardware.lockstep.burst``:
of a lock-step group).
"""

from __future__ import annotations

import math

from simnode.hardware.pipes import COPY

#: shorter runs of reads go read by read: a GEMM's only runs are its A, B pairs, which never
#: all hit (B is a first touch of the core), and trying them cost it ~8% of its run time
#: (``ChipSim._issue`` tests the next three ops for copies before it asks ``burst_len``)
MIN_BURST = 4


def burst_len(ops, i, n, path, size, t, inflight, limit) -> int:
    """How many reads from ``ops[i]`` on (same path and size, each after the previous) to
    stream as one burst if the first issues at ``t`` (``inflight``: the pipe's outstanding
    requests' completions, ascending; ``limit``: how many it may have); 1: none."""
    stream = size / path.bw
    if stream < path.ii:
        return 1                            # the issue interval would leave gaps between them
    j = i + 1
    while j < n:
        o = ops[j]
        if o[0] != COPY or o[2] is not path or o[3] != size:
            break
        j += 1
    m = j - i
    if m < MIN_BURST:
        return 1
    # read k issues no earlier than t + k x stream and finds at most the older requests
    # still in flight then plus the k before it (facts 1.4, S1: the outstanding limit).
    # Below k = limit - (requests in flight now) no read can find the queue full, so the
    # walk starts there (its pointer, monotone in k, lands where the walk from k = 1 would)
    q, ptr, left = inflight, 0, len(inflight)
    k0 = limit - left if limit - left > 1 else 1
    if k0 >= m:
        return m
    for k in range(k0, m):
        tk = t + k * stream
        while ptr < left and q[ptr] <= tk:
            ptr += 1
        if left - ptr + k >= limit:
            return k if k >= MIN_BURST else 1
    return m


def burst_start(sim, ops, i, m, path, size, p) -> int:
    """Start the ``m`` reads of pipe ``p`` from ``ops[i]`` on chip ``sim`` as one transfer at
    the cap each read would have and return ``m``, if every region they read is in L2
    (``burst_hits``); else start nothing and return what ``burst_hits`` returned."""
    got = burst_hits(sim.l2, ops, i, m, size)
    if got < 0:
        return got
    # the cap of an all-hit read as ``ChipSim._gm_regions`` computes it, so the burst is in
    # the same class as other pipes' single reads
    nreg = len(ops[i][1].regions)
    cap = path.bw * nreg / nreg if nreg else path.bw
    p.copy_end = -math.inf
    p.copy_parts = 1
    sim.share.start_cb(size * m, sim.res_hit, None, cap, sim.copy_done, p)
    return m


def burst_hits(l2, ops, i, m, size) -> float:
    """If every region the ``m`` reads from ``ops[i]`` read is in ``l2``, count each as a hit
    and return the bytes of one region (each read then hits); else change nothing and return
    -(d + 1), d: the first read (from ``ops[i]``) with a region not in L2. (Not the present
    reads before d alone: read d, a miss, would start at the burst's end, which rounds
    differently from the read-by-read end, and which pipe takes a miss can turn on that when
    two look at the same instant.)"""
    nreg = len(ops[i][1].regions)
    if nreg:
        keys = []
        for k in range(i, i + m):
            regions = ops[k][1].regions
            if len(regions) != nreg:
                return -(k - i + 1)         # the cap of a read depends on its regions
            keys.extend(regions)
        part = size / nreg
    else:
        keys = [ops[k][1].gm_key for k in range(i, i + m)]
        part = size
    n = l2.present(keys)
    if n < len(keys):
        return -(n // (nreg or 1) + 1)
    l2.hit(keys, part)
    return part
