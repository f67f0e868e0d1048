"""``ChipSim._burst_len`` starts its walk over the MTE2 queue at the first read that could
find it full (k = limit - requests in flight); the reference here walks from the first read
(k = 1), as it did before. Both must give the same length for any queue."""

from __future__ import annotations

import random

from simnode.hardware import chip as C
from simnode.hardware.chip import MIN_BURST, ChipSim


def _reference(ops, i, n, path, size, t, inflight, limit) -> int:
    stream = size / path.bw
    if stream < path.ii:
        return 1
    j = i + 1
    while j < n:
        o = ops[j]
        if o[0] != C._COPY or o[2] is not path or o[3] != size:
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


def test_burst_len_equals_the_walk_from_the_first_read(chip):
    sim = ChipSim(chip)
    rng = random.Random(5)
    path, other = _P(), _P()
    size = 256.0                                    # 4 ns a read
    seen = set()
    for _ in range(3000):
        run = rng.randint(1, 24)
        ops = [(C._COPY, None, path, size)] * run + [(C._SET, None)] * rng.randint(0, 1) \
            + [(C._COPY, None, other, size)]
        t = rng.uniform(0.0, 20.0)
        inflight = sorted(rng.uniform(t - 5.0, t + 80.0) for _ in range(rng.randint(0, 16)))
        limit = rng.choice([2, 4, 8, 16, 32])
        args = (ops, 0, len(ops), path, size, t, inflight, limit)
        got = sim._burst_len(*args)
        assert got == _reference(*args)
        seen.add(got)
    assert 1 in seen and max(seen) >= 16 and len(seen) > 8   # short, long and cut-off runs


def _reference_start(sim, ops, i, m, path, size):
    """``_burst_start``'s answer and the L2's hits as its former loop found them (one read at
    a time, in Python): m if all present (then hit), else -(first read with one absent + 1)."""
    nreg = len(ops[i][1].regions)
    if nreg:
        keys = []
        for k in range(i, i + m):
            regions = ops[k][1].regions
            if len(regions) != nreg:
                return -(k - i + 1)
            keys.extend(regions)
    else:
        keys = [ops[k][1].gm_key for k in range(i, i + m)]
    n = sim.l2.present(keys)
    if n < len(keys):
        return -(n // (nreg or 1) + 1)
    return m


class _Share:
    def __init__(self):
        self.started = []

    def start_cb(self, size, res, weights, cap, cb, p):
        self.started.append((size, cap))


def test_burst_start_finds_the_runs_the_former_loop_found(chip):
    from simnode.instr import isa
    rng = random.Random(7)
    path = _P()
    seen = set()
    for _ in range(2000):
        sim = ChipSim(chip)
        sim.share = _Share()
        present = {("kv", k) for k in range(40) if rng.random() < 0.9}
        for key in present:
            sim.l2.read(key, 64)
        two = rng.random() < 0.7
        m = rng.randint(MIN_BURST, 16)
        ops = []
        for _ in range(m + 2):
            if two:
                nreg = 2 if rng.random() < 0.97 else rng.choice([1, 3])
                rec = isa.Copy("gm_to_ub", 128, None, "normal", "KV gather2",
                               tuple(("kv", rng.randrange(40)) for _ in range(nreg)))
            else:
                rec = isa.Copy("gm_to_ub", 64, ("kv", rng.randrange(40)))
            ops.append((C._COPY, rec, path, rec.size_bytes))
        i = rng.randint(0, 2)
        size = ops[i][3]
        want = _reference_start(sim, ops, i, m, path, size)
        hits = sim.l2.hits
        got = sim._burst_start(ops, i, m, path, size, C._Pipe(0, "aiv0", "mte2", [], None, 1.0, 16, 0.0))
        assert got == want
        nreg = len(ops[i][1].regions) or 1
        assert sim.l2.hits - hits == (m * nreg if got == m else 0)
        assert sim.share.started == ([(size * m, path.bw)] if got == m else [])
        seen.add(got if got < 0 else "burst")
    assert "burst" in seen and len(seen) > 6
