"""ChipSim on hand-built schedules with closed-form answers (facts 3.6 timing rules):
copies, MMADs, vector ops, flags, the MTE2 outstanding-request limit, HBM sharing,
the L2 hit/miss model, deadlock reports and schedule rejection.

All expected times are computed from the 950DT spec here, in AIC cycles at 1.65 GHz
(cycles / 1.65 = ns), not copied from a run.
"""

from __future__ import annotations

import json

import pytest

from simnode.config.chip import chip_from_mapping
from simnode.engine.trace import Tracer
from simnode.errors import DeadlockError, ScheduleError
from simnode.hardware.chip import ChipSim
from simnode.hardware.memory import L2Cache
from simnode.instr import isa
from simnode.instr.schedule import CoreProgram, KernelSchedule

GHZ = 1.65


def ns(cycles: float) -> float:
    return cycles / GHZ


def schedule(*cores: dict, name: str = "probe") -> KernelSchedule:
    """One CoreProgram per mapping of (unit, pipe) -> instructions, in the given order."""
    return KernelSchedule(name, [CoreProgram(i, {k: list(v) for k, v in c.items()})
                                 for i, c in enumerate(cores)])


def run(chip, *cores: dict, tracer=None):
    sim = ChipSim(chip, tracer=tracer) if tracer else ChipSim(chip)
    return sim.run(schedule(*cores))


def variant(chip_mapping, **memory) -> object:
    chip_mapping["chip"]["memory"].update(memory)
    return chip_from_mapping(chip_mapping["chip"], "test")


# -- single instructions on an idle chip ---------------------------------------------------

def test_gm_to_l1_copy_is_latency_plus_bytes_over_path_rate(chip):
    size = 65536
    r = run(chip, {("aic", "mte2"): [isa.Copy("gm_to_l1", size, ("A", 0))]})
    # 100 B/cycle path (below L2 5000 and HBM 3500 GB/s = 3030 / 2121 B/cycle), 190-cycle base
    assert r.makespan_ns == pytest.approx(ns(190 + size / 100), abs=1e-6)
    assert r.l2_bytes == pytest.approx(size) and r.hbm_bytes == pytest.approx(size)
    assert (r.l2_hits, r.l2_misses) == (0, 1)
    st = r.pipe_stats[(0, "aic", "mte2")]
    assert st.busy_ns == pytest.approx(ns(size / 100)) and st.stall_ns == pytest.approx(0, abs=1e-9)


def test_small_gm_copies_issue_at_the_min_issue_interval(chip):
    # 1000 B streams in 10 cycles, but the pipe issues at most every 64 cycles
    r = run(chip, {("aic", "mte2"): [isa.Copy("gm_to_l1", 1000, ("A", 0)),
                                     isa.Copy("gm_to_l1", 1000, ("A", 1))]})
    assert r.makespan_ns == pytest.approx(ns(64 + 10 + 190), abs=1e-6)


def test_local_l1_to_l0_copy(chip):
    size = 32768
    r = run(chip, {("aic", "mte1"): [isa.Copy("l1_to_l0", size)]})
    assert r.makespan_ns == pytest.approx(ns(size / 256 + 5), abs=1e-9)
    assert r.l2_bytes == 0 and r.hbm_bytes == 0


def test_fixpipe_to_ub_moves_out_dtype_bytes(chip):
    # 128 x 128 bf16 = 32768 B at 128 B/cycle + 58-cycle base
    r = run(chip, {("aic", "fix"): [isa.Fixpipe(128, 128, "bf16", "ub")]})
    assert r.makespan_ns == pytest.approx(ns(32768 / 128 + 58), abs=1e-9)


