"""The GEMM kind against the published figures (facts 2.1) and the properties every run
must have: roofline <= makespan <= serial sums (the two bounds below), more HBM bandwidth
is never slower, FLOPs and output elements conserved, heuristic tiles fit the buffers."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simnode import units
from simnode.config.chip import DTYPE_BITS, GM_PATHS
from simnode.config.topology import Topology
from simnode.errors import ScheduleError
from simnode.instr import isa
from simnode.kernels.gemm import GemmParams, block_order, choose_tiling, gemm_roofline, gemm_schedule
from simnode.workloads.kinds.gemm import KIND as GEMM
from simnode.workloads.loader import load_inputs


def _run(chip, **params):
    return GEMM.run(Topology("test", chip), params)


def _with_hbm(chip, factor: float):
    mem = dataclasses.replace(chip.memory, hbm_bandwidth_GBps=chip.memory.hbm_bandwidth_GBps * factor)
    return dataclasses.replace(chip, memory=mem)


# -- published figures ------------------------------------------------------------------------

def test_full_size_bf16_gemm_reaches_published_tflops(topology_path, gemm_workload_path):
    """facts 2.1, S4: DeepGEMM-Ascend 4096x7168x16384 BF16 at 431 TFLOPS on a 950DT.
    Tolerance 2%; never above the 432.54 TFLOPS cube peak."""
    inputs = load_inputs(topology_path, gemm_workload_path)
    assert (inputs.params["m"], inputs.params["n"], inputs.params["k"]) == (4096, 7168, 16384)
    r = inputs.kind.run(inputs.topology, inputs.params, name="acceptance")
    assert r.flops == 2.0 * 4096 * 7168 * 16384
    assert r.tflops == pytest.approx(431, rel=0.02)
    assert r.tflops <= 432.54
    assert r.roofline_ns <= r.makespan_ns
    assert r.bottleneck == "cube (aic.m)"


def test_skinny_gemm_is_memory_bound(chip):
    """m = 32 (a decode-like GEMM): the cube idles, memory bounds the run, and the
    run stays strictly below the roofline-implied ceiling."""
    r = _run(chip, m=32, n=7168, k=7168)
    assert r.bottleneck in ("HBM bandwidth", "L2 bandwidth")
    ceiling = units.tflops(r.flops, r.roofline_ns)
    assert r.tflops < ceiling
    assert r.details["bound_hbm_ns"] == pytest.approx((32 * 7168 + 7168 * 7168 + 32 * 7168) * 2 / 3500)


@pytest.mark.parametrize("dtype,peak", [("fp8", 865.0752), ("fp4", 1730.1504)])
def test_low_precision_stays_under_peak(chip, dtype, peak):
    r = _run(chip, m=1024, n=1024, k=4096, dtype=dtype)
    assert r.details["peak_tflops"] == pytest.approx(peak)
    assert 0 < r.tflops < peak
    assert r.tflops < (865 if dtype == "fp8" else 1730)
    assert r.roofline_ns <= r.makespan_ns


@pytest.mark.parametrize("m,n,k,dtype", [
    (32, 2048, 2048, "bf16"), (64, 4096, 2048, "bf16"), (512, 1024, 1024, "bf16"),
    (48, 3000, 1000, "bf16"), (128, 2048, 1024, "fp8"), (256, 512, 2048, "fp4"),
])
def test_more_hbm_bandwidth_is_never_slower(chip, m, n, k, dtype):
    base = _run(chip, m=m, n=n, k=k, dtype=dtype)
    fast = _run(_with_hbm(chip, 2.0), m=m, n=n, k=k, dtype=dtype)
    assert fast.makespan_ns <= base.makespan_ns * (1 + 1e-12)


# -- properties over small shapes -------------------------------------------------------------

def _duration_bound_ns(chip, unit: str, ins, gm_flows: int = 1) -> float:
    """An upper bound on one instruction's time from issue to completion, from the spec.

    A GM copy streams at no less than min(path rate, L2 / gm_flows, HBM / gm_flows) when at
    most ``gm_flows`` GM copies stream at once: max-min fair sharing gives every flow at
    least its cap or an equal share of its bottleneck resource. ``gm_flows=1`` is the
    copy alone on an idle chip (costed as an L2 miss)."""
    f = chip.aic_freq_GHz if unit == "aic" else chip.aiv_freq_GHz
    t = type(ins)
    if t is isa.Copy or t is isa.Fixpipe:
        path = chip.path(ins.path)
        size = ins.size_bytes if t is isa.Copy else ins.m * ins.n * DTYPE_BITS[ins.out_dtype] // 8
        rate = path.bandwidth_B_per_cycle * f
        if ins.path in GM_PATHS:
            rate = min(rate, chip.memory.l2_bandwidth_GBps / gm_flows,
                       chip.memory.hbm_bandwidth_GBps / gm_flows)
        return max(size / rate, path.min_issue_interval_cycles / f) + path.base_latency_cycles / f
    if t is isa.Mmad:
        k0 = chip.cube.macs_per_cycle[ins.dtype] // 256
        cycles = (math.ceil(max(ins.m, chip.cube.saturating_m_rows) / 16) * math.ceil(ins.n / 16)
                  * math.ceil(ins.k / k0))
        return (cycles + chip.cube.mmad_latency_cycles) / f
    if t is isa.VecOp:
        return max(ins.ops / chip.vector.ops_per_cycle[ins.op_class],
                   ins.ub_bytes / chip.vector.ub_bandwidth_B_per_cycle) / f
    if t is isa.Scalar:
        return ins.cycles / f
    if t is isa.Delay:
        return ins.time_ns
    return 0.0                                  # flags and barriers take no time of their own


def _serial_sum_ns(chip, sched) -> float:
    """Upper bound 1: every instruction of every core run one after another, each alone.

    Sound because at every instant before the makespan some instruction is streaming,
    computing or in its latency, and GM copies sharing a saturated resource together
    progress at >= 1 standalone-ns per ns (each one's standalone rate is <= that
    resource's capacity), so the covered time never exceeds the sum of standalone times."""
    return sum(_duration_bound_ns(chip, unit, ins) for prog in sched.cores
               for (unit, _pipe), instrs in prog.pipes.items() for ins in instrs)


def _per_core_serial_ns(chip, sched) -> float:
    """Upper bound 2 (tighter): the slowest core's instructions one after another, GM copies
    at their worst shared rate. A pipe streams one GM copy at a time, so at most
    ``gm_flows`` (pipes holding GM copies) share L2/HBM. Flags never cross cores, so until
    a core finishes one of its own instructions is always in progress (else it would be
    deadlocked): each core's finish is at most the sum of its instructions' bounds."""
    gm_flows = sum(1 for prog in sched.cores for instrs in prog.pipes.values()
                   if any(type(i) in (isa.Copy, isa.Fixpipe) and i.path in GM_PATHS for i in instrs))
    return max(sum(_duration_bound_ns(chip, unit, ins, max(1, gm_flows))
                   for (unit, _pipe), instrs in prog.pipes.items() for ins in instrs)
               for prog in sched.cores)


def _assert_fits(chip, sched):
    sched.check(chip)
    for prog in sched.cores:
        use = {}
        for b in prog.buffers:
            use[(b.unit, b.buffer)] = use.get((b.unit, b.buffer), 0) + b.size_bytes
        for (_unit, buf), need in use.items():
            assert 0 < need <= chip.buffers.capacity_bytes(buf), (buf, need)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(16, 768), n=st.integers(16, 768), k=st.integers(64, 2048),
       dtype=st.sampled_from(["bf16", "fp8", "fp4"]))
