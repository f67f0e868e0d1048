"""Run one kernel schedule on one chip, with optional tracing: shared by chip kinds.

``run_schedule(topology, schedule, options)`` -> ``ChipRun``; ``chip_kind_result`` runs
a schedule and builds the kind's ``Result`` (the generator's meta as details, plus the
L2 hit share, the instruction count and the roofline bounds). With a trace path, the
pipes become threads of a "chip0" process and the L2 and HBM bandwidth in use
become counter tracks (written only when they change).
"""

from __future__ import annotations

import simpy

from simnode.engine.share import Share
from simnode.engine.trace import NULL_TRACER, Tracer
from simnode.hardware.chip import ChipRun, ChipSim
from simnode.progress import Progress
from simnode.workloads.registry import RunOptions


def run_schedule(topology, schedule, options: RunOptions | None = None,
                 bound_ns: float = 0.0, label: str = "chip") -> ChipRun:
    """Run ``schedule``; with ``options.progress`` and a ``bound_ns``, a progress line of
    simulated us against the bound on a terminal."""
    options = options or RunOptions()
    tracer = Tracer(options.trace_path, options.trace_scopes or None) if options.trace_path \
        else NULL_TRACER
    clock = _ChipClock(label, bound_ns) if options.progress and bound_ns > 0 else None
    if clock is not None and not clock.bar.enabled:
        clock = None                        # not a terminal: no hook on the hot path
    try:
        env = simpy.Environment()
        share = Share(env)
        sim = ChipSim(topology.chip, env, share, tracer, "chip0")
        counters = BandwidthCounters(tracer, "chip0", {sim.r_l2: "L2 bandwidth",
                                                        sim.r_hbm: "HBM bandwidth"})
        hooks = ([counters.update] if tracer.enabled else []) + ([clock] if clock else [])
        if len(hooks) == 1:
            share.on_rates = hooks[0]
        elif hooks:
            share.on_rates = lambda now, rates: [h(now, rates) for h in hooks]
        run = sim.run(schedule)
        counters.flush()
        return run
    finally:
        if clock is not None:
            clock.bar.close()
        tracer.close()


class _ChipClock:
    """Progress of a chip run on a terminal: simulated us against the roofline bound, redrawn
    once per 1% of the bound (the fluid share calls it on every rate change)."""

    def __init__(self, label: str, bound_ns: float):
        self.bar = Progress(max(1, round(bound_ns / 1000)), f"{label}, simulated/bound us")
        self.step_ns = bound_ns / 100
        self.next_ns = 0.0

    def __call__(self, now_ns: float, _rates) -> None:
        if now_ns >= self.next_ns:
            self.next_ns = now_ns + self.step_ns
            self.bar.update(int(now_ns / 1000))


def chip_kind_result(name: str, kind: str, topology, schedule, options, bound: dict | None = None,
                     extra: dict | None = None):
    """Run ``schedule`` and return its Result; ``bound`` holds ``bound_ns`` and its terms."""
    from simnode.report.result import chip_result
    run = run_schedule(topology, schedule, options, (bound or {}).get("bound_ns", 0.0), name)
    details = {k: v for k, v in schedule.meta.items() if k != "kind"}
    details.update(extra or {})
    bound = bound or {}
    for term in ("compute_ns", "l2_ns", "hbm_ns"):
        if term in bound:
            details[f"bound_{term}"] = bound[term]
    details["l2_hit_frac"] = run.l2_hits / max(1, run.l2_hits + run.l2_misses)
    details["instructions"] = schedule.num_instructions()
    return chip_result(name, kind, run, topology.chip, bound.get("bound_ns", 0.0), details), run


class BandwidthCounters:
    """Counter tracks of the bandwidth in use on chosen resources of a share.

    Updates at one timestamp are coalesced (only the last is written) and unchanged
    values are skipped, so a trace holds one sample per real change.
    """

    def __init__(self, tracer, process: str, names: dict):
        self.tracer = tracer
        self.pid = tracer.process(process) if tracer.enabled else 0
        self.names = names
        self.pending: dict = {}
        self.last: dict = {}

    def update(self, now_ns: float, rates) -> None:
        for r in self.names:
            value = round(rates[r], 3)
            p = self.pending.get(r)
            if p is not None and p[0] != now_ns:
                self._write(r, *p)
            self.pending[r] = (now_ns, value)

    def _write(self, r, ts_ns: float, value: float) -> None:
        if self.last.get(r) != value:
            self.last[r] = value
            self.tracer.counter(self.pid, self.names[r], ts_ns, {"GB/s": value})

    def flush(self) -> None:
        for r, p in sorted(self.pending.items()):
            self._write(r, *p)
        self.pending.clear()