@pytest.mark.parametrize("m,n,k,dtype,cycles", [
    (128, 128, 128, "bf16", 128 * 128 * 128 / 4096),
    (64, 128, 128, "bf16", 64 * 128 * 128 / 4096),
    (32, 128, 128, "bf16", 64 * 128 * 128 / 4096),     # m < 64 costs as m = 64 (saturating_m_rows)
    (1, 16, 16, "bf16", 64 * 16 * 16 / 4096),
    (128, 128, 128, "fp8", 128 * 128 * 128 / 8192),
    (128, 128, 256, "fp4", 128 * 128 * 256 / 16384),
    (128, 136, 128, "bf16", 8 * 9 * 8),               # n rounds up to whole 16-wide fractals
])
def test_mmad_cycles(chip, m, n, k, dtype, cycles):
    r = run(chip, {("aic", "m"): [isa.Mmad(m, n, k, dtype)]})
    assert r.makespan_ns == pytest.approx(ns(cycles + 8), abs=1e-9)   # + mmad_latency_cycles
    assert r.pipe_stats[(0, "aic", "m")].busy_ns == pytest.approx(ns(cycles))


def test_mmad_latency_is_pipelined(chip):
    # two MMADs back to back: the latency is paid once, at the end
    r = run(chip, {("aic", "m"): [isa.Mmad(128, 128, 128, "bf16")] * 2})
    assert r.makespan_ns == pytest.approx(ns(2 * 512 + 8), abs=1e-9)


@pytest.mark.parametrize("op,cycles", [
    (isa.VecOp(5100, "simple"), 100),                   # 51 ops/cycle
    (isa.VecOp(1300, "div"), 100),                      # 13 ops/cycle
    (isa.VecOp(800, "special"), 100),                   # 8 ops/cycle
    (isa.VecOp(51, "simple", ub_bytes=256 * 300), 300),  # UB-bound: 256 B/cycle
    (isa.VecOp(5100, "simple", decode_bytes=64 * 100), 100),    # decoder streams with the ALU
    (isa.VecOp(51, "simple", decode_bytes=64 * 250), 250),      # decoder-bound: 64 B/cycle
])
def test_vector_op_cycles(chip, op, cycles):
    r = run(chip, {("aiv0", "v"): [op]})
    assert r.makespan_ns == pytest.approx(ns(cycles), abs=1e-9)


def test_scalar_and_delay(chip):
    r = run(chip, {("aic", "s"): [isa.Scalar(33), isa.Delay(100.0)]})
    assert r.makespan_ns == pytest.approx(ns(33) + 100.0, abs=1e-9)


# -- shared bandwidth ------------------------------------------------------------------------

def test_two_cores_share_hbm_equally(chip_mapping):
    """HBM lowered to 100 GB/s: each of two concurrent misses gets 50 GB/s (below its
    165 GB/s path cap and L2's 5000), so both end at 2 x bytes / HBM + base latency."""
    chip = variant(chip_mapping, hbm_bandwidth_GBps=100)
    size = 20000
    r = run(chip, {("aic", "mte2"): [isa.Copy("gm_to_l1", size, ("A", 0))]},
            {("aic", "mte2"): [isa.Copy("gm_to_l1", size, ("B", 0))]})
    expected = 2 * size / 100 + ns(190)
    assert r.makespan_ns == pytest.approx(expected, abs=1e-6)
    for core in (0, 1):
        st = r.pipe_stats[(core, "aic", "mte2")]
        assert st.finish_ns == pytest.approx(expected, abs=1e-6)
        # the stall is the time beyond the uncontended 100 B/cycle stream
        assert st.stall_ns == pytest.approx(2 * size / 100 - ns(size / 100), abs=1e-6)
    assert r.hbm_bytes == pytest.approx(2 * size)


def test_l2_hit_is_not_limited_by_hbm(chip_mapping):
    """HBM at 10 GB/s: the first read of a region streams at 10, the re-read (a hit)
    at the 165 GB/s path rate, through L2 only."""
    chip = variant(chip_mapping, hbm_bandwidth_GBps=10)
    size = 4000
    r = run(chip, {("aic", "mte2"): [isa.Copy("gm_to_l1", size, ("A", 0)),
                                     isa.Copy("gm_to_l1", size, ("A", 0))]})
    assert r.makespan_ns == pytest.approx(size / 10 + size / (100 * GHZ) + ns(190), abs=1e-6)
    assert (r.l2_hits, r.l2_misses) == (1, 1)
    assert r.hbm_bytes == pytest.approx(size) and r.l2_bytes == pytest.approx(2 * size)


# -- MTE2 outstanding-request limit ------------------------------------------------------------