@example(m=16, n=16, k=64, dtype="bf16")
@example(m=17, n=767, k=65, dtype="fp8")
@example(m=768, n=768, k=2048, dtype="fp4")
def test_gemm_properties(chip, m, n, k, dtype):
    p = GemmParams(m, n, k, dtype)
    sched = gemm_schedule(chip, p)
    _assert_fits(chip, sched)
    # conservation: every MAC issued once, every output element written once
    macs = sum(i.m * i.n * i.k for prog in sched.cores for i in prog.pipes[("aic", "m")]
               if type(i) is isa.Mmad)
    assert macs == m * n * k
    out = sum(i.m * i.n for prog in sched.cores for i in prog.pipes[("aic", "fix")]
              if type(i) is isa.Fixpipe)
    assert out == m * n
    r = _run(chip, m=m, n=n, k=k, dtype=dtype)
    assert r.flops == 2.0 * m * n * k
    assert r.roofline_ns == pytest.approx(gemm_roofline(chip, p, sched)["bound_ns"])
    assert r.roofline_ns <= r.makespan_ns * (1 + 1e-9)
    assert r.makespan_ns <= _per_core_serial_ns(chip, sched) * (1 + 1e-9)
    assert r.makespan_ns <= _serial_sum_ns(chip, sched) * (1 + 1e-9)
    assert r.tflops <= chip.peak_tflops(dtype)


