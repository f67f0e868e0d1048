"""Lock-step groups (``KernelSchedule.lockstep``, ``ChipSim(lockstep=True)``, the default)
against the detailed form (``lockstep=False``: every core simulated).

A group's representative starts each GM copy for all its cores (``simnode.hardware.lockstep``).
Where the detailed cores run in exact step (a GEMM's; a prefill whose KV is all in L2; cold
single-region reads) the two forms agree on every time and every pipe statistic; the L2's hits
may differ by a few regions, because the shadows look up right after their representative
rather than between the other pipes' copies of the same instant. The cold sparse MLA prefill's
cores drift apart from their first KV misses on: one group overstates their contention, eight
come within 0.1% of the makespan with the same traffic. Each case also checks that the reduced
form simulated fewer pipes, so the agreement is not that of two identical runs.
"""

from __future__ import annotations

import pytest

from simnode.config.chip import chip_from_mapping
from simnode.errors import ScheduleError
from simnode.hardware.chip import ChipSim
from simnode.instr import isa
from simnode.instr.schedule import (CoreProgram, KernelSchedule, from_records, lockstep_groups,
                                    to_records)
from simnode.kernels.gemm import GemmParams, gemm_schedule
from simnode.kernels.sparse_mla import SparseMlaParams, sparse_mla_schedule
from simnode.workloads.loader import load_inputs

from tests.conftest import TOPOLOGY

REL = 1e-12


def _both(chip, make):
    """Run ``make()`` (a fresh schedule each time) detailed, then reduced: [(ChipRun, pipes run)]."""
    out = []
    for lockstep in (False, True):
        sim = ChipSim(chip, lockstep=lockstep)
        out.append((sim.run(make()), len(sim._pipes)))
    return out


def _same_times(a, b):
    assert b.makespan_ns == pytest.approx(a.makespan_ns, rel=REL)
    assert a.pipe_stats.keys() == b.pipe_stats.keys()
    assert list(a.pipe_stats) == list(b.pipe_stats)        # the same order: sums over it agree
    for k, sa in a.pipe_stats.items():
        sb = b.pipe_stats[k]
        assert sb.instructions == sa.instructions, k
        for name in ("finish_ns", "busy_ns", "stall_ns", "queue_full_ns"):
            assert getattr(sb, name) == pytest.approx(getattr(sa, name), rel=REL, abs=1e-6), (k, name)
        assert sb.wait_ns.keys() == sa.wait_ns.keys(), k
        for src, w in sa.wait_ns.items():
            assert sb.wait_ns[src] == pytest.approx(w, rel=REL, abs=1e-6), (k, src)
    assert b.l2_bytes == pytest.approx(a.l2_bytes, rel=REL)
    assert b.l2_hits + b.l2_misses == a.l2_hits + a.l2_misses


GEMMS = {
    "bf16": dict(m=2048, n=3584, k=2048),
    "fp16-edges": dict(m=1000, n=3000, k=1536, dtype="fp16"),        # edge blocks: several groups
    "fp8": dict(m=2048, n=2048, k=2048, dtype="fp8"),                 # MX scale loads
    "fp4-dequant": dict(m=512, n=4096, k=2048, dtype="fp4"),          # B loaded and decoded on AIV0
    "ub-epilogue": dict(m=1024, n=4096, k=1024, epilogue="ub"),       # C leaves through AIV1's MTE3
    "one-wave": dict(m=64, n=4096, k=7168),                           # 32 cores, one block each
}


@pytest.mark.parametrize("kw", GEMMS.values(), ids=GEMMS.keys())
def test_gemm_groups_run_as_the_detailed_form(chip, kw):
    make = lambda: gemm_schedule(chip, GemmParams(**kw))  # noqa: E731
    sched = make()
    assert sched.lockstep, "the GEMM declares its groups"
    (a, na), (b, nb) = _both(chip, make)
    assert nb < na / 2
    _same_times(a, b)
    assert b.hbm_bytes == pytest.approx(a.hbm_bytes, rel=1e-3)
    assert b.l2_misses == pytest.approx(a.l2_misses, rel=1e-3)


def test_the_published_bf16_gemm_differs_only_in_a_few_l2_hits(chip):
    # the published shape (workloads/gemm-bf16-4096x7168x16384.yaml): identical times; 14 A
    # tiles that the detailed form misses and this form hits (LRU order at shared instants)
    make = lambda: gemm_schedule(chip, GemmParams(m=4096, n=7168, k=16384))  # noqa: E731
    (a, na), (b, nb) = _both(chip, make)
    assert (na, nb) == (128, 4)
    _same_times(a, b)
    assert b.hbm_bytes == pytest.approx(a.hbm_bytes, rel=1e-3)


def _reads(core, n, size=65536):
    """A core whose AIV0 reads ``n`` regions of its own, then writes one back."""
    instrs = [isa.Copy("gm_to_ub", size, ("x", core, i)) for i in range(n)]
    instrs.append(isa.Copy("ub_to_gm", size, ("y", core), label="out"))
    return CoreProgram(core, {("aiv0", "mte2"): instrs[:-1], ("aiv0", "mte3"): instrs[-1:]})


