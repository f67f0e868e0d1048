"""The chip's per-copy path through the share: the small-solve memo (``share.memo.Memo``)
and the ready-made start (``Share.start_keyed``) against the plain forms, bit for bit.

The memo answers a small solve whose inputs equal an earlier one's with that one's rates; a
solve is a function of those inputs, so every rate the share sets must be the same float as
when it solves each time. Each case also checks the memo answered most solves, so the
agreement is not that of two runs that never used it."""

from __future__ import annotations

import dataclasses

import simpy

from simnode.engine.share import Share
from simnode.engine.share.memo import Memo
from simnode.engine.share.solve import ListSolver
from simnode.hardware.chip import ChipSim
from simnode.kernels.gemm import GemmParams, gemm_schedule
from simnode.kernels.sparse_mla import SparseMlaParams, sparse_mla_schedule


def _run(chip, make, memo: bool, monkeypatch):
    """Figures of a fresh ``make()`` schedule, every rate the share set (time, resource rates,
    class rates) and how many solves the memo answered."""
    solved = []
    with monkeypatch.context() as m:
        real = ListSolver.dispatch

        def count(self, table):
            solved.append(1)
            return real(self, table)
        m.setattr(ListSolver, "dispatch", count)
        if not memo:
            m.setattr(Memo, "solve", lambda self, table, solve: False)
        sim = ChipSim(chip)
        seen = []
        share = sim.share
        share.on_rates = lambda now, rates: seen.append(
            (now, tuple(rates), tuple(share.table.crate[c] for c in share.table.active())))
        run = sim.run(make())
    figures = (run.makespan_ns, run.l2_bytes, run.hbm_bytes, run.l2_hits, run.l2_misses,
               sorted((k, dataclasses.astuple(v)) for k, v in run.pipe_stats.items()),
               share.transfers_started, share.recomputes, sim.env.now)
    return figures, seen, share.recomputes - len(solved)


def _agree(chip, make, monkeypatch):
    fig_memo, rates_memo, answered = _run(chip, make, True, monkeypatch)
    fig_plain, rates_plain, none = _run(chip, make, False, monkeypatch)
    assert none == 0
    assert fig_memo == fig_plain
    assert rates_memo == rates_plain             # every solve's rates, to the bit
    assert answered > fig_memo[7] // 2           # the memo answered most solves
    return answered


def test_memo_solves_equal_solving_each_time_on_a_contended_gemm(chip, monkeypatch):
    _agree(chip, lambda: gemm_schedule(chip, GemmParams(1024, 2048, 2048, "bf16")), monkeypatch)


def test_memo_solves_equal_solving_each_time_on_a_sparse_mla_prefill(chip, monkeypatch):
    _agree(chip, lambda: sparse_mla_schedule(chip, SparseMlaParams(n_q=32)), monkeypatch)


def test_memo_sets_a_freed_class_rows_rate_again():
    """A class that left (its row's rate reset to 0) and comes back with the same inputs gets
    its rate from the memo: the second round's rates equal the first's, and it is not
    solved again."""
    env = simpy.Environment()
    share = Share(env)
    l2 = share.add_resource("l2", 10.0)
    done = []
    solves = []
    solver = share.table.solver
    real = solver.dispatch
    solver.dispatch = lambda table: (solves.append(env.now), real(table))[1]

    def round_(start):
        def go():
            yield env.timeout(start - env.now)
            for cap, size in ((12.0, 40.0), (8.0, 20.0)):   # (12 > 10: never uncontended)
                share.start_cb(size, (l2,), None, cap, lambda t, a: done.append((a, t)), cap)
        env.process(go())
    rates = []
    share.on_rates = lambda now, r: rates.append(
        (now >= 100.0, tuple(r), tuple(share.table.crate[c] for c in share.table.active())))
    round_(0.0)
    round_(100.0)
    env.run()
    first = [x[1:] for x in rates if not x[0]]
    second = [x[1:] for x in rates if x[0]]
    assert first == second and len(first) >= 2 and any(x[0] for x in first)
    assert [a for a, _ in done] == [8.0, 12.0] * 2
    # the second round's two sharing solves were answered (no class left: solved, not asked)
    assert solves == [0.0, 4.0, 6.0, 106.0] and share.recomputes == 6


def test_start_keyed_equals_start_cb():
    """``start_keyed`` with the key and weights ``start_cb`` would build: the same served
    times, counts and unit counters (a contended pair, an uncontended one on the fast
    path, and a copy of no bytes)."""
    def run(keyed: bool):
        env = simpy.Environment()
        share = Share(env)
        l2 = share.add_resource("l2", 10.0)
        hbm = share.add_resource("hbm", 3.0)
        out = []

        def cb(t, a):
            out.append((a, t))

        def start(size, res, cap, tag):
            if keyed:
                share.start_keyed(size, (cap, res), (1.0,) * len(res), (cb, tag))
            else:
                share.start_cb(size, res, None, cap, cb, tag)

        def go():
            start(50.0, (l2,), 4.0, "a")
            start(0.0, (l2, hbm), 4.0, "empty")
            yield env.timeout(1.0)
            start(30.0, (l2, hbm), 6.0, "b")
            start(30.0, (l2,), 6.0, "c")
            yield env.timeout(100.0)
            start(20.0, (l2,), 2.0, "alone")        # uncontended: the fast path
        env.process(go())
        env.run()
        share.sync()
        return out, share.transfers_started, share.transfers_done, list(share.bytes_by_resource)
    assert run(True) == run(False)