@pytest.mark.parametrize("m,n,k,dtype", [
    (4096, 7168, 16384, "bf16"), (32, 7168, 7168, "bf16"), (4096, 7168, 16384, "fp8"),
    (4096, 7168, 16384, "fp4"), (1, 1, 1, "bf16"), (8192, 8192, 128, "fp16"), (100, 5000, 300, "fp8"),
])
def test_heuristic_tiles_fit_the_buffers(chip, m, n, k, dtype):
    """Checked from the tiling with independent arithmetic (the full-size schedules are too
    big to build here; the property test above checks built schedules)."""
    t = choose_tiling(chip, GemmParams(m, n, k, dtype))
    bits = DTYPE_BITS[dtype]
    scales = (t.block_m + t.block_n) * t.block_k // 32 if bits <= 8 else 0   # one UE8M0 byte / 32 K
    assert t.block_m % 16 == 0 and t.block_n % 16 == 0
    assert t.block_k % t.k_l0 == 0 and t.l1_stages >= 2
    cap = chip.buffers.capacity_bytes
    assert t.l1_stages * ((t.block_m + t.block_n) * t.block_k * bits // 8 + scales) <= cap("l1")
    assert 2 * t.block_m * t.k_l0 * bits // 8 <= cap("l0a")
    assert 2 * t.k_l0 * t.block_n * bits // 8 <= cap("l0b")
    assert 2 * t.sub_m * t.sub_n * 4 <= cap("l0c")


@pytest.mark.parametrize("m,n", [(1024, 1024), (300, 700), (16, 4096)])
def test_block_order_visits_every_block_once(chip, m, n):
    p = GemmParams(m, n, 512)
    t = choose_tiling(chip, p)
    order = block_order(t, p)
    mbs, nbs = t.blocks(p)
    assert sorted(order) == [(a, b) for a in range(mbs) for b in range(nbs)]


# -- tile overrides ---------------------------------------------------------------------------

def test_tile_overrides_are_used(chip):
    t = choose_tiling(chip, GemmParams(1024, 1024, 1024, block_m=64, block_n=128, block_k=256,
                                       l1_stages=3))
    assert (t.block_m, t.block_n, t.block_k, t.l1_stages) == (64, 128, 256, 3)


def _l1_overflow():
    # 2 stages of (128 + 128) x 2048 bf16 = 2 MiB > 512 KiB
    return GemmParams(256, 256, 4096, block_m=128, block_n=128, block_k=2048)


def test_l1_overflow_is_rejected_by_the_generator(chip):
    with pytest.raises(ScheduleError) as info:
        gemm_schedule(chip, _l1_overflow())
    msg = str(info.value)
    assert msg.startswith("schedule 'gemm_256x256x4096_bf16' core 0: L1 of aic overflows")
    assert "demand 2097152 B" in msg and "capacity 524288 B (512 KiB)" in msg


def test_l1_overflow_rejected_by_run(chip):
    with pytest.raises(ScheduleError, match="L1 of aic overflows"):
        _run(chip, m=256, n=256, k=4096, block_m=128, block_n=128, block_k=2048)


@pytest.mark.parametrize("bad,fragment", [
    (dict(m=0), "GEMM m = 0: expected a positive size"),
    (dict(dtype="int8"), "GEMM dtype 'int8'"),
])
def test_gemm_params_validated(chip, bad, fragment):
    p = dataclasses.replace(GemmParams(64, 64, 64), **bad)
    with pytest.raises(ScheduleError, match=fragment):
        gemm_schedule(chip, p)