def _small_copies(count: int, size: int = 64):
    return {("aiv0", "mte2"): [isa.Copy("gm_to_ub", size, ("x", i)) for i in range(count)]}


@pytest.fixture
def chip_no_ii(chip_mapping):
    """The 950DT with GM->UB descriptors unthrottled, to isolate the outstanding limit."""
    chip_mapping["chip"]["paths"]["gm_to_ub"]["min_issue_interval_cycles"] = 0
    return chip_from_mapping(chip_mapping["chip"], "test")


def test_small_copies_are_descriptor_limited(chip):
    """facts 1.4, S8: GM->UB is descriptor-limited below 512 B: one issue per 10 cycles."""
    stream, base, ii = 64 / (50 * GHZ), ns(90), ns(10)
    r = run(chip, _small_copies(17))
    assert r.makespan_ns == pytest.approx(16 * ii + stream + base, abs=1e-6)


def test_sixteen_small_copies_overlap(chip_no_ii):
    stream, base = 64 / (50 * GHZ), ns(90)
    r = run(chip_no_ii, _small_copies(16))
    assert r.makespan_ns == pytest.approx(16 * stream + base, abs=1e-6)


def test_seventeenth_small_copy_waits_for_the_first(chip_no_ii, tmp_path):
    """16 outstanding MTE2 requests per AIV (facts 1.4, S1): the 17th issues when the
    first completes, so the run takes two full copy round trips."""
    chip = chip_no_ii
    stream, base = 64 / (50 * GHZ), ns(90)
    path = tmp_path / "t.json"
    tracer = Tracer(path)
    r = run(chip, _small_copies(17), tracer=tracer)
    tracer.close()
    assert r.makespan_ns == pytest.approx(2 * (stream + base), abs=1e-6)
    spans = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 17
    spans.sort(key=lambda e: e["ts"])
    first_done_us = spans[0]["args"]["done_us"]
    assert first_done_us == pytest.approx((stream + base) / 1000, abs=1e-4)
    assert spans[16]["ts"] >= first_done_us - 1e-4
    assert all(s["ts"] < first_done_us for s in spans[:16])
    # the queue's counter track, sampled at each issue: 1..16, the 17th after one left (16
    # again), then 0 once the last completes
    depth = [e for e in json.loads(path.read_text())["traceEvents"]
             if e["ph"] == "C" and e["name"] == "core00.aiv0 MTE2 outstanding"]
    depth.sort(key=lambda e: e["ts"])
    values = [e["args"]["requests"] for e in depth]
    assert values == list(range(1, 17)) + [16, 0]


# -- flags -------------------------------------------------------------------------------------

L0_COPY = 32768        # 128 cycles at 256 B/cycle, + 5 cycles latency


@pytest.mark.parametrize("wait_first", [True, False], ids=["wait-process-first", "set-process-first"])
def test_wait_flag_waits_for_set_on_another_pipe(chip, wait_first):
    m = {("aic", "m"): [isa.WaitFlag("mte1", "m", 0), isa.Mmad(128, 128, 128, "bf16")]}
    mte1 = {("aic", "mte1"): [isa.Copy("l1_to_l0", L0_COPY), isa.SetFlag("mte1", "m", 0)]}
    core = {**m, **mte1} if wait_first else {**mte1, **m}
    r = run(chip, core)
    # the set fires when the copy completes (stream + latency), then the MMAD runs
    assert r.makespan_ns == pytest.approx(ns(128 + 5 + 512 + 8), abs=1e-9)


def test_set_fires_after_gm_copy_latency(chip):
    size = 16384
    r = run(chip, {("aic", "mte2"): [isa.Copy("gm_to_l1", size, ("A", 0)), isa.SetFlag("mte2", "mte1", 3)],
                   ("aic", "mte1"): [isa.WaitFlag("mte2", "mte1", 3), isa.Copy("l1_to_l0", L0_COPY)]})
    assert r.makespan_ns == pytest.approx(ns(size / 100 + 190) + ns(128 + 5), abs=1e-6)


