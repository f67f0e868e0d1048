"""GM copies whose issue time is ahead of the clock (``ChipSim._resume_at``): the copies due
at one instant share one SimPy queue entry (``_Later``) and must start in exactly the order
one Timeout per copy would have started them in, interleaved the same way with the share's
own events at that instant. The reference form here is that Timeout per copy."""

from __future__ import annotations

import dataclasses

import simpy

from simnode.hardware.chip import ChipSim
from simnode.kernels.gemm import GemmParams, gemm_schedule
from simnode.kernels.sparse_mla import SparseMlaParams, sparse_mla_schedule


def _resume_each(self, p):
    """The reference: one SimPy Timeout per delayed copy, which starts it when it fires."""
    self.env.timeout(p.t - self.env.now).callbacks.append(lambda _e: self._issue_later(p))


def _figures(sim, run):
    return (run.makespan_ns, run.l2_bytes, run.hbm_bytes, run.l2_hits, run.l2_misses,
            sorted((k, dataclasses.astuple(v)) for k, v in run.pipe_stats.items()),
            sim.share.transfers_started, sim.share.recomputes, sim.env.now)


def _both(chip, make, monkeypatch):
    """(batched, reference) figures of a fresh ``make()`` schedule."""
    sim = ChipSim(chip)
    batched = _figures(sim, sim.run(make()))
    with monkeypatch.context() as m:
        m.setattr(ChipSim, "_resume_at", _resume_each)
        sim = ChipSim(chip)
        reference = _figures(sim, sim.run(make()))
    return batched, reference


def test_batched_copy_starts_equal_one_timeout_each_on_a_contended_gemm(chip, monkeypatch):
    batched, reference = _both(
        chip, lambda: gemm_schedule(chip, GemmParams(1024, 2048, 2048, "bf16")), monkeypatch)
    assert batched == reference                 # bit for bit: same floats, same counts


def test_batched_copy_starts_equal_one_timeout_each_on_a_sparse_mla_prefill(chip, monkeypatch):
    batched, reference = _both(
        chip, lambda: sparse_mla_schedule(chip, SparseMlaParams(n_q=32)), monkeypatch)
    assert batched == reference


def _order(chip, monkeypatch, reference: bool) -> list:
    """Copies due at t = 10 registered at t = 0 around SimPy events at the same instant: a
    Timeout between the first two, an urgent event after the third, a Timeout at t = 5 that
    registers a fourth copy due at 10 (its queue time 5 + 5 rounds to 10 exactly). Returns the
    order in which they ran."""
    log = []
    with monkeypatch.context() as m:
        if reference:
            m.setattr(ChipSim, "_resume_at", _resume_each)
        m.setattr(ChipSim, "_issue_later", lambda self, p: log.append(p.name))
        sim = ChipSim(chip)
        env = sim.env
        pipes = {}

        def due(name, t=10.0):
            p = pipes[name] = type("P", (), {"name": name, "t": t})()
            sim._resume_at(p)

        def event(name, delay, priority=simpy.events.NORMAL, then=None):
            ev = simpy.Event(env)
            ev._ok, ev._value = True, None
            ev.callbacks.append(lambda _e: (log.append(name), then and then()))
            env.schedule(ev, priority, delay)

        due("copy1")
        event("timeout", 10.0)
        due("copy2")
        due("copy3")
        event("urgent", 10.0, simpy.events.URGENT)
        event("at 5", 5.0, then=lambda: due("copy4"))
        env.run()
    return log


def test_copies_due_at_one_instant_interleave_with_simpys_events_as_their_own_timeouts_would(
        chip, monkeypatch):
    batched = _order(chip, monkeypatch, reference=False)
    assert batched == _order(chip, monkeypatch, reference=True)
    assert batched == ["at 5", "urgent", "copy1", "timeout", "copy2", "copy3", "copy4"]
