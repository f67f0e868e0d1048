"""Lock-step groups (``KernelSchedule.lockstep``, ``ChipSim(lockstep=True)``, the default)
against the detailed form (``lockstep=False``: every core simulated).

A group's representative starts each GM copy for all its cores, one transfer per class (hits;
misses and writes) weighted by the cores in it, so the share solves the same classes with the
same weights as in the detailed form. While the L2 is the only limit a GEMM's cores run in
exact step and the two forms agree on every time and every pipe statistic; the L2's hits may
differ by a few tiles, because the shadows look up right after their representative rather than
between the other pipes' copies of the same instant. Each case also checks that the reduced
form simulated fewer pipes, so the agreement is not that of two identical runs.
"""

from __future__ import annotations

import pytest

from simnode.config.chip import chip_from_mapping
from simnode.errors import ScheduleError
from simnode.hardware.chip import ChipSim
from simnode.instr import isa
from simnode.instr.schedule import CoreProgram, KernelSchedule, from_records, to_records
from simnode.kernels.gemm import GemmParams, gemm_schedule

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