def test_pipe_keeps_issuing_after_a_set(chip):
    # the second copy starts when the first has streamed, not when it completes
    r = run(chip, {("aic", "mte1"): [isa.Copy("l1_to_l0", L0_COPY), isa.SetFlag("mte1", "m", 0),
                                     isa.Copy("l1_to_l0", L0_COPY)],
                   ("aic", "m"): [isa.WaitFlag("mte1", "m", 0)]})
    assert r.makespan_ns == pytest.approx(ns(128 + 128 + 5), abs=1e-9)


def test_barrier_waits_for_own_completions(chip):
    r = run(chip, {("aic", "mte1"): [isa.Copy("l1_to_l0", L0_COPY), isa.Barrier(),
                                     isa.Copy("l1_to_l0", L0_COPY)]})
    assert r.makespan_ns == pytest.approx(ns(2 * (128 + 5)), abs=1e-9)


def test_repeated_sets_are_consumed_in_order(chip):
    # two sets at 133 and 266 cycles (with a barrier between); two waits each consume one
    r = run(chip, {("aic", "mte1"): [isa.Copy("l1_to_l0", L0_COPY), isa.SetFlag("mte1", "m", 1),
                                     isa.Barrier(), isa.Copy("l1_to_l0", L0_COPY),
                                     isa.SetFlag("mte1", "m", 1)],
                   ("aic", "m"): [isa.WaitFlag("mte1", "m", 1), isa.Mmad(64, 64, 64, "bf16"),
                                  isa.WaitFlag("mte1", "m", 1), isa.Mmad(64, 64, 64, "bf16")]})
    # first MMAD (64 cycles) ends at 197 < 266: the second starts at 266
    assert r.makespan_ns == pytest.approx(ns(266 + 64 + 8), abs=1e-9)


def test_cross_core_flag_aiv_to_aic(chip):
    r = run(chip, {("aiv0", "v"): [isa.VecOp(5100, "simple"), isa.CrossSet("aic", 3)],
                   ("aic", "m"): [isa.CrossWait("aiv0", 3), isa.Mmad(128, 128, 128, "bf16")]})
    assert r.makespan_ns == pytest.approx(ns(100 + 512 + 8), abs=1e-9)


def test_idle_time_on_flags_is_charged_to_the_setter(chip):
    r = run(chip, {("aiv0", "v"): [isa.VecOp(5100, "simple"), isa.CrossSet("aic", 3)],
                   ("aic", "m"): [isa.CrossWait("aiv0", 3), isa.Mmad(128, 128, 128, "bf16")]})
    waits = r.pipe_stats[(0, "aic", "m")].wait_ns
    assert waits == {"aiv0": pytest.approx(ns(100), abs=1e-9)}     # idle until the VF ends
    assert r.pipe_stats[(0, "aiv0", "v")].wait_ns == {}


def test_cross_core_flag_aic_to_aiv(chip):
    r = run(chip, {("aiv1", "v"): [isa.CrossWait("aic", 15), isa.VecOp(5100, "simple")],
                   ("aic", "m"): [isa.Mmad(128, 128, 128, "bf16"), isa.CrossSet("aiv1", 15)]})
    # the set waits for the MMAD's completion latency
    assert r.makespan_ns == pytest.approx(ns(512 + 8 + 100), abs=1e-9)


def test_flags_are_per_core(chip):
    # core 1's set must not release core 0's wait
    with pytest.raises(DeadlockError, match="core00.aic.m"):
        run(chip, {("aic", "m"): [isa.WaitFlag("mte1", "m", 0)]},
            {("aic", "mte1"): [isa.SetFlag("mte1", "m", 0)]})


# -- deadlock ------------------------------------------------------------------------------------

def test_wait_without_set_is_a_deadlock(chip):
    with pytest.raises(DeadlockError) as info:
        run(chip, {("aic", "mte1"): [isa.Copy("l1_to_l0", L0_COPY)],
                   ("aic", "m"): [isa.WaitFlag("mte1", "m", 2), isa.Mmad(64, 64, 64, "bf16")]})
    msg = str(info.value)
    assert "'probe' deadlocked" in msg
    assert "1 waiting pipe(s)" in msg
    assert "core00.aic.m waits on flag mte1->m event 2" in msg


