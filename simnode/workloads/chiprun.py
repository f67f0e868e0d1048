"""Run one kernel schedule on one chip, with optional tracing: shared by chip kinds.

``run_schedule(topology, schedule, options)`` -> ``ChipRun``. With a trace path, the
pipes become threads of a "chip0" process and the L2 and HBM bandwidth in use
become counter tracks (written only when they change).
"""

from __future__ import annotations

import simpy

from simnode.engine.fluid import FluidShare
from simnode.engine.trace import NULL_TRACER, Tracer
from simnode.hardware.chip import ChipRun, ChipSim
from simnode.workloads.registry import RunOptions


def run_schedule(topology, schedule, options: RunOptions | None = None) -> ChipRun:
    options = options or RunOptions()
    tracer = Tracer(options.trace_path, options.trace_scopes or None) if options.trace_path \
        else NULL_TRACER
    try:
        env = simpy.Environment()
        share = FluidShare(env)
        sim = ChipSim(topology.chip, env, share, tracer, "chip0")
        counters = BandwidthCounters(tracer, "chip0", {sim.r_l2: "L2 bandwidth",
                                                        sim.r_hbm: "HBM bandwidth"})
        if tracer.enabled:
            share.on_rates = counters.update
        run = sim.run(schedule)
        counters.flush()
        return run
    finally:
        tracer.close()


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
