"""The burst form of back-to-back GM reads (``ChipSim(gm_bursts=True)``, the default) against
the detailed form (``gm_bursts=False``: every read its own transfer), every core simulated
(``lockstep=False``: tests/hardware/test_lockstep.py has the lock-step groups).

A burst is only taken where the share cannot tell it from its reads (every read of the run
hits when the burst starts, the MTE2 queue never blocks, no gaps between reads), so while the
L2 does not evict the regions of a burst during it, the two forms agree to floating-point
rounding: 1e-9 relative on every time, identical L2 hit and miss counts and bytes. With an L2
that thrashes they may differ in a few hits: within 0.1% of the time. Each case also checks
that bursts were taken (fewer transfers), so the agreement is not that of two identical runs.
"""

from __future__ import annotations

import pytest

from simnode.config.chip import chip_from_mapping
from simnode.engine.trace import Tracer
from simnode.hardware.chip import ChipSim
from simnode.instr import isa
from simnode.instr.schedule import CoreProgram, KernelSchedule
from simnode.kernels.sparse_mla import SparseMlaParams, sparse_mla_schedule

REL = 1e-9


def _both(chip, make):
    """Run the schedule ``make()`` (a fresh one each time) in both forms: (detailed, burst)
    as (ChipRun, transfers started)."""
    out = []
    for bursts in (False, True):
        sim = ChipSim(chip, gm_bursts=bursts, lockstep=False)
        run = sim.run(make())
        out.append((run, sim.share.transfers_started))
    return out


def _agree(a, b):
    assert b.makespan_ns == pytest.approx(a.makespan_ns, rel=REL)
    assert (b.l2_hits, b.l2_misses) == (a.l2_hits, a.l2_misses)
    assert b.l2_bytes == pytest.approx(a.l2_bytes, rel=REL)
    assert b.hbm_bytes == pytest.approx(a.hbm_bytes, rel=REL)
    assert a.pipe_stats.keys() == b.pipe_stats.keys()
    for k, sa in a.pipe_stats.items():
        sb = b.pipe_stats[k]
        assert sb.instructions == sa.instructions
        assert sb.finish_ns == pytest.approx(sa.finish_ns, rel=REL), k
        assert sb.busy_ns == pytest.approx(sa.busy_ns, rel=REL), k
        assert sb.stall_ns == pytest.approx(sa.stall_ns, rel=REL, abs=1e-6), k
        assert sb.queue_full_ns == pytest.approx(sa.queue_full_ns, rel=REL, abs=1e-6), k
        assert sb.wait_ns.keys() == sa.wait_ns.keys(), k
        for src, w in sa.wait_ns.items():
            assert sb.wait_ns[src] == pytest.approx(w, rel=REL, abs=1e-6), (k, src)


@pytest.mark.parametrize("kw", [{}, {"gather2": False}, {"kv_dtype": "fp8"}],
                         ids=["gather2", "one-row-descriptors", "fp8"])
def test_sparse_mla_prefill_bursts_agree_with_the_detailed_form(chip, kw):
    """The gathers of a small prefill: cold misses go read by read, the warm ones in bursts,
    with the 32 cores' AIVs contending for L2 (64 x 82.5 GB/s > 5000 GB/s)."""
    p = SparseMlaParams(n_q=128, kv_len=1024, topk=256, **kw)
    (a, na), (b, nb) = _both(chip, lambda: sparse_mla_schedule(chip, p))
    _agree(a, b)
    assert nb < na / 2                      # most gathers went as bursts


def _reads(n, key0=0, size=4096):
    return [isa.Copy("gm_to_ub", size, ("kv", key0 + i)) for i in range(n)]