def test_circular_wait_names_every_stuck_pipe(chip):
    with pytest.raises(DeadlockError) as info:
        run(chip, {("aic", "m"): [isa.WaitFlag("mte1", "m", 0), isa.SetFlag("m", "mte1", 0)],
                   ("aic", "mte1"): [isa.WaitFlag("m", "mte1", 0), isa.SetFlag("mte1", "m", 0)],
                   ("aiv0", "v"): [isa.CrossWait("aic", 5)]})
    msg = str(info.value)
    assert "3 waiting pipe(s)" in msg
    assert "core00.aic.m waits on flag mte1->m event 0" in msg
    assert "core00.aic.mte1 waits on flag m->mte1 event 0" in msg
    assert "core00.aiv0.v waits on cross-core flag 5 (aic -> aiv0)" in msg


# -- schedules the hardware cannot run --------------------------------------------------------

BAD_SCHEDULES = {
    "copy on the wrong pipe": ({("aic", "mte1"): [isa.Copy("gm_to_l1", 64, ("A", 0))]},
                               "path 'gm_to_l1' is issued by the aic mte2 pipe, not aic.mte1"),
    "aiv path on the aic": ({("aic", "mte2"): [isa.Copy("gm_to_ub", 64)]},
                            "path 'gm_to_ub' is issued by the aiv mte2 pipe, not aic.mte2"),
    "unknown path": ({("aic", "mte2"): [isa.Copy("gm_to_l0", 64)]}, "unknown copy path 'gm_to_l0'"),
    "empty copy": ({("aic", "mte1"): [isa.Copy("l1_to_l0", 0)]}, "copy of 0 B; expected > 0"),
    "event id 8": ({("aic", "mte2"): [isa.SetFlag("mte2", "mte1", 8)]},
                   "event id 8 out of range 0..7 for pipe pair mte2->mte1"),
    "negative event id": ({("aic", "mte1"): [isa.WaitFlag("mte2", "mte1", -1)]},
                          "event id -1 out of range 0..7"),
    "set on the wrong pipe": ({("aic", "mte2"): [isa.SetFlag("mte1", "m", 0)]},
                              "SetFlag(mte1->m) must run on pipe 'mte1'"),
    "cross flag 16": ({("aic", "m"): [isa.CrossSet("aiv0", 16)]},
                      "cross-core flag id 16 out of range 0..15"),
    "cross flag between AIVs": ({("aiv0", "v"): [isa.CrossSet("aiv1", 0)]},
                                "cross-core flag between aiv0 and 'aiv1'; expected the AIC and one of its AIVs"),
    "unknown unit": ({("aiv2", "v"): [isa.VecOp(1)]},
                     "unit 'aiv2' does not exist on 'ascend950dt' (units: aic, aiv0, aiv1)"),
    "unknown pipe": ({("aic", "v"): [isa.VecOp(1)]}, "aic has no pipe 'v'"),
    "mmad off the cube": ({("aic", "mte1"): [isa.Mmad(16, 16, 16, "bf16")]}, "mmad runs on aic.m only"),
    "mmad dtype": ({("aic", "m"): [isa.Mmad(16, 16, 16, "int8")]}, "mmad dtype 'int8' not supported"),
}


@pytest.mark.parametrize("case", sorted(BAD_SCHEDULES))
def test_bad_schedule_is_rejected_before_running(chip, case):
    core, fragment = BAD_SCHEDULES[case]
    sched = schedule(core)
    with pytest.raises(ScheduleError) as info:
        sched.check(chip)
    assert fragment in str(info.value)
    assert "schedule 'probe' core 0" in str(info.value)
    sim = ChipSim(chip)
    with pytest.raises(ScheduleError) as info:
        sim.run(sched)
    assert fragment in str(info.value)
    assert sim.env.now == 0.0                 # rejected before any simulated time passed


def test_too_many_cores(chip):
    sched = schedule(*[{("aic", "s"): [isa.Scalar(1)]}] * 33)
    with pytest.raises(ScheduleError, match="uses 33 AI cores; chip 'ascend950dt' has 32"):
        sched.check(chip)


# -- L2 model --------------------------------------------------------------------------------------