def test_a_group_whose_misses_are_slower_moves_at_their_pace(chip_mapping):
    # a slow HBM: the first core's regions are in L2, the others' are not, so the hit class
    # outruns the miss class; the group's representative waits for both, which is when the
    # detailed form's slowest core (a miss core) ends
    chip_mapping["chip"]["memory"]["hbm_bandwidth_GBps"] = 200
    slow = chip_from_mapping(chip_mapping["chip"], "test")

    def make():
        cores = [_reads(c, 1) for c in range(4)]
        return KernelSchedule("skew", cores, lockstep=[(0, 1, 2, 3)])

    runs = []
    for lockstep in (False, True):
        sim = ChipSim(slow, lockstep=lockstep)
        sim.l2.read(("x", 0, 0), 65536)                 # core 0's region is warm
        runs.append(sim.run(make()))
    a, b = runs
    ends = [a.pipe_stats[(c, "aiv0", "mte2")].finish_ns for c in range(4)]
    assert ends[0] < min(ends[1:])                      # the hit core ends first in detail
    assert b.makespan_ns == pytest.approx(a.makespan_ns, rel=REL)
    assert b.pipe_stats[(0, "aiv0", "mte2")].finish_ns == pytest.approx(max(ends), rel=REL)
    assert b.hbm_bytes == pytest.approx(a.hbm_bytes, rel=REL)


def test_a_traced_run_is_detailed(chip, tmp_path):
    from simnode.engine.trace import Tracer
    tracer = Tracer(str(tmp_path / "t.json"))
    sim = ChipSim(chip, tracer=tracer)
    sim.run(gemm_schedule(chip, GemmParams(m=64, n=4096, k=1024)))
    tracer.close()
    assert len(sim._pipes) == 32 * 4


@pytest.mark.parametrize("groups, message", [
    ([(0, 9)], "names a core that is not in the schedule"),
    ([(0, 1), (1, 2)], "names a core that is not in the schedule or is in another group"),
    ([(0,)], "expected groups of two or more distinct cores"),
    ([(0, 3)], "core 3 cannot run in lock step with core 0"),
])
def test_a_bad_group_is_refused(chip, groups, message):
    cores = [_reads(0, 2), _reads(1, 2), _reads(2, 2), _reads(3, 3)]
    with pytest.raises(ScheduleError, match=message):
        KernelSchedule("bad", cores, lockstep=groups).check(chip)


def test_groups_survive_the_records_round_trip(chip):
    sched = gemm_schedule(chip, GemmParams(m=64, n=4096, k=1024))
    back = from_records(to_records(sched))
    assert back.lockstep == sched.lockstep and back.lockstep


# -- the sparse MLA prefill ------------------------------------------------------------------------
def _prefill(n_q: int, groups: int) -> SparseMlaParams:
    """The prefill workload's parameters at ``n_q`` queries, in ``groups`` lock-step groups."""
    spec = load_inputs(TOPOLOGY, TOPOLOGY.parents[1] / "workloads" / "sparse-mla-prefill.yaml",
                       [f"n_q={n_q}", f"lockstep_groups={groups}"])
    return SparseMlaParams(**spec.params)


