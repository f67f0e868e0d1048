"""Run one kernel schedule on one chip, with optional tracing: what every chip kind shares.

``chip_kind(name, doc, fields, build, figures, ...)`` is the ``WorkloadKind`` of a kind that
builds one schedule and runs it on one chip: its run builds the schedule, runs it and adds
the kind's own figures (``ChipFigures``: the roofline bound, figures known before the run,
figures read from the run) to the chip's measures; ``kernel_build(params_class, schedule)``
is the ``build`` of a kind whose fields are its kernel's parameter dataclass, and
``check_num_cores`` the size check every kind with a ``num_cores`` field makes.

``run_schedule(topology, schedule, options)`` -> ``ChipRun``; ``chip_kind_result`` runs
a schedule and builds the kind's ``Result``: one kernel record with the chip's measures
(FLOPs, TFLOPS, pipe busy shares, L2 and HBM traffic), the generator's meta, the L2 hit
share, the instruction count and the roofline bounds (``simnode.report.result``). With a
trace path, the pipes become threads of a "chip0" process and the L2 and HBM bandwidth in
use become counter tracks (written only when they change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import simpy

from simnode import units
from simnode.errors import ConfigError
from simnode.engine.share import Share
from simnode.engine.trace import NULL_TRACER, Tracer
from simnode.hardware.chip import ChipRun, ChipSim
from simnode.instr import isa
from simnode.progress import Progress
from simnode.report.result import Figure, KernelRecord, Result, fig
from simnode.workloads.registry import ALWAYS, RunOptions, WorkloadKind


@dataclass(frozen=True)
class ChipFigures:
    """What a chip kind adds to the chip's measures in its result (``chip_kind_result``)."""
    bound: dict | None = None           #: the roofline: ``bound_ns`` and its terms (``compute_ns``, ...)
    extra: dict | None = None           #: figures known before the run (name -> value or Figure)
    after: Callable | None = None       #: after(run: ChipRun) -> figures read from the run


def chip_kind(name: str, doc: str, fields: tuple, build: Callable, figures: Callable | None = None,
              **more) -> WorkloadKind:
    """The kind ``name`` that runs one schedule on one chip: ``build(topology, params)`` ->
    (the kernel's parameters, KernelSchedule), ``figures(topology, kernel parameters,
    schedule)`` -> ``ChipFigures`` (none: the chip's measures alone); ``more``: the other
    ``WorkloadKind`` fields (check, cost, reference, ...)."""
    kind = name

    def run(topology, params: dict, options=None, name: str = kind):
        p, sched = build(topology, params)
        f = figures(topology, p, sched) if figures is not None else ChipFigures()
        return chip_kind_result(name, kind, topology, sched, options, f.bound, f.extra, f.after)[0]
    return WorkloadKind(kind, fields, run, doc, build=build, **more)


def kernel_build(params_class: type, schedule: Callable) -> Callable:
    """``build`` of a kind whose fields are ``params_class``'s declarations:
    (params_class(**params), schedule(chip, that))."""
    def build(topology, params: dict):
        p = params_class(**params)
        return p, schedule(topology.chip, p)
    return build


def check_num_cores(topology, params: dict, source: str) -> None:
    """Refuse more AI cores than the chip has (0 = all of them)."""
    chip = topology.chip
    if params["num_cores"] > chip.num_ai_cores:
        raise ConfigError(source, "num_cores", params["num_cores"],
                          f"at most the chip's {chip.num_ai_cores} AI cores (0 = all)")


def run_schedule(topology, schedule, options: RunOptions | None = None,
                 bound_ns: float = 0.0, label: str = "chip") -> ChipRun:
    """Run ``schedule``; with ``options.progress`` and a ``bound_ns``, a progress line of
    simulated us against the bound on a terminal."""
    options = options or RunOptions()
    tracer = Tracer(options.trace_path, options.trace_scopes or None) if options.trace_path \
        else NULL_TRACER
    clock = (_ChipClock(label, bound_ns, options.progress == ALWAYS) if options.progress and bound_ns > 0
             else None)
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

    def __init__(self, label: str, bound_ns: float, always: bool = False):
        self.bar = Progress(max(1, round(bound_ns / 1000)), f"{label}, simulated/bound us",
                            enabled=True if always else None)
        self.step_ns = bound_ns / 100
        self.next_ns = 0.0

    def __call__(self, now_ns: float, _rates) -> None:
        if now_ns >= self.next_ns:
            self.next_ns = now_ns + self.step_ns
            self.bar.update(int(now_ns / 1000))


