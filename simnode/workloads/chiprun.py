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
        if tracer.enabled:
            _counters(tracer, share, sim)
        return sim.run(schedule)
    finally:
        tracer.close()


def _counters(tracer, share: FluidShare, sim: ChipSim) -> None:
    pid = tracer.process("chip0")
    last = {}
    names = {sim.r_l2: "L2 bandwidth", sim.r_hbm: "HBM bandwidth"}

    def on_rates(now_ns, rates):
        for r, name in names.items():
            value = round(rates[r], 3)
            if last.get(r) != value:
                last[r] = value
                tracer.counter(pid, name, now_ns, {"GB/s": value})

    share.on_rates = on_rates
