"""Kernel profiles: how a MoE layer's chip kernels run on the supernode clock (reduced form).

Running every rank's kernels on the pipe-level engine is far too slow for a layer (one EP8
rank's expert GEMM is ~5 M instructions). Their cost is regular, though: a grouped GEMM
deals equal blocks (BLOCK_M x BLOCK_N x K, padding included) to the AI cores in waves, and
SwiGLU deals rows to the AIVs. So each kernel is profiled once per (kernel, fixed
dimensions, cores) by two pipe-level runs at two sizes, and its time and HBM traffic are
taken as linear in its units (waves of blocks, rows) between and beyond them::

    time(units) = fixed_ns + units x unit_ns        hbm(units) = fixed + units x per unit

On the supernode clock a profiled kernel is replayed as a task (``task``): a few
sequential segments, each a transfer on the rank's HBM whose cap is its uncontended pace
(1 unit of work per ns) and whose HBM weight is its bytes per ns of work. Alone it takes
exactly ``time(units)``; when the HBM it shares with URMA (or another kernel) cannot give
it the bytes it asks for, the engine slows it, as much as the policy of that HBM says. A
compute-bound kernel asks for little and barely slows; a memory-bound one slows in
proportion. tests/moe/test_profiles.py checks the reduced form against full pipe-level runs
of uneven shapes (within 2% uncontended, within 5% with the HBM halved by a competitor).

Pure apart from ``task`` (a SimPy generator); profiles are memoized per process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simnode.engine.share import Share
from simnode.errors import ScheduleError

#: segments a replayed kernel is cut into: the first holds its fixed part (fill, cold
#: loads), the rest split its waves evenly (the HBM traffic of a wave is even)
MAX_SEGMENTS = 8


@dataclass(frozen=True)
class KernelProfile:
    """A kernel's cost as linear in its units, from two pipe-level runs (module docstring)."""
    name: str                       #: e.g. "grouped_gemm fp8 n4096 k7168"
    unit: str                       #: what a unit is: "wave" (of blocks) or "row"
    fixed_ns: float
    unit_ns: float
    fixed_hbm_bytes: float
    unit_hbm_bytes: float
    busy_frac: dict                 #: pipe kind -> busy fraction in the larger pipe-level run
    bottleneck: str                 #: of the larger pipe-level run
    fitted_units: tuple             #: the unit counts of the two pipe-level runs
    #: the same fit at half the HBM bandwidth (``burst``; 0 if not made): with the time
    #: alone, the burst shape of its loads (``simnode.moe.decode_profiles.gap_share``)
    fixed_half_ns: float = 0.0
    unit_half_ns: float = 0.0

    def time_ns(self, units: float) -> float:
        return self.fixed_ns + units * self.unit_ns if units > 0 else 0.0

    def hbm_bytes(self, units: float) -> float:
        return self.fixed_hbm_bytes + units * self.unit_hbm_bytes if units > 0 else 0.0

    def segments(self, units: float, extra_hbm_bytes: float = 0.0) -> list[tuple[float, float]]:
        """[(uncontended ns, HBM bytes)] to replay ``units``; ``extra_hbm_bytes`` (traffic the
        fit runs did not have, e.g. more experts' weights) spread over the whole kernel."""
        if units <= 0:
            return []
        total_ns = self.time_ns(units)
        parts = [(max(self.fixed_ns, 0.0), max(self.fixed_hbm_bytes, 0.0))]
        n = max(1, min(MAX_SEGMENTS - 1, math.ceil(units)))
        parts += [(units * self.unit_ns / n, units * self.unit_hbm_bytes / n)] * n
        parts = [(t, b) for t, b in parts if t > 0]
        scale = total_ns / sum(t for t, _ in parts)         # a negative fixed part folded in
        return [(t * scale, b + extra_hbm_bytes * (t * scale) / total_ns) for t, b in parts]


