"""The reduced form of a MoE layer's kernels at decode shapes: grouped GEMMs by block rows,
SwiGLU by rows per AIV, each with the burst shape of its loads.

``simnode.moe.profiles`` fits a grouped GEMM linear in waves of full blocks, which holds when
every block has BLOCK_M rows (the contiguous layout pads them so). At decode an expert holds a
few dozen rows: the masked and packed layouts give each block exactly its expert's rows, and
a wave of blocks of 16 rows costs less than one of 128 (the cube, the A loads) or the same
(the FP4 decode binds). So this form keys the cost by a block's rows: ``unit(r)`` per block
and ``fixed(r)`` per kernel, linear between knots ``BLOCK_ROW_KNOTS`` of the row count, each
knot fitted from two pipe-level runs of experts of exactly r rows (one and two waves, the
tiling pinned to the kernel's), blocks dealt to cores as the kernel deals them, the kernel's
time its busiest core's. Knots are made on demand and memoized per process.

A core's blocks are not a sum of units when their rows differ: its pipes overlap across
blocks (the AIVs decode the next block's weights while the cube multiplies this one), so a
block that binds the cube hides under blocks that bind the decode. Each knot also records,
per block, each pipe's busy time and its copies' stalls on the shared L2 and HBM (the same
runs), and a core's time is its busiest pipe's sum over its blocks plus each block's wait
beyond its busiest pipe (``core_ns``); the stalls, measured with every core loading, scale
with the share of cores still running beside a block (a partial last wave meets less
contention). Experts of even rows give the knots' units exactly.

Burst shape. A replayed kernel asks the HBM for its bytes; how it slows when the HBM is
shared depends on when its loads come, not only on how many bytes. A third pipe-level run per
knot, at half the HBM bandwidth, measures that: a kernel of time T alone, T_half at half the
bandwidth B and H bytes of HBM traffic loads in bursts separated by a gap with no loads of
``gap = T_half - H / (B/2)`` (0 if the half bandwidth does not bind, H / (B/2) < T): replayed as
its bytes at the rate they come when they come (over T - gap) and then the gap, it takes T
alone and T_half with half the HBM, as the pipe-level engine says. What makes the gap is the
kernel's own pipelining: S3's Dequant-B holds 2 UB slots per decoding AIV (``dequant_ub_
stages``), each from its load's start to its copy into L1, so when a load takes as long as a
decode the two alternate instead of overlapping; CANN's kernel holds 4 UB buffers per AIV and
shows almost no gap. tests/moe/test_profiles.py holds this form against full pipe-level runs at
4, 16, 64 and 256 rows per expert: within 2% alone, 5% with half the HBM.

SwiGLU at decode has fewer rows than AIVs, or a few per AIV: its time is that of the busiest
AIV's rows, not linear in all rows (``profiles.swiglu_profile`` fits 4..12 rows per AIV), so
``swiglu_segments`` fits it per row of the busiest AIV (at its rows and half of them: exact at
the kernel's size), alone and at half the HBM bandwidth, as a knot.

Pure (no SimPy); ``segments`` and ``swiglu_segments`` give what ``profiles.task`` replays.
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left
from dataclasses import dataclass, replace

from simnode.kernels.grouped_gemm import (GroupedGemmParams, expert_blocks, grouped_gemm_schedule,
                                          grouped_tiling)
from simnode.moe import profiles

#: block row counts at which a decode-shape grouped GEMM is profiled: the cost of a block is
#: flat while the decode or the cube's saturating m binds and grows with its rows after, so
#: the knots are dense where it bends (32..64) and sparse where it is linear (64..256: CANN's
#: kernel at 96 and 192 rows within 1% of the line between its knots)
BLOCK_ROW_KNOTS = (1, 16, 32, 48, 64, 128, 256)
#: a knot whose loads at half the HBM bandwidth would take less than this share of its time
#: alone cannot be bound by it: its half-bandwidth runs are skipped (its time is the same)
UNBOUND_SHARE = 0.75
#: segments a replayed kernel is cut into (its fixed part and its waves), as profiles'
MAX_SEGMENTS = 8
#: the pipe-level engine's spread between runs of one cube-bound kernel at full and at half
#: the HBM bandwidth, neither slower (CANN's kernel at 256 rows per expert: knots +2.5%, the
#: whole kernel -3%): a half-bandwidth slowdown smaller than this is not a burst shape
NOISE = 0.03

_MEMO: dict = {}
_KEYS: dict = {}                  # (id(chip), id(params)) -> (chip, params, key): kept alive


@dataclass(frozen=True)
class Knot:
    """The cost of blocks of ``rows`` rows: ``fixed_ns`` once per kernel and ``unit_ns`` per
    block on a core, alone and (``*_half_ns``) at half the HBM bandwidth; ``pipes`` (and
    ``pipes_half``): per block, the time each pipe of a core is busy and the time its copies
    stalled on the L2 and HBM every core shares, {(unit, pipe): (busy ns, stall ns)}
    (``core_ns``)."""
    rows: int
    fixed_ns: float
    unit_ns: float
    fixed_half_ns: float
    unit_half_ns: float
    pipes: dict = dataclasses.field(default_factory=dict, compare=False)
    pipes_half: dict = dataclasses.field(default_factory=dict, compare=False)

    def mix(self, other: "Knot", w: float, rows: int) -> "Knot":
        """The knot ``w`` of the way from this one to ``other``."""
        f = [a + w * (b - a) for a, b in zip(dataclasses.astuple(self)[1:5],
                                            dataclasses.astuple(other)[1:5])]
        zero = (0.0, 0.0)
        pipes = [{k: tuple(x + w * (y - x) for x, y in zip(a.get(k, zero), b.get(k, zero)))
                  for k in {*a, *b}}
                 for a, b in ((self.pipes, other.pipes), (self.pipes_half, other.pipes_half))]
        return Knot(rows, *f, *pipes)


def core_ns(knots: list, active=None, half: bool = False) -> float:
    """A core's time for its blocks (``knots``, one per block, in order) past the kernel's
    fixed part. A core's pipes overlap across its blocks: the AIVs decode (or MTE2 loads)
    the next block's weights while the cube multiplies this one's, so a block that binds the
    cube does not add to blocks that bind the decode. So each pipe's time adds up over the
    blocks and the busiest pipe's sum sets the core's time, plus each block's own wait beyond
    its busiest pipe (its unit less that, at the knot). A pipe's stalls on the shared L2 and
    HBM were measured with every core loading (the knot's waves are full); block j runs
    beside ``active[j]`` of them (a share), and its stalls scale with it. Blocks of one
    size, every core busy, give the knot's units exactly."""
    if not knots:
        return 0.0
    sums, rest = {}, 0.0
    for j, k in enumerate(knots):
        pipes = k.pipes_half if half else k.pipes
        unit = k.unit_half_ns if half else k.unit_ns
        share = 1.0 if active is None else active[j]
        top = 0.0
        for name, (busy, stall) in pipes.items():
            sums[name] = sums.get(name, 0.0) + busy + share * stall
            top = max(top, busy + stall)
        rest += unit - top
    return max(sums.values(), default=0.0) + rest


def pinned(chip, p: GroupedGemmParams) -> GroupedGemmParams:
    """``p`` with its tiling written out, so fit runs of other counts keep it."""
    t = grouped_tiling(chip, p)
    return replace(p, block_m=t.block_m, block_n=t.block_n, block_k=t.block_k,
                   l1_stages=t.l1_stages, num_cores=t.num_cores, max_m=0)


def _run(chip, p) -> tuple[float, float, dict]:
    """(makespan ns, HBM bytes, {(unit, pipe): busy + stalled ns, mean over the cores}) of
    ``p`` on the pipe-level engine."""
    from simnode.hardware.chip import ChipSim
    run = ChipSim(chip).run(grouped_gemm_schedule(chip, p))
    pipes: dict = {}
    for (_core, unit, pipe), st in run.pipe_stats.items():
        pipes.setdefault((unit, pipe), []).append((st.busy_ns, st.stall_ns))
    return run.makespan_ns, run.hbm_bytes, {
        k: tuple(sum(x) / len(v) for x in zip(*v)) for k, v in pipes.items()}


def _key(chip, p) -> tuple:
    """What a knot's runs depend on: the chip and the kernel but its counts (memoized by the
    chip's and the kernel's identity, as a rank's many lookups repeat them)."""
    key = (id(chip), id(p))
    if key not in _KEYS:
        _KEYS[key] = (chip, p, (repr(chip), replace(p, m_per_expert=())))
    return _KEYS[key][2]


def knot(chip, p: GroupedGemmParams, rows: int) -> Knot:
    """The knot at ``rows`` for ``p``'s kernel (``p`` pinned): experts of ``rows`` rows in
    one and two waves, alone and at half the HBM bandwidth (four pipe-level runs; two when
    half the bandwidth could not bind, ``UNBOUND_SHARE``)."""
    key = ("knot", _key(chip, p), rows)
    if key in _MEMO:
        return _MEMO[key]
    t = grouped_tiling(chip, replace(p, m_per_expert=(rows,)))
    per_expert = math.ceil(p.n / t.block_n)                  # blocks of one expert of <= BLOCK_M rows
    e1 = max(1, math.ceil(t.num_cores / per_expert))
    waves = [math.ceil(e * per_expert / t.num_cores) for e in (e1, 2 * e1)]
    fit, pipes, hbm = [], [], 0.0
    for c in (chip, profiles.half_hbm(chip)):
        if fit and hbm / c.memory.hbm_bandwidth_GBps < UNBOUND_SHARE * t2:
            fit += fit                      # half the bandwidth cannot bind: the same costs
            pipes += pipes
            break
        (t1, _, p1), (t2, hbm, p2) = (_run(c, replace(p, m_per_expert=(rows,) * e))
                                      for e in (e1, 2 * e1))
        unit = (t2 - t1) / (waves[1] - waves[0])
        fit += [t1 - waves[0] * unit, unit]
        pipes.append({name: tuple((b - a) / (waves[1] - waves[0])
                                  for a, b in zip(p1.get(name, (0.0, 0.0)), ns))
                      for name, ns in p2.items()})
    k = Knot(rows, *fit, *pipes)
    _MEMO[key] = k
    return k


def gap_share(chip, alone_ns: float, half_ns: float, hbm_bytes: float) -> float:
    """The share of a kernel's time with no loads (module docstring): what makes its replay
    at half the HBM bandwidth (its ``hbm_bytes`` at half the bandwidth, then the gap) take
    ``half_ns``; 0 for a slowdown within the engine's own spread (``NOISE``)."""
    full = hbm_bytes / chip.memory.hbm_bandwidth_GBps     # its loads can go no faster
    floor = 2 * full
    if alone_ns <= full or half_ns <= max(alone_ns, floor) * (1 + NOISE):
        return 0.0
    return min(max(0.0, half_ns - floor), alone_ns - full) / alone_ns


def _bracket(rows: int) -> tuple[int, int]:
    i = bisect_left(BLOCK_ROW_KNOTS, rows)
    if i < len(BLOCK_ROW_KNOTS) and BLOCK_ROW_KNOTS[i] == rows:
        return rows, rows
    i = min(max(i, 1), len(BLOCK_ROW_KNOTS) - 1)
    return BLOCK_ROW_KNOTS[i - 1], BLOCK_ROW_KNOTS[i]


def cost(chip, p: GroupedGemmParams, rows: int) -> Knot:
    """The knot's costs at ``rows``, linear between the two knots around it."""
    lo, hi = _bracket(rows)
    a = knot(chip, p, lo)
    return a if hi == lo else a.mix(knot(chip, p, hi), (rows - lo) / (hi - lo), rows)


def block_rows_by_core(chip, p: GroupedGemmParams) -> list[list[int]]:
    """The rows of each block each core runs, blocks dealt as the kernel deals them (expert
    after expert, every n-block of each m-block, round robin over the cores)."""
    t = grouped_tiling(chip, p)
    nbs = math.ceil(p.n / t.block_n)
    rows = [b.rows for b in expert_blocks(p, t) for _ in range(nbs)]
    return [rows[c::t.num_cores] for c in range(t.num_cores)]


def segments(chip, p: GroupedGemmParams) -> tuple[list, float]:
    """([(uncontended ns, HBM bytes)], gap share) to replay ``p`` (``profiles.task``): its fixed
    part, then its busiest core's blocks in up to ``MAX_SEGMENTS - 1`` equal parts; its HBM
    bytes (the roofline's unique bytes) spread over them in proportion to time. The gap share
    (module docstring) comes from the same sums at half the HBM bandwidth."""
    from simnode.kernels.grouped_gemm import grouped_gemm_roofline
    q = pinned(chip, p)
    hbm = grouped_gemm_roofline(chip, p)["hbm_ns"] * chip.memory.hbm_bandwidth_GBps
    t = grouped_tiling(chip, q)
    if p.impl != "cann" and any(b.index for b in expert_blocks(q, t)):
        # S3: an expert of several m-blocks of BLOCK_M rows, whose later blocks read the
        # weights its first one loaded; the wave profile, fitted on experts of two full
        # m-blocks, holds that (CANN's blocks each decode their weights: knots hold them)
        prof = profiles.grouped_gemm_profile(chip, p.n, p.k, p.act_dtype, p.weight_dtype,
                                             p.out_dtype, p.layout, p.num_cores, base=q,
                                             burst=True)
        units = profiles.gemm_units(chip, q)
        half = prof.fixed_half_ns + units * prof.unit_half_ns
        segs = profiles.with_hbm_bytes(prof.segments(units), hbm)
        return segs, gap_share(chip, prof.time_ns(units), half, hbm)
    busiest, best, best_half = [], -1.0, 0.0
    costs: dict = {}
    by_core = block_rows_by_core(chip, q)
    # the share of the cores still running blocks as each core runs its j-th
    active = [sum(len(b) > j for b in by_core) / len(by_core)
              for j in range(max(map(len, by_core), default=0))]
    for rows in by_core:
        knots = [costs[r] if r in costs else costs.setdefault(r, cost(chip, q, r)) for r in rows]
        total = core_ns(knots, active)
        if total > best:
            busiest, best = knots, total
        best_half = max(best_half, core_ns(knots, active, half=True))
    if not busiest:
        return [], 0.0
    mean = cost(chip, q, round(sum(k.rows for k in busiest) / len(busiest)))
    alone = mean.fixed_ns + best
    half = mean.fixed_half_ns + best_half
    gap = gap_share(chip, alone, half, hbm)
    n = max(1, min(MAX_SEGMENTS - 1, len(busiest)))
    parts = [best / n] * n
    if mean.fixed_ns > 0:
        parts = [mean.fixed_ns] + parts
    else:                                            # a negative fixed part folded in
        parts = [t * alone / best for t in parts]
    return [(t, hbm * t / alone) for t in parts], gap


def _swiglu_knot(chip, p) -> Knot:
    """The SwiGLU ``p``'s cost per row of its busiest AIV: runs at ``n`` rows per AIV (its
    busiest AIV's) and at half that, alone and at half the HBM bandwidth, so the line is exact
    at ``p``'s size: a SwiGLU that is vector-bound at one or two rows per AIV turns HBM-bound
    at half the bandwidth by a few dozen, and a line through 1 and 2 rows misses that turn;
    with fewer rows than AIVs, ``p`` itself (its ``rows``, both costs as fixed: one row on each
    busy AIV)."""
    from simnode.hardware.chip import ChipSim
    from simnode.kernels.swiglu import swiglu_schedule
    aivs = (p.num_cores or chip.num_ai_cores) * chip.aiv_per_core
    few = p.rows < aivs
    n = -(-p.rows // aivs)
    lo, hi = (1, 2) if n <= 2 else (n // 2, n)
    key = ("swiglu", repr(chip), replace(p, rows=p.rows if few else 0), hi)
    if key in _MEMO:
        return _MEMO[key]
    fit = []
    for c in (chip, profiles.half_hbm(chip)):
        if few:
            fit += [ChipSim(c).run(swiglu_schedule(c, p)).makespan_ns, 0.0]
            continue
        t_lo, t_hi = (ChipSim(c).run(swiglu_schedule(c, replace(p, rows=m * aivs))).makespan_ns
                      for m in (lo, hi))
        unit = (t_hi - t_lo) / (hi - lo)
        fit += [t_hi - hi * unit, unit]
    k = _MEMO[key] = Knot(p.rows if few else 0, *fit)
    return k


def swiglu_segments(chip, p) -> tuple[list, float]:
    """([(uncontended ns, HBM bytes)], gap share) to replay the SwiGLU ``p``: the rows of its
    busiest AIV at the knot's cost per row, its roofline's bytes, its burst shape."""
    from simnode.kernels.swiglu import swiglu_roofline
    if p.rows <= 0:
        return [], 0.0
    k = _swiglu_knot(chip, p)
    aivs = (p.num_cores or chip.num_ai_cores) * chip.aiv_per_core
    n = -(-p.rows // aivs)
    alone = k.fixed_ns + n * k.unit_ns
    half = k.fixed_half_ns + n * k.unit_half_ns
    hbm = swiglu_roofline(chip, p)["hbm_bytes"]
    return [(alone, hbm)], gap_share(chip, alone, half, hbm)