def test_l2_first_touch_misses_reread_hits(chip):
    size = 8192
    r = run(chip, {("aic", "mte2"): [isa.Copy("gm_to_l1", size, ("A", 0)),
                                     isa.Copy("gm_to_l1", size, ("A", 0)),
                                     isa.Copy("gm_to_l1", size, ("A", 1))]})
    assert (r.l2_hits, r.l2_misses) == (1, 2)
    assert r.hbm_bytes == pytest.approx(2 * size)
    assert r.l2_bytes == pytest.approx(3 * size)


def test_l2_notalloc_never_allocates(chip):
    size = 8192
    r = run(chip, {("aic", "mte2"): [isa.Copy("gm_to_l1", size, ("A", 0), "notalloc"),
                                     isa.Copy("gm_to_l1", size, ("A", 0), "notalloc"),
                                     isa.Copy("gm_to_l1", size, ("A", 0))]})
    assert (r.l2_hits, r.l2_misses) == (0, 3)
    assert r.hbm_bytes == pytest.approx(3 * size)


def test_l2_uncached_region_always_misses(chip):
    r = run(chip, {("aic", "mte2"): [isa.Copy("gm_to_l1", 4096), isa.Copy("gm_to_l1", 4096)]})
    assert (r.l2_hits, r.l2_misses) == (0, 2)


def test_l2_lru_eviction_in_a_run(chip_mapping):
    chip = variant(chip_mapping, l2_capacity_MiB=0.0625)          # 64 KiB: two 32 KiB regions
    size = 32768
    keys = ["A", "B", "A", "C", "B", "C"]
    # A miss [A]; B miss [A B]; A hit [B A]; C miss evicts B [A C]; B miss evicts A [C B]; C hit
    r = run(chip, {("aic", "mte2"): [isa.Copy("gm_to_l1", size, k) for k in keys]})
    assert (r.l2_hits, r.l2_misses) == (2, 4)
    assert r.hbm_bytes == pytest.approx(4 * size)


def test_l2_write_allocates_and_is_charged_to_hbm(chip):
    size = 4096
    r = run(chip, {("aiv0", "mte3"): [isa.Copy("ub_to_gm", size, ("C", 0)), isa.SetFlag("mte3", "mte2", 0)],
                   ("aiv0", "mte2"): [isa.WaitFlag("mte3", "mte2", 0), isa.Copy("gm_to_ub", size, ("C", 0))]})
    assert (r.l2_hits, r.l2_misses) == (1, 0)
    assert r.hbm_bytes == pytest.approx(size)              # the write, not the re-read
    assert r.l2_bytes == pytest.approx(2 * size)


def test_l2cache_lru_order_and_capacity():
    l2 = L2Cache(100)
    assert not l2.read("a", 40) and not l2.read("b", 40)
    assert l2.read("a", 40)                                # a becomes most recently used
    assert not l2.read("c", 40)                            # evicts b, the LRU
    assert l2.used_bytes == 80
    assert l2.read("a", 40) and l2.read("c", 40)
    assert not l2.read("b", 40)                            # b was evicted (now evicts a)
    assert (l2.hits, l2.misses) == (3, 4)
    assert (l2.hit_bytes, l2.miss_bytes) == (120, 160)


def test_l2cache_notalloc_and_oversized_regions():
    l2 = L2Cache(100)
    assert not l2.read("a", 10, allocate=False)
    assert not l2.read("a", 10, allocate=False)
    assert not l2.read("a", 10)                            # first allocating read still misses
    assert l2.read("a", 10)
    assert not l2.read("big", 200) and not l2.read("big", 200)   # larger than L2: streams through
    assert l2.used_bytes == 10
    l2.write("w", 50, allocate=False)
    assert not l2.read("w", 50, allocate=False)
    l2.write("w", 50)
    assert l2.read("w", 50)


def test_two_pipes_waiting_on_one_cross_flag_is_rejected(chip):
    with pytest.raises(ScheduleError) as info:
        run(chip, {("aiv0", "v"): [isa.CrossWait("aic", 3)],
                   ("aiv0", "mte2"): [isa.CrossWait("aic", 3)],
                   ("aic", "m"): [isa.Mmad(64, 64, 64, "bf16"), isa.CrossSet("aiv0", 3)]})
    assert str(info.value) == ("core00.aiv0.mte2: two pipes wait on cross-core flag 3 "
                               "(aic -> aiv0) at once.")