def fit(name: str, unit: str, runs: list[tuple[float, float, float, dict]]) -> KernelProfile:
    """A profile from two pipe-level runs [(units, makespan ns, HBM bytes, busy fractions)],
    the larger last; its busy fractions and bottleneck come from the larger one."""
    (u1, t1, h1, _), (u2, t2, h2, busy) = runs
    if u2 <= u1:                  # one block-row of a very wide GEMM already fills both runs
        raise ScheduleError(f"{name}: its two profile runs have the same {u1:g} {unit}s, so no "
                            f"cost per {unit} can be fitted; use a smaller n (or more cores)")
    unit_ns = (t2 - t1) / (u2 - u1)
    unit_hbm = (h2 - h1) / (u2 - u1)
    bottleneck = max(sorted(busy), key=lambda k: busy[k])
    return KernelProfile(name, unit, t1 - u1 * unit_ns, unit_ns, h1 - u1 * unit_hbm, unit_hbm,
                         dict(busy), bottleneck, (u1, u2))


def half_hbm(chip):
    """``chip`` with half its HBM bandwidth (the burst shape's second run)."""
    return replace(chip, memory=replace(chip.memory,
                                        hbm_bandwidth_GBps=chip.memory.hbm_bandwidth_GBps / 2))


def with_hbm_bytes(segments: list, hbm_bytes: float) -> list:
    """The segments' times with ``hbm_bytes`` of HBM traffic spread over them in proportion
    to their time (a kernel's traffic taken from its roofline's unique bytes rather than from
    the fit runs, whose experts and rows differ from the real shape's)."""
    total = sum(ns for ns, _ in segments)
    return [(ns, hbm_bytes * ns / total) for ns, _ in segments] if total > 0 else []


def task(share: Share, hbm: int, segments: list[tuple[float, float]], hbm_user: int = -1,
         gap_frac: float = 0.0):
    """Replay a profiled kernel on ``share`` (a SimPy generator): each segment is a transfer
    of its HBM bytes over the HBM resource ``hbm`` (and ``hbm_user``, an unlimited shadow
    that counts this kernel's HBM use, if >= 0), capped at the pace it has alone (bytes /
    its uncontended ns). Its size is in bytes, as the other users of the HBM count theirs,
    so a fair HBM compares like with like. ``gap_frac`` (the burst shape,
    ``simnode.moe.decode_profiles``): that share of each segment's time has no loads, so its
    bytes come at their pace over the rest, followed by the gap."""
    for ns, hbm_bytes in segments:
        gap = ns * gap_frac
        if hbm_bytes > 0:
            res = (hbm,) if hbm_user < 0 else (hbm, hbm_user)
            yield share.start(hbm_bytes, res, cap=hbm_bytes / (ns - gap))
            if gap > 0:
                yield share.env.timeout(gap)
        else:                                # touches nothing shared: its pace alone
            yield share.env.timeout(ns)


# -- the MoE layer's kernels -------------------------------------------------------------------
_MEMO: dict = {}


