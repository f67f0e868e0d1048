"""Helpers shared by the workload kinds that run on a supernode (``deepep``, ``deepep_hccs``,
``transport``).

``with_num_ranks(topology, num_ranks, kind, source)`` returns the topology at a
workload's EP size (the workload's ``num_ranks`` overrides ``supernode.num_ranks``, so
one topology file serves every size) and ``link_util(net)`` the per-link busy fraction
over time, which ``link_series`` turns into the result's series (series.json of an output
folder, the report's heat maps).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from simnode.errors import ConfigError
from simnode.config.supernode import check_shape
from simnode import units
from simnode.report.result import Series, fig

LINK_UTIL_MAX_BINS = 64      # time bins kept per link in ``{kernel}_link_util``
#: the largest flow-solver batching window a supernode kind takes: a window delays each
#: completion by up to its length, so beyond 100 us (~5% of an EP8 kernel's 1.5-3 ms) a
#: result is off by more than the model's own error; 1e12 would stretch a run 460,000-fold
MAX_BATCH_WINDOW_NS = 100_000.0


def with_num_ranks(topology, num_ranks: int, kind: str, source: str = "workload"):
    """The topology at a workload's ``num_ranks`` (0 = the topology's own count); ``kind``
    and ``source`` (the workload file) name the workload in errors."""
    if topology.supernode is None:
        raise ConfigError(topology.source, "supernode", "<missing>",
                          f"a supernode section: workload kind '{kind}' runs on a supernode")
    if num_ranks and num_ranks != topology.supernode.num_ranks:
        spec = dataclasses.replace(topology.supernode, num_ranks=num_ranks)
        if num_ranks < 2:
            raise ConfigError(source, "num_ranks", num_ranks, "at least 2 ranks")
        try:
            check_shape(spec)
        except ConfigError as exc:
            if exc.key_path != "supernode.num_ranks":
                raise
            # the count came from the workload: name it, and the topology whose shape limits it
            raise ConfigError(source, "num_ranks", num_ranks,
                              f"{exc.expected} (the shape of {topology.source})", exc.hint) from None
        topology = dataclasses.replace(topology, supernode=spec)
    return topology



CHIP_SERIES = ("hbm", "urma_tx", "urma_rx")   # per-rank chip resources kept beside the links


#: the most (sender, receiver) pairs with traffic one run may simulate, unless its kind sets
#: its own: EP1024's all-to-all (1024 x 1023): every pair is a flow with its route, so memory
#: grows with the pairs
MAX_PAIRS = 1024 * 1023


def check_pairs(pairs: int, num_ranks: int, source: str, key: str = "num_ranks",
                limit: int | None = None) -> None:
    """Refuse a run with more communicating pairs than ``limit`` (default ``MAX_PAIRS``),
    before any work."""
    limit = MAX_PAIRS if limit is None else limit
    if pairs > limit:
        raise ConfigError(source, key, num_ranks,
                          f"at most {limit:,} communicating (sender, receiver) pairs ({pairs:,} at "
                          f"{num_ranks} ranks): each is a flow with its route, held in memory")


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