def chip_kind_result(name: str, kind: str, topology, schedule, options, bound: dict | None = None,
                     extra: dict | None = None, after=None):
    """Run ``schedule`` and return (Result, ChipRun): one ``top`` kernel record whose figures are
    the chip's measures, the generator's meta, ``extra``, the bound terms (``bound`` holds
    ``bound_ns`` and its terms), and ``after(run)`` -> more figures (a dict, or Figures)."""
    run = run_schedule(topology, schedule, options, (bound or {}).get("bound_ns", 0.0), name)
    bound = bound or {}
    chip = topology.chip
    span = run.makespan_ns
    busy = run.busy_frac()
    l2_GBps = run.l2_bytes / span if span else 0.0
    hbm_GBps = run.hbm_bytes / span if span else 0.0
    l2_util = l2_GBps / chip.memory.l2_bandwidth_GBps
    hbm_util = hbm_GBps / chip.memory.hbm_bandwidth_GBps
    flops = schedule.flops
    tflops = units.tflops(flops, span)
    figures = [fig("flops", flops, "FLOP", "cube work: 2 x m x n x k summed over the MMADs", digits=None),
               fig("tflops", tflops, "TFLOPS", "achieved: flops / makespan", digits=3, headline=bool(flops)),
               fig("pipe_busy_frac", busy, "fraction", "mean busy share of each pipe kind over the "
                   "units that ran it", headline=True),
               fig("l2_bytes", run.l2_bytes, "B", "bytes through L2", digits=0),
               fig("l2_GBps", l2_GBps, digits=3), fig("l2_util_frac", l2_util, doc="share of L2 bandwidth"),
               fig("hbm_bytes", run.hbm_bytes, "B", "bytes to and from HBM", digits=0),
               fig("hbm_GBps", hbm_GBps, digits=3), fig("hbm_util_frac", hbm_util, doc="share of HBM bandwidth")]
    values = {k: v for k, v in schedule.meta.items() if k != "kind"}
    if not run.lockstep_groups:             # groups the generator declared, not run (a trace)
        values.pop("lockstep_groups", None)
    values.update(extra or {})
    for term in ("compute_ns", "l2_ns", "hbm_ns"):
        if term in bound:
            values[f"bound_{term}"] = bound[term]
    values["l2_hit_frac"] = run.l2_hits / max(1, run.l2_hits + run.l2_misses)
    values["instructions"] = schedule.num_instructions()
    figures += [v if isinstance(v, Figure) else fig(k, v) for k, v in values.items()]
    figures += [fig("busiest_pipe_by_unit", busiest_by_unit(busy), "",
                    "per core kind, its busiest pipe: the one that would bind if the other kind's work were free"),
                fig("idle_on_flags_frac", flag_waits(run), "fraction",
                    "per pipe kind, the share of the run it sat idle on flags, by who sets them")]
    if after is not None:
        more = after(run)
        figures += [v if isinstance(v, Figure) else fig(k, v) for k, v in
                    (more.items() if isinstance(more, dict) else ((f.name, f) for f in more))]
    util, label = _busiest(busy, l2_util, hbm_util)
    record = KernelRecord(kind, span, bound.get("bound_ns", 0.0), label, util, tuple(figures), flat="top")
    return Result(name, kind, span, label, (record,), roofline_ns=bound.get("bound_ns", 0.0),
                  bottleneck_util_frac=util), run


def flag_waits(run, min_frac: float = 0.01) -> dict[str, dict[str, float]]:
    """Per pipe kind, the mean fraction of the run it sat idle on flags, by the pipe (same
    unit) or unit (cross-core) that sets them: where a pipe's time goes when it is not busy.
    Entries under ``min_frac`` are left out."""
    total, count = {}, {}
    span = run.makespan_ns or 1.0
    for (_core, unit, pipe), st in run.pipe_stats.items():
        k = f"{isa.unit_kind(unit)}.{pipe}"
        count[k] = count.get(k, 0) + 1
        acc = total.setdefault(k, {})
        for src, ns in st.wait_ns.items():
            acc[src] = acc.get(src, 0.0) + ns
    out = {}
    for k in sorted(total):
        fr = {src: round(ns / (count[k] * span), 4) for src, ns in sorted(total[k].items())}
        fr = {src: f for src, f in fr.items() if f >= min_frac}
        if fr:
            out[k] = fr
    return out


def _busiest(busy, l2_util: float, hbm_util: float) -> tuple[float, str]:
    """The most utilized of: every pipe kind, L2 bandwidth, HBM bandwidth."""
    cands = [(v, isa.PIPE_NAMES.get(k, k)) for k, v in busy.items()]
    cands += [(l2_util, "L2 bandwidth"), (hbm_util, "HBM bandwidth")]
    cands.sort(key=lambda c: (-c[0], c[1]))
    return cands[0]


def busiest_by_unit(busy) -> dict[str, str]:
    """Per core kind ("aic", "aiv"), its busiest pipe: the pipe that would bind if the
    other kind's work were free, e.g. FixPipe against the cube in S1's 1C1V reasoning."""
    out = {}
    for k, v in sorted(busy.items(), key=lambda kv: (-kv[1], kv[0])):
        out.setdefault(k.split(".", 1)[0], isa.PIPE_NAMES.get(k, k))
    return dict(sorted(out.items()))


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