def grouped_gemm_profile(chip, n: int, k: int, act_dtype: str, weight_dtype: str,
                         out_dtype: str = "bf16", layout: str = "contiguous",
                         num_cores: int = 0, base=None, burst: bool = False) -> KernelProfile:
    """Profile of the m-grouped GEMM (``simnode.kernels.grouped_gemm``) per wave of blocks:
    pipe-level runs of experts of equal size at about 2 and 6 waves. Its unit is one wave
    (``gemm_units``). ``base``: the kernel's parameters (tiling pinned, counts ignored) when
    they are more than the arguments say; ``burst``: fit it at half the HBM bandwidth too
    (the burst shape of its loads, ``decode_profiles.gap_share``)."""
    key = ("gg", repr(chip), n, k, act_dtype, weight_dtype, out_dtype, layout, num_cores)
    pinned = base is not None             # a kernel's own tiling: its experts as its
    if pinned:
        key += (replace(base, m_per_expert=()), burst)
    if key in _MEMO:
        return _MEMO[key]
    from simnode.kernels.grouped_gemm import GroupedGemmParams, grouped_tiling
    if base is None:
        base = GroupedGemmParams((1,), n, k, act_dtype, weight_dtype, out_dtype, layout,
                                 num_cores=num_cores)
    t = grouped_tiling(chip, base)
    per_mblock = math.ceil(n / t.block_n)                     # blocks of one m-block of rows
    runs, fits = [], []
    e1 = max(1, math.ceil(t.num_cores / per_mblock))      # pinned: 1 and 3 times as many experts
    for waves in (2, 6):
        # experts of 2 m-blocks each (their weights reused by a second block, as in a layer)
        mblocks = max(1, math.ceil(waves * t.num_cores / per_mblock))
        experts = max(1, mblocks // 2)
        m = [2 * t.block_m] * experts + ([t.block_m] if mblocks % 2 else [])
        if pinned:
            m = [2 * t.block_m] * (e1 * waves // 2)
        p = replace(base, m_per_expert=tuple(m))
        fits.append(p)
        runs.append((gemm_units(chip, p), *_run_grouped(chip, p)))
    prof = fit(f"grouped_gemm {act_dtype}x{weight_dtype} n{n} k{k}", "wave", runs)
    if burst:
        slow = half_hbm(chip)
        half = fit(prof.name, "wave", [(u, *_run_grouped(slow, q)) for (u, *_), q in zip(runs, fits)])
        prof = replace(prof, fixed_half_ns=half.fixed_ns, unit_half_ns=half.unit_ns)
    _MEMO[key] = prof
    return prof


def width_limit(chip, n: int, k: int, act_dtype: str, weight_dtype: str,
                num_cores: int = 0) -> str | None:
    """What a grouped GEMM too wide to profile needs (None when it can be profiled): the fit
    runs 2 and 6 waves of blocks (``grouped_gemm_profile``), which the same runs when one
    block-row's n-blocks alone fill 2 waves of the cores. Known before any run."""
    from simnode.kernels.grouped_gemm import GroupedGemmParams, grouped_tiling
    t = grouped_tiling(chip, GroupedGemmParams((1,), n, k, act_dtype, weight_dtype, "bf16",
                                               "contiguous", num_cores=num_cores))
    if math.ceil(n / t.block_n) < 2 * t.num_cores:
        return None
    return (f"a GEMM n of less than {2 * t.num_cores * t.block_n:,} (2 x {t.num_cores} cores x "
            f"block_n {t.block_n}): its profile is fitted on 2 and 6 waves of blocks, which one "
            f"block-row of n = {n:,} fills alone")


def gemm_units(chip, p) -> float:
    """Waves of a grouped GEMM: its blocks (padding included) dealt to its cores, a partial
    last wave counting as a whole one (its cores finish together with the others')."""
    from simnode.kernels.grouped_gemm import expert_blocks, grouped_tiling
    t = grouped_tiling(chip, p)
    blocks = len(expert_blocks(p, t)) * math.ceil(p.n / t.block_n)
    return float(math.ceil(blocks / t.num_cores))


def _run_grouped(chip, p) -> tuple[float, float, dict]:
    from simnode.kernels.grouped_gemm import grouped_gemm_schedule
    return _run(chip, grouped_gemm_schedule(chip, p))


def swiglu_profile(chip, intermediate: int, num_cores: int = 0) -> KernelProfile:
    """Profile of SwiGLU + per-token FP8 cast (``simnode.kernels.swiglu``) per row: runs at
    4 and 12 rows per AIV."""
    key = ("swiglu", repr(chip), intermediate, num_cores)
    if key in _MEMO:
        return _MEMO[key]
    from simnode.kernels.swiglu import SwigluParams, swiglu_schedule
    aivs = (num_cores or chip.num_ai_cores) * chip.aiv_per_core
    runs = []
    for per in (4, 12):
        p = SwigluParams(per * aivs, intermediate, num_cores=num_cores)
        runs.append((float(p.rows), *_run(chip, swiglu_schedule(chip, p))))
    prof = fit(f"swiglu i{intermediate}", "row", runs)
    _MEMO[key] = prof
    return prof


def _run(chip, sched) -> tuple[float, float, dict]:
    """(makespan ns, HBM bytes, busy fractions of its pipes, L2 and HBM) of a schedule on
    the pipe-level engine."""
    from simnode.hardware.chip import ChipSim
    run = ChipSim(chip).run(sched)
    span = run.makespan_ns
    busy = run.busy_frac()
    busy["l2"] = run.l2_bytes / span / chip.memory.l2_bandwidth_GBps
    busy["hbm"] = run.hbm_bytes / span / chip.memory.hbm_bandwidth_GBps
    return span, run.hbm_bytes, busy
