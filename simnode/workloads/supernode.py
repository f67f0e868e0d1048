"""Helpers shared by the workload kinds that run on a supernode (``deepep``, ``deepep_hccs``,
``moe_layer``, ``transport``).

``link_util(net)``: the per-link busy fraction over time, which ``link_series`` turns into
the result's series (series.json of an output folder, the report's heat maps).

For the kinds of the EP family (``simnode.ep``): ``run_kernels(make, phase, ranks, options)``
runs each phase's kernel (dispatch and combine; combine in a forked process beside dispatch
where that pays, with a progress line and the trace when asked) and ``ep_result(...)``
assembles the ``Result``: per kernel its bandwidth by the benchmark's convention, the
figures the kind adds, wire bytes, phases, hottest links, chip resources and what-ifs; the
busiest resource over both kernels; the link series.
"""

from __future__ import annotations

import numpy as np

from simnode import units
from simnode.ep.kernel import COMPILED_FROM_RANKS
from simnode.ep.trace import EPTracer
from simnode.forked import can_fork, in_child
from simnode.progress import Progress
from simnode.report.result import KernelRecord, Result, Series, fig
from simnode.workloads.registry import ALWAYS

LINK_UTIL_MAX_BINS = 64      # time bins kept per link in ``{kernel}_link_util``
CHIP_SERIES = ("hbm", "urma_tx", "urma_rx")   # per-rank chip resources kept beside the links


def link_series(kernel: str, util: dict) -> list:
    """``link_util``'s bins as two result series of ``kernel``: every link's busy fraction
    (``link_util``) and each rank's HBM and URMA ceiling (``chip_util``, rows "rankR.hbm")."""
    edges = tuple(util["bin_edges_ns"])
    out = [Series("link_util", kernel, "fraction", edges, util["links"], "busy fraction of each network link")]
    if util.get("chip"):
        out.append(Series("chip_util", kernel, "fraction", edges, util["chip"],
                          "busy fraction of each rank's HBM and URMA send / receive ceiling"))
    return out


def round4(a: np.ndarray) -> np.ndarray:
    """``round(x, 4)`` of every element, as Python rounds (the double nearest to x's exact
    value rounded half-even to 4 decimals): k = rint(x * 1e4) is that integer unless
    x * 1e4 lies within its rounding error of a half (those few go through ``round``),
    and k / 1e4 is the double nearest to k / 10^4, as Python's result is."""
    t = a * 1e4
    out = np.rint(t) / 1e4
    with np.errstate(invalid="ignore"):
        # t's own rounding error is <= 2^-24 below 2^29, far inside 1e-6; larger or not
        # finite values (never a busy fraction) are left to ``round``
        near = ~(np.abs(t) < 2.0 ** 29) | (np.abs(t - np.floor(t) - 0.5) < 1e-6)
    for i in zip(*np.nonzero(near)):
        out[i] = round(float(a[i]), 4)
    return out


