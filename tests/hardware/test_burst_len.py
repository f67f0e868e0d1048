"""``bursts.burst_len`` starts its walk over the MTE2 queue at the first read that could
find it full (k = limit - requests in flight); the reference here walks from the first read
(k = 1), the plain form of the walk. Both must give the same length for any queue."""

from __future__ import annotations

import random

from simnode.hardware.bursts import MIN_BURST, burst_len
from simnode.hardware.pipes import COPY, SET


def _reference(ops, i, n, path, size, t, inflight, limit) -> int:
    stream = size / path.bw
    if stream < path.ii:
        return 1
    j = i + 1
    while j < n:
        o = ops[j]
        if o[0] != COPY or o[2] is not path or o[3] != size:
            break
        j += 1
    m = j - i
    if m < MIN_BURST:
        return 1
    q, ptr, left = inflight, 0, len(inflight)
    for k in range(1, m):
        tk = t + k * stream
        while ptr < left and q[ptr] <= tk:
            ptr += 1
        if left - ptr + k >= limit:
            return k if k >= MIN_BURST else 1
    return m


class _P:
    bw, ii = 64.0, 0.5


def test_burst_len_equals_the_walk_from_the_first_read():
    rng = random.Random(5)
    path, other = _P(), _P()
    size = 256.0                                    # 4 ns a read
    seen = set()
    for _ in range(3000):
        run = rng.randint(1, 24)
        ops = [(COPY, None, path, size)] * run + [(SET, None)] * rng.randint(0, 1) \
            + [(COPY, None, other, size)]
        t = rng.uniform(0.0, 20.0)
        inflight = sorted(rng.uniform(t - 5.0, t + 80.0) for _ in range(rng.randint(0, 16)))
        limit = rng.choice([2, 4, 8, 16, 32])
        args = (ops, 0, len(ops), path, size, t, inflight, limit)
        got = burst_len(*args)
        assert got == _reference(*args)
        seen.add(got)
    assert 1 in seen and max(seen) >= 16 and len(seen) > 8   # short, long and cut-off runs