def _run(chip, schedule, warm: bool = False, lockstep: bool = True):
    """``schedule`` run (its groups as one core each unless ``lockstep`` is False); ``warm``:
    every KV region in L2 before it starts."""
    sim = ChipSim(chip, lockstep=lockstep)
    if warm:
        for prog in schedule.cores:
            for instrs in prog.pipes.values():
                for ins in instrs:
                    for key in getattr(ins, "regions", None) or ():
                        sim.l2.write(key, ins.size_bytes // len(ins.regions))
    return sim.run(schedule), len(sim._pipes)


def _finishes(run) -> list:
    out: dict = {}
    for (core, _unit, _pipe), st in run.pipe_stats.items():
        out[core] = max(out.get(core, 0.0), st.finish_ns)
    return [out[c] for c in sorted(out)]


def _same_traffic(a, b):
    assert (b.l2_hits, b.l2_misses) == (a.l2_hits, a.l2_misses)
    assert b.l2_bytes == pytest.approx(a.l2_bytes, rel=1e-9)
    assert b.hbm_bytes == pytest.approx(a.hbm_bytes, rel=1e-9)


@pytest.mark.parametrize("k", [1, 8])
def test_a_warm_prefill_runs_in_lock_step_and_the_reduced_form_is_exact(chip, k):
    # with the KV in L2 every core's gathers hit and its Q reads miss: the detailed cores
    # never drift apart, and a group's copies are its representative's times its cores
    sched = lambda: sparse_mla_schedule(chip, _prefill(128, k))  # noqa: E731
    assert len(sched().lockstep) == k
    (a, na), (b, nb) = _run(chip, sched(), warm=True, lockstep=False), _run(chip, sched(), warm=True)
    assert len(set(_finishes(a))) == 1 and nb < na
    _same_times(a, b)
    _same_traffic(a, b)


def test_cold_single_region_reads_contending_for_hbm_are_exact(chip):
    # 32 cores' 64 AIVs read distinct regions (all miss: 64 x 82.5 GB/s against HBM's 3500),
    # then the same again (all hit, in bursts), and write: the cores stay in lock step, so one
    # group of 32 (31 shadows) is exact
    def make():
        cores = []
        for c in range(32):
            pipes = {}
            for v in (0, 1):
                reads = [isa.Copy("gm_to_ub", 32768, ("q", c, v, i)) for i in range(24)]
                pipes[(f"aiv{v}", "mte2")] = reads + [isa.Barrier()] + reads
                pipes[(f"aiv{v}", "mte3")] = [isa.Copy("ub_to_gm", 65536, ("o", c, v))]
            cores.append(CoreProgram(c, pipes))
        return KernelSchedule("cold", cores, lockstep=[tuple(range(32))])
    (a, na), (b, nb) = _run(chip, make(), lockstep=False), _run(chip, make())
    assert a.pipe_stats[(0, "aiv0", "mte2")].stall_ns > 1000      # HBM was the limit
    assert (na, nb) == (128, 4)
    _same_times(a, b)
    _same_traffic(a, b)


@pytest.mark.parametrize("n_q", [128, 256])
def test_a_cold_prefill_is_within_a_tenth_of_a_percent_with_eight_groups(chip, n_q):
    a, _ = _run(chip, sparse_mla_schedule(chip, _prefill(n_q, 0)))
    f = _finishes(a)
    assert max(f) - min(f) > 1e-3 * max(f)          # the detailed cores drifted apart
    (one, n1), (eight, n8) = (_run(chip, sparse_mla_schedule(chip, _prefill(n_q, k))) for k in (1, 8))
    assert n8 == 8 * n1                             # 8 representatives of 32 cores
    for b in (one, eight):
        _same_traffic(a, b)
        assert list(b.pipe_stats) == list(a.pipe_stats)
    # one group puts every core's Q reads and O writes at one instant: too slow
    assert one.makespan_ns > a.makespan_ns * 1.001
    assert eight.makespan_ns == pytest.approx(a.makespan_ns, rel=1e-3)


def test_a_small_prefill_and_a_decode_run_every_core(chip):
    # fewer than LOCKSTEP_MIN_ITEMS items per core (n_q 64: two), and decode: no groups
    assert sparse_mla_schedule(chip, _prefill(64, 8)).lockstep == []
    assert sparse_mla_schedule(chip, _prefill(128, 8)).lockstep
    decode = load_inputs(TOPOLOGY, TOPOLOGY.parents[1] / "workloads" / "sparse-mla-decode.yaml")
    assert sparse_mla_schedule(chip, SparseMlaParams(**decode.params)).lockstep == []


def test_cores_of_each_shape_are_dealt_round_robin():
    shapes = {"a": [0, 1, 3, 5, 6], "b": [2], "c": [4, 7]}
    assert lockstep_groups(shapes) == [(0, 1, 3, 5, 6), (4, 7)]
    assert lockstep_groups(shapes, 2) == [(0, 3, 6), (1, 5)]      # 4 and 7: one group each
    assert lockstep_groups(shapes, 3) == [(0, 5), (1, 6)]     # (3,), (4,), (7,) run alone
    assert lockstep_groups(shapes, 8) == []                   # every core its own: detailed


def test_a_representative_may_come_after_its_shadows(chip):
    # a group is named by its cores, representative first, in any order of the schedule's cores
    def make():
        return KernelSchedule("late rep", [_reads(c, 2) for c in range(4)], lockstep=[(3, 0, 1, 2)])
    (a, na), (b, nb) = _both(chip, make)
    assert (na, nb) == (8, 2)
    _same_times(a, b)


def test_read_all_is_read_many():
    # the shadows' burst lookups: one C-level pass when every region is present, else read by
    # read; the same hits, misses, bytes, evictions and LRU order as read_many, also when an
    # absent region (or None) comes after present ones and its allocation evicts
    import random
    from simnode.hardware.memory import L2Cache
    rng = random.Random(7)
    for trial in range(200):
        a, b = L2Cache(40 * 64), L2Cache(40 * 64)
        for l2 in (a, b):
            for k in range(30):
                l2.read(("r", k), 64)
        for _ in range(20):
            keys = [rng.choice([("r", rng.randrange(45)), ("r", rng.randrange(30)), None])
                    for _ in range(rng.randrange(1, 12))]
            allocate = rng.random() < 0.8
            assert a.read_many(keys, 64, allocate) == b.read_all(keys, 64, allocate)
            assert list(a._lru.items()) == list(b._lru.items())
            assert (a.hits, a.misses, a.hit_bytes, a.miss_bytes, a.evictions, a.used_bytes) == \
                (b.hits, b.misses, b.hit_bytes, b.miss_bytes, b.evictions, b.used_bytes)
