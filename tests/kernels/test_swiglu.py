"""SwiGLU + per-token FP8 cast on the AIVs (TileKernels, S3's Ascend port): its vector cost
in closed form from its two VFs' instructions (the chip's VF issue model), the bound it meets at large m and which
one binds, conservation of rows and bytes, the multi-buffered pipes (more stages are never
slower; with a vector unit fast enough the run becomes memory-bound), and errors."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simnode.config.topology import Topology
from simnode.errors import ScheduleError
from simnode.instr import isa
from simnode.kernels.swiglu import SwigluParams, row_bytes, swiglu_roofline, swiglu_schedule, vector_ops
from simnode.workloads.chiprun import run_schedule


def _run(chip, p):
    return run_schedule(Topology("test", chip), swiglu_schedule(chip, p))


def _faster_vector(chip, factor):
    """Every VF rate ``factor`` times faster: lanes, ports, UB, latencies and call costs."""
    v = chip.vector
    fast = dataclasses.replace(
        v, ops_per_cycle={k: r * factor for k, r in v.ops_per_cycle.items()},
        ub_bandwidth_B_per_cycle=v.ub_bandwidth_B_per_cycle * factor,
        vf_load_ports=v.vf_load_ports * factor, vf_store_ports=v.vf_store_ports * factor,
        vf_ub_slots=v.vf_ub_slots * factor, vf_startup_cycles=v.vf_startup_cycles / factor,
        vf_drain_cycles=v.vf_drain_cycles / factor,
        **{f"vf_{c}_latency_cycles": getattr(v, f"vf_{c}_latency_cycles") / factor
           for c in ("load", "store", "alu", "cvt", "intlv", "reduce", "sfu")})
    return dataclasses.replace(chip, vector=fast)


def test_vector_cycles_per_row_in_closed_form(chip):
    """I = 2048 BF16 (32 registers), 16 groups of 128. VF 1: per register 2 converts, add,
    mul, abs (full rate), exp and div; per 4 registers 3 deinterleaves, 3 max, a VCGMAX: 280
    instructions at the calibrated one per cycle, + 23 + 12 per call. VF 2: per register 3
    ALU and a half-rate convert, for the 16 groups one ALU and 2 divs: 131, + 35."""
    s = swiglu_schedule(chip, SwigluParams(64, 2048))
    vf1, vf2 = vector_ops(SwigluParams(64, 2048))
    assert (vf1.mix, vf1.loads, vf1.stores) == ((184, 0, 24, 8, 64), 64, 40)
    assert (vf2.mix, vf2.loads, vf2.stores) == ((97, 32, 0, 0, 2), 33, 33)
    want = (280 + 35) + (131 + 35)
    assert s.meta["vector_cycles_per_row"] == pytest.approx(want)
    assert swiglu_roofline(chip, SwigluParams(64 * 64, 2048))["vector_ns"] == pytest.approx(
        64 * want / chip.aiv_freq_GHz)


def test_large_m_meets_its_bound_and_says_which_binds(chip):
    """At 8192 rows of I = 2048 the three pipes overlap and the run lands on its bound. The
    vector unit binds, not HBM: its two VFs take ~480 cycles per row at one instruction per
    cycle, HBM's share of a row (10.3 kB at 3.5 TB/s over 64 AIVs) ~160 cycles (derated)."""
    p = SwigluParams(8192, 2048)
    bound = swiglu_roofline(chip, p)
    assert bound["binds"] == "vector"
    assert bound["vector_ns"] > 1.5 * bound["hbm_ns"]
    assert bound["hbm_bytes"] == 8192 * (2 * 2048 * 2 + 2048 + 16 * 4)
    run = _run(chip, p)
    assert bound["bound_ns"] <= run.makespan_ns <= bound["bound_ns"] * 1.01


def test_with_a_fast_vector_unit_it_is_memory_bound(chip):
    """A what-if vector unit 16x faster: the same schedule now streams, its time set by
    memory (HBM or the AIVs' MTE2 path), within 5% of that bound: the row buffers keep MTE2
    busy while V and MTE3 work on earlier rows."""
    fast = _faster_vector(chip, 16)
    p = SwigluParams(8192, 2048)
    bound = swiglu_roofline(fast, p)
    assert bound["binds"] in ("hbm", "mte2")
    run = _run(fast, p)
    assert bound["bound_ns"] <= run.makespan_ns <= bound["bound_ns"] * 1.05
    one = _run(fast, dataclasses.replace(p, stages=1))
    assert one.makespan_ns > run.makespan_ns * 1.2            # no overlap with one buffer


