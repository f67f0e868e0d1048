"""The reduced form of a MoE layer's kernels (simnode.moe.profiles) against full pipe-level
runs: within 2% uncontended, within 5% when a competitor takes half the HBM."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import simpy

from simnode.config.topology import load_topology
from simnode.engine.share import Share
from simnode.hardware.chip import ChipSim
from simnode.kernels.grouped_gemm import GroupedGemmParams, grouped_gemm_schedule
from simnode.kernels.swiglu import SwigluParams, swiglu_schedule
from simnode.moe import decode_profiles, profiles
from tests.conftest import REPO_ROOT

CHIP = load_topology(REPO_ROOT / "topologies" / "ascend950dt.yaml").chip


def pipe_level(chip, sched) -> tuple[float, float]:
    run = ChipSim(chip).run(sched)
    return run.makespan_ns, run.hbm_bytes


def replay(segments, hbm_GBps, competitor_GBps: float = 0.0, gap_frac: float = 0.0) -> float:
    """Time of the replayed kernel on an HBM of ``hbm_GBps``, with a competing transfer that
    asks for ``competitor_GBps`` of it the whole time (fair sharing)."""
    env = simpy.Environment()
    share = Share(env)
    hbm = share.add_resource("hbm", hbm_GBps)
    if competitor_GBps:
        share.start(1e15, (hbm,), cap=competitor_GBps)
    done = {}

    def run():
        yield from profiles.task(share, hbm, segments, gap_frac=gap_frac)
        done["t"] = env.now

    env.process(run())
    env.run(until=1e12)
    return done["t"]


def with_hbm(chip, GBps):
    return dataclasses.replace(chip, memory=dataclasses.replace(chip.memory, hbm_bandwidth_GBps=GBps))


CASES = [
    # uneven experts, FP8: cube-bound, a few waves
    ("gemm", GroupedGemmParams((700, 130, 1500, 256, 900), 1024, 2048, "fp8", "fp8")),
    # a layer's expert GEMM 2 in small: ~1000 tokens per expert
    ("gemm", GroupedGemmParams((1010, 980, 1040, 1000), 2048, 2048, "fp8", "fp8")),
    # memory- and vector-heavy
    ("swiglu", SwigluParams(3000, 2048)),
]
# Decode shapes (experts of a few rows each) have their own reduced form, below.


def _profile_and_segments(kind, p):
    if kind == "gemm":
        prof = profiles.grouped_gemm_profile(CHIP, p.n, p.k, p.act_dtype, p.weight_dtype,
                                             p.out_dtype, p.layout, p.num_cores)
        from simnode.kernels.grouped_gemm import grouped_gemm_roofline
        hbm = grouped_gemm_roofline(CHIP, p)["hbm_ns"] * CHIP.memory.hbm_bandwidth_GBps
        return prof.segments(profiles.gemm_units(CHIP, p)), hbm, grouped_gemm_schedule
    from simnode.kernels.swiglu import swiglu_roofline
    prof = profiles.swiglu_profile(CHIP, p.intermediate, p.num_cores)
    return prof.segments(p.rows), swiglu_roofline(CHIP, p)["hbm_bytes"], swiglu_schedule


@pytest.mark.parametrize("kind, p", CASES, ids=["gemm-uneven", "gemm-layer-like", "swiglu"])
def test_reduced_form_matches_the_pipe_level_engine(kind, p):
    segs, hbm_bytes, schedule = _profile_and_segments(kind, p)
    segs = profiles.with_hbm_bytes(segs, hbm_bytes)
    full_ns, _ = pipe_level(CHIP, schedule(CHIP, p))
    alone = replay(segs, CHIP.memory.hbm_bandwidth_GBps)
    assert alone == pytest.approx(full_ns, rel=0.02)
    # half the HBM: a pipe-level run on a chip with half the bandwidth, against the replay
    # on the full HBM with a competitor that takes half of it
    half = CHIP.memory.hbm_bandwidth_GBps / 2
    slow_chip = with_hbm(CHIP, half)
    full_half_ns, _ = pipe_level(slow_chip, schedule(slow_chip, p))
    contended = replay(segs, CHIP.memory.hbm_bandwidth_GBps, competitor_GBps=half)
    assert contended == pytest.approx(full_half_ns, rel=0.05)


def test_profile_is_linear_in_its_units_and_memoized():
    prof = profiles.swiglu_profile(CHIP, 2048)
    assert prof.time_ns(1000) == pytest.approx(prof.fixed_ns + 1000 * prof.unit_ns)
    assert profiles.swiglu_profile(CHIP, 2048) is prof
    segs = prof.segments(1000, extra_hbm_bytes=1e6)
    assert sum(t for t, _ in segs) == pytest.approx(prof.time_ns(1000))
    assert sum(b for _, b in segs) == pytest.approx(prof.hbm_bytes(1000) + 1e6)


# -- decode shapes (simnode.moe.decode_profiles) ------------------------------------------------

DECODE_ROWS = (4, 16, 64, 256)
DECODE_KERNELS = {
    # V4's routed experts, MXFP4: CANN's weight-quant kernel, both AIVs decode (packed layout)
    "cann-w4a8": dict(act_dtype="fp8", weight_dtype="fp4", layout="packed", impl="cann"),
    # MXFP8 experts behind the masked layout (S3's kernel, DeepGEMM's masked blocks)
    "s3-w8a8": dict(act_dtype="fp8", weight_dtype="fp8", layout="masked"),
    # S3's one-AIV Dequant-B: its 2 UB slots make its weight loads come in bursts
    "s3-w4a8": dict(act_dtype="fp8", weight_dtype="fp4", layout="masked"),
}


def _check_decode(segs, gap, schedule, p):
    full_ns, _ = pipe_level(CHIP, schedule(CHIP, p))
    alone = replay(segs, CHIP.memory.hbm_bandwidth_GBps, gap_frac=gap)
    assert alone == pytest.approx(full_ns, rel=0.02)
    half = CHIP.memory.hbm_bandwidth_GBps / 2
    slow_chip = with_hbm(CHIP, half)
    full_half_ns, _ = pipe_level(slow_chip, schedule(slow_chip, p))
    contended = replay(segs, CHIP.memory.hbm_bandwidth_GBps, competitor_GBps=half, gap_frac=gap)
    assert contended == pytest.approx(full_half_ns, rel=0.05)


@pytest.mark.parametrize("rows", DECODE_ROWS)
@pytest.mark.parametrize("kernel", sorted(DECODE_KERNELS))
def test_decode_grouped_gemm_replays_as_the_pipe_level_engine_runs_it(kernel, rows):
    """8 experts of ``rows`` rows each (V4-Flash's at EP32), 2048 x 2048 per expert: the
    block-rows form within 2% alone and 5% with half the HBM, loads' bursts included."""
    p = GroupedGemmParams((rows,) * 8, 2048, 2048, **DECODE_KERNELS[kernel])
    _check_decode(*decode_profiles.segments(CHIP, p), grouped_gemm_schedule, p)


#: the layer's two expert kernels: routed W4A8 (CANN's), shared / W8A8 (S3's masked)
LAYER_KERNELS = ("cann-w4a8", "s3-w8a8")


@pytest.mark.parametrize("rows", DECODE_ROWS)
@pytest.mark.parametrize("kernel", LAYER_KERNELS)
def test_decode_grouped_gemm_holds_at_16_experts(kernel, rows):
    """16 local experts (V4-Flash at EP16: 256 / 16): 8 to 16 waves, where the knots' fits
    have one and two."""
    p = GroupedGemmParams((rows,) * 16, 2048, 2048, **DECODE_KERNELS[kernel])
    _check_decode(*decode_profiles.segments(CHIP, p), grouped_gemm_schedule, p)


def zipf_counts(experts: int, mean: int) -> tuple:
    """Rows per expert falling as 1 / rank (at least 1), ``mean`` on average, in a fixed
    shuffled order: a skewed routing's counts."""
    w = 1.0 / np.arange(1, experts + 1)
    c = np.maximum(1, np.round(w / w.sum() * experts * mean)).astype(int)
    return tuple(int(x) for x in np.random.default_rng(0).permutation(c))


# Where uneven experts still miss (measured, 16 experts): near and past the point where the
# decode and the A loads balance, the pipe-level cores that run different rows drift out of
# step and stall less on the shared L2 than the knots' cores, which all run one program in
# step (CANN at 64 rows: +4% alone; at 256: +2.3%); S3's experts of several m-blocks take
# the wave profile (64 rows: -2.1% alone, -4.5% half; 256: +7% with half the HBM).
_UNEVEN_MISSES = {("cann-w4a8", 64), ("cann-w4a8", 256), ("s3-w8a8", 64), ("s3-w8a8", 256)}


@pytest.mark.parametrize("rows", DECODE_ROWS)
@pytest.mark.parametrize("kernel", LAYER_KERNELS)
def test_decode_grouped_gemm_holds_for_zipf_like_experts(kernel, rows, request):
    """16 experts of zipf-like counts: a core's blocks of different rows overlap their
    pipes (``decode_profiles.core_ns``), so a heavy block that binds the cube hides under
    light ones that bind the decode (CANN at 16 rows: +6.4% as a sum of units, +0.1% now)."""
    if (kernel, rows) in _UNEVEN_MISSES:
        request.applymarker(pytest.mark.xfail(strict=True, reason="out-of-step cores (above)"))
    p = GroupedGemmParams(zipf_counts(16, rows), 2048, 2048, **DECODE_KERNELS[kernel])
    _check_decode(*decode_profiles.segments(CHIP, p), grouped_gemm_schedule, p)


@pytest.mark.parametrize("kernel", sorted(DECODE_KERNELS))
def test_decode_grouped_gemm_holds_for_uneven_experts(kernel):
    """Routed counts are uneven: 16 rows per expert on average, +-25%."""
    p = GroupedGemmParams((13, 20, 16, 11, 18, 16, 21, 12), 2048, 2048, **DECODE_KERNELS[kernel])
    _check_decode(*decode_profiles.segments(CHIP, p), grouped_gemm_schedule, p)


def test_the_burst_shape_is_what_slows_s3s_dequant_at_half_the_hbm():
    """S3's Dequant-B at 16 rows per expert: its loads stall while its 2 UB slots wait for the
    decode, a gap the even replay has not; CANN's 4 UB buffers keep its loads going."""
    s3 = GroupedGemmParams((16,) * 8, 2048, 2048, **DECODE_KERNELS["s3-w4a8"])
    cann = GroupedGemmParams((16,) * 8, 2048, 2048, **DECODE_KERNELS["cann-w4a8"])
    assert decode_profiles.segments(CHIP, s3)[1] > 0.2
    assert decode_profiles.segments(CHIP, cann)[1] < 0.1


@pytest.mark.parametrize("rows", (16, 64, 256, 1024))
def test_decode_swiglu_replays_as_the_pipe_level_engine_runs_it(rows):
    """The decode layer's SwiGLU (clamp 10, MX scales): fewer rows than AIVs to a few each."""
    p = SwigluParams(rows, 2048, scale_block=32, sf_dtype="ue8m0", clamp_limit=10.0)
    _check_decode(*decode_profiles.swiglu_segments(CHIP, p), swiglu_schedule, p)