def _warm_then(reads_of_pipe):
    """One AIV MTE2 pipe per entry (aiv0 and aiv1 of cores 0, 1, ...): it reads every region
    once (misses, read by read), waits for its own completions, then runs ``reads_of_pipe``
    (hits)."""
    cores = {}
    for x, reads in enumerate(reads_of_pipe):
        warm = [isa.Copy("gm_to_ub", r.size_bytes, r.gm_key) for r in reads]
        cores.setdefault(x // 2, {})[(f"aiv{x % 2}", "mte2")] = warm + [isa.Barrier()] + list(reads)
    return KernelSchedule("bursts", [CoreProgram(c, pipes) for c, pipes in cores.items()])


def test_a_warm_run_of_reads_is_one_burst_with_the_closed_form_time(chip):
    # 16 reads of 4096 B at 50 B/cycle, back to back, then the last completes 90 cycles later
    (a, na), (b, nb) = _both(chip, lambda: _warm_then([_reads(16)]))
    _agree(a, b)
    assert (na, nb) == (32, 17)             # the 16 hits are one transfer
    warm_end = 16 * 4096 / 50 + 90
    assert b.makespan_ns == pytest.approx((warm_end + 16 * 4096 / 50 + 90) / 1.65, rel=1e-12)


def test_bursts_of_many_cores_contending_for_l2_agree(chip):
    # 64 AIVs x 82.5 GB/s > the L2's 5000 GB/s: the share solves max-min while they stream,
    # and the runs have different lengths, so bursts end while others are still streaming
    make = lambda: _warm_then([_reads(8 + c % 9, key0=100 * c) for c in range(64)])  # noqa: E731
    (a, na), (b, nb) = _both(chip, make)
    _agree(a, b)
    assert b.makespan_ns > (2 * 16 * 4096 / 50 + 180) / 1.65 * 1.01   # L2 was the limit
    assert nb == na - sum(7 + c % 9 for c in range(64))


def test_a_run_with_a_miss_goes_read_by_read(chip):
    # the regions were never read: every read misses, so no burst (which pipe misses first
    # depends on when each looks)
    make = lambda: KernelSchedule("cold", [CoreProgram(0, {("aiv0", "mte2"): _reads(16)})])  # noqa: E731
    (a, na), (b, nb) = _both(chip, make)
    _agree(a, b)
    assert na == nb == 16


def test_bursts_in_a_thrashing_l2_stay_within_a_tenth_of_a_percent(chip_mapping):
    # an L2 of 2 MiB under 2 MiB of KV rows and the items' Q and O: it evicts all along, so
    # whether a region is still there when a read of a burst would look it up (a few hundred
    # ns after the burst looked) and the LRU order can differ; the time may not move by 0.1%
    chip_mapping["chip"]["memory"]["l2_capacity_MiB"] = 2
    small = chip_from_mapping(chip_mapping["chip"], "test")
    p = SparseMlaParams(n_q=128, kv_len=2048, topk=256)
    runs = []
    for bursts in (False, True):
        sim = ChipSim(small, gm_bursts=bursts, lockstep=False)
        runs.append((sim.run(sparse_mla_schedule(small, p)), sim))
    (a, da), (b, db) = runs
    assert da.l2.evictions > 1000 and db.l2.evictions > 1000
    assert db.share.transfers_started < 0.95 * da.share.transfers_started
    assert b.makespan_ns == pytest.approx(a.makespan_ns, rel=1e-3)
    assert b.l2_hits + b.l2_misses == a.l2_hits + a.l2_misses
    assert b.l2_misses == pytest.approx(a.l2_misses, rel=0.05)


@pytest.fixture
def chip_no_ii(chip_mapping):
    """The 950DT with GM->UB descriptors unthrottled, so small reads stream back to back."""
    chip_mapping["chip"]["paths"]["gm_to_ub"]["min_issue_interval_cycles"] = 0
    return chip_from_mapping(chip_mapping["chip"], "test")


def test_a_full_queue_ends_the_burst(chip_no_ii):
    # reads shorter than their 90-cycle completion: 16 fill the MTE2 queue (facts 1.4, S1),
    # so the 17th waits for the first to complete and a burst can cover at most 16
    reads = [isa.Copy("gm_to_ub", 64, ("kv", i)) for i in range(40)]
    (a, na), (b, nb) = _both(chip_no_ii, lambda: _warm_then([reads]))
    _agree(a, b)
    assert b.pipe_stats[(0, "aiv0", "mte2")].queue_full_ns > 0
    assert nb < na


def test_a_traced_run_goes_read_by_read(chip, tmp_path):
    # a trace, even of one core's threads, is that of the detailed form: no bursts at all
    tracer = Tracer(tmp_path / "t.json", ["core00.aic.*"])
    sim = ChipSim(chip, tracer=tracer)
    sim.run(_warm_then([_reads(16), _reads(16, key0=100)]))
    tracer.close()
    assert sim.share.transfers_started == 64