def link_util(net, max_bins: int = LINK_UTIL_MAX_BINS) -> dict:
    """Busy fraction per network link over time, in at most ``max_bins`` equal bins, and
    the same for each rank's HBM and URMA ceiling: {"bin_edges_ns": [...], "links": {name:
    [fraction per bin]}, "chip": {"rank0.hbm": [...], ...}}. Adjacent bins of
    ``net.utilization_series()`` are averaged k at a time (they are of equal width); the
    last group may hold fewer bins and ends at the last recorded edge."""
    edges, frac = net.utilization_series()
    k = -(-frac.shape[0] // max_bins)
    starts = np.arange(0, frac.shape[0], k)
    merged = np.add.reduceat(frac, starts, axis=0) / np.diff(np.append(starts, frac.shape[0]))[:, None]
    out_edges = [float(e) for e in edges[starts]] + [float(edges[-1])]

    cols = round4(merged).T.tolist()        # Python floats, one list per resource, at once

    def series(r):
        return cols[r]

    names = net.share.names
    ports = set(net.ports.tolist())
    chip = [r for r in range(len(names))
            if r not in ports and names[r].partition(".")[2] in CHIP_SERIES]
    return {"bin_edges_ns": out_edges,
            "links": {names[r]: series(r) for r in net.ports.tolist()},
            "chip": {names[r]: series(r) for r in chip}}


def kernel_bottleneck(pr) -> tuple[float, str]:
    """(busy share, name) of a network kernel's busiest resource: its hottest link or the
    busiest rank's chip resources (``pr``: a DeepEP-style kernel run); ties (equal to float
    noise): the first."""
    cands = [(u, f"link {n}") for n, _, u in pr.hottest[:1]]
    cands += [(u, pr.busiest[res]) for res, u in pr.resources.items()]
    k_util, k_label = -1.0, ""
    for u, label in cands:
        if round(u, 9) > round(k_util, 9):
            k_util, k_label = u, label
    return k_util, k_label


def rate_figures(pr, gbps_doc: str, network_doc: str) -> tuple:
    """The figures every network kernel's record starts with: its GB/s per rank (mean, the
    slowest, the fastest; ``gbps_doc`` says what is counted) and without the rank's own
    records (``network_doc``)."""
    g = pr.GBps
    return (
        fig("GBps", float(g.mean()), "GB/s", gbps_doc, headline=True),
        fig("GBps_min", float(g.min()), "GB/s", "the slowest rank's GBps"),
        fig("GBps_max", float(g.max()), "GB/s", "the fastest rank's GBps"),
        fig("network_GBps", float(pr.network_GBps.mean()), "GB/s", network_doc, headline=True),
    )


def network_figures(pr, *what_ifs) -> tuple:
    """The figures every network kernel's record ends with: wire bytes, the first rank's
    phases, the hottest links, the chip resources, the kind's ``what_ifs`` figures, and the
    solver's recomputes."""
    return (
        fig("wire_bytes", pr.wire_bytes, "B", "bytes on the wire, headers included"),
        fig("phases_us", {n: round(units.ns_to_us(b - a), 3) for n, (a, b) in pr.ranks[0].phases.items()},
            "us", "the first rank's phases"),
        fig("hottest_links", [{"link": n, "bytes": b, "util_frac": round(u, 4)} for n, b, u in pr.hottest],
            "", "the busiest links: bytes and busy fraction of the kernel time"),
        fig("chip_util_frac", pr.resources, "fraction", "busy share of the busiest rank's chip resources"),
        fig("chip_busiest", pr.busiest, "", "which rank's resource that is"),
        *what_ifs,
        fig("solver_recomputes", pr.solver_recomputes, "solves", "rate solves of the flow network"))


# -- the EP family's kinds -----------------------------------------------------------------

#: from this size on, ``simnode run`` simulates combine in a forked process beside dispatch
#: (RunOptions.jobs >= 2). Below it the fork, the child's own load of numba's code and the
#: result's pickling cost what they save (measured on the deepep kind, whole process, 2
#: cores: EP32 1.32-1.37 s with against 1.17-1.34 s without; EP64 even; EP128 2.50 s
#: against 2.9 s)
PARALLEL_FROM_RANKS = 64
#: ... and up to this size: each process holds a network of its own (deepep at EP1024: 882
#: MiB peak for dispatch's, 1131 for combine's, measured), and at EP2048 one alone peaks at
#: 3.66 GiB, so two would pass the 4 GiB one run may use
PARALLEL_UP_TO_RANKS = 1024


def two_processes(ranks: int, phase: str) -> bool:
    """Whether a run of this size and phase may simulate combine beside dispatch."""
    return phase == "both" and PARALLEL_FROM_RANKS <= ranks <= PARALLEL_UP_TO_RANKS


def warm_compiled() -> None:
    """Import numba and make the engine's compiled dispatchers in this process (~0.2 s at
    EP128), so that a forked child inherits them; each process still loads the cached machine
    code of the signatures it calls at its first call."""
    import simpy
    from simnode.engine.share import Share
    Share(simpy.Environment()).compile_now()


class SimClock:
    """A kernel's progress line (on a terminal, or always with --progress): simulated us
    against the analytical bound, which the kernel cannot beat and typically passes by 5-25%."""

    def __init__(self, label: str, always: bool = False):
        self.label, self.always, self.bar = label, always, None

    def __call__(self, now_ns: float, bound_ns: float) -> None:
        if self.bar is None:
            self.bar = Progress(max(1, round(bound_ns / 1000)), f"{self.label}, simulated/bound us",
                                enabled=True if self.always else None)
        self.bar.update(int(now_ns / 1000))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_kernels(make, phase: str, ranks: int, options=None, warm=None) -> tuple[dict, dict]:
    """({kind: PhaseRun}, {kind: link_util}) of the kernels ``phase`` names ("both",
    "dispatch", "combine"), in that order. ``make(tracer, on_progress)`` gives a fresh
    ``simnode.ep.kernel.EPKernel``. Dispatch and combine are two separate simulations of the
    same plan (each its own clock and network), so with ``options.jobs`` >= 2 and no trace,
    combine runs in a forked process beside dispatch at the sizes ``two_processes`` allows,
    with the result the sequential loop gives; numba is imported once, before the fork (by
    ``warm()``, the member's, or ``warm_compiled`` from ``COMPILED_FROM_RANKS``), and only
    combine draws a progress line."""
    phases = ("dispatch", "combine") if phase == "both" else (phase,)
    tracer = EPTracer.open(options)
    show = options is not None and getattr(options, "progress", False)
    jobs = getattr(options, "jobs", 1) if options is not None else 1

    def one(kind: str, progress: bool = True):
        clock = SimClock(f"EP{ranks} {kind}", show == ALWAYS) if show and progress else None
        sim = make(tracer, clock)
        try:
            out = sim.run(kind)
        finally:
            if clock is not None:
                clock.close()
        return out, link_util(sim.net)

    results = {}
    try:
        if jobs >= 2 and tracer is None and two_processes(ranks, phase) and can_fork():
            if warm is not None:
                warm()
            elif ranks >= COMPILED_FROM_RANKS:
                warm_compiled()
            combine = in_child(lambda: one("combine"))
            try:
                results["dispatch"] = one("dispatch", progress=False)
            except BaseException:
                combine.kill()
                raise
            results["combine"] = combine.wait()
        else:
            for kind in phases:
                results[kind] = one(kind)
    finally:
        if tracer is not None:
            tracer.close()
    return {k: results[k][0] for k in phases}, {k: results[k][1] for k in phases}


def ep_result(name: str, kind_name: str, runs: dict, util: dict, header: list, gbps_doc: str,
              network_doc: str, record_figures) -> Result:
    """The ``Result`` of an EP family kind: ``header`` figures, then per kernel (``runs``,
    ``util``: ``run_kernels``'s) a record of its GB/s (``gbps_doc``, ``network_doc`` say what
    is counted), the kind's figures, the network figures and its what-ifs
    (``record_figures(kind, phase_run) -> (figures, what_if_figures)``); the busiest rank's
    HBM and the busiest resource over all kernels; the link series."""
    kernels, series = [], []
    hbm_util, bottleneck, worst = 0.0, "", -1.0
    for kind, pr in runs.items():
        k_util, k_label = kernel_bottleneck(pr)
        if round(k_util, 9) > round(worst, 9):
            worst, bottleneck = k_util, f"{k_label} ({kind})"
        hbm_util = max(hbm_util, pr.resources["hbm"])
        figures, what_ifs = record_figures(kind, pr)
        kernels.append(KernelRecord(kind, float(pr.kernel_ns.mean()), pr.bound_ns, k_label, k_util, (
            *rate_figures(pr, gbps_doc, network_doc), *figures, *network_figures(pr, *what_ifs))))
        series += link_series(kind, util[kind])
    header = [*header, fig("hbm_util_frac", hbm_util, doc="the busiest rank's HBM busy share, "
                           "either kernel")]
    return Result(name, kind_name, sum(k.time_ns for k in kernels), bottleneck, tuple(kernels),
                  tuple(header), tuple(series), roofline_ns=sum(pr.bound_ns for pr in runs.values()))