def test_rows_and_bytes_are_conserved(chip):
    """Every row is read once and written once, on one AIV; 1000 rows over 64 AIVs."""
    p = SwigluParams(1000, 512, sf_dtype="ue8m0")
    s = swiglu_schedule(chip, p)
    loads = [i for prog in s.cores for (u, pipe), ins in prog.pipes.items() if pipe == "mte2"
             for i in ins]
    gate = sum(1 for i in loads if type(i) is isa.Copy and i.label == "load gate row")
    assert gate == 1000
    read = sum(i.size_bytes for i in loads if type(i) is isa.Copy)
    wrote = sum(i.size_bytes for prog in s.cores for (u, pipe), ins in prog.pipes.items()
                if pipe == "mte3" for i in ins if type(i) is isa.Copy)
    assert read == 1000 * 2 * 512 * 2
    assert wrote == 1000 * (512 + 4 * 1)                      # FP8 row + 4 UE8M0 scales
    per_aiv = sorted(sum(1 for i in ins if type(i) is isa.Copy and i.label == "load gate row")
                     for prog in s.cores for (u, pipe), ins in prog.pipes.items() if pipe == "mte2")
    assert per_aiv[0] == 1000 // 64 and per_aiv[-1] == 1000 // 64 + 1 and len(per_aiv) == 64
    assert swiglu_schedule(chip, SwigluParams(0, 512)).cores == []


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 400), i=st.sampled_from([128, 512, 2048, 3072]),
       stages=st.integers(1, 4), cores=st.sampled_from([0, 1, 5]),
       in_dtype=st.sampled_from(["bf16", "fp32"]))
def test_swiglu_properties(chip, rows, i, stages, cores, in_dtype):
    p = SwigluParams(rows, i, in_dtype, num_cores=cores, stages=stages)
    s = swiglu_schedule(chip, p)
    s.check(chip)
    r = run_schedule(Topology("test", chip), s)
    assert r.makespan_ns >= swiglu_roofline(chip, p)["bound_ns"] * (1 - 1e-9)
    more = dataclasses.replace(p, stages=stages + 1)
    assert _run(chip, more).makespan_ns <= r.makespan_ns * (1 + 1e-9)
    assert run_schedule(Topology("test", chip), s).makespan_ns == r.makespan_ns


@pytest.mark.parametrize("kw,message", [
    (dict(intermediate=200), "intermediate 200 is not a positive multiple of scale_block 128"),
    (dict(intermediate=192, scale_block=64), "intermediate must be a multiple of 128"),
    (dict(stages=9), "stages = 9: expected 1..8"),
    (dict(in_dtype="fp8"), "in_dtype 'fp8': expected one of bf16, fp32"),
    (dict(out_dtype="bf16"), "out_dtype 'bf16': expected fp8"),
    (dict(sf_dtype="e8m0"), "sf_dtype 'e8m0': expected one of fp32, ue8m0"),
    (dict(intermediate=32768), "UB of aiv0 overflows"),
])
def test_impossible_swiglu_is_rejected(chip, kw, message):
    args = dict(rows=64, intermediate=2048)
    args.update(kw)
    with pytest.raises(ScheduleError) as info:
        swiglu_schedule(chip, SwigluParams(**args))
    assert message in str(info.value)


def test_clamp_and_dequant_add_their_vector_work(chip):
    """DeepSeek-V4's kernel between the grouped GEMMs (facts v4-decode 2): the clamp (limit
    10) adds 3 ops per output value (min on gate, max and min on up), the INT8 path's
    dequant of int32 inputs 3 per input value, and reads 4 B per input value."""
    base = SwigluParams(64, 2048)
    ops = lambda p: sum(o.ops for o in vector_ops(p))         # 64 per instruction
    clamp = dataclasses.replace(base, clamp_limit=10.0)
    assert ops(clamp) - ops(base) == pytest.approx(3 * 2048)
    dq = dataclasses.replace(base, in_dtype="int32")
    assert ops(dq) - ops(base) == pytest.approx((6 - 2) * 2048)       # beside bf16's 2 casts
    assert row_bytes(dq)["read"] == 2 * 2048 * 4
    t = lambda p: run_schedule(Topology("t", chip), swiglu_schedule(chip, p)).makespan_ns
    assert t(clamp) >= t(base)
