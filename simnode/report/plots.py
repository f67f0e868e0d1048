"""Plots of results as PNG bytes (matplotlib, Agg canvas; no pyplot, no global state).

- ``bandwidth_vs_ep_png(points, published)``: DeepEP dispatch and combine GB/s
  against the EP size (``num_ranks``), one line per other swept setting, with the
  published figures of validation/published.yaml overlaid (``published_points``)
  as markers with their tolerance as error bars.
- ``link_heatmap_png(network_util)``: busy fraction of each network link over time,
  one panel per kernel (dispatch, combine); the ``max_links`` links with the highest
  mean busy fraction, busiest on top.
- ``chip_heatmap_png(network_util)``: the same for each rank's HBM and URMA send /
  receive ceiling (``"chip"`` series), grouped by rank, the ``max_ranks`` ranks with
  the busiest URMA first: where combine's reduction takes URMA's HBM share.
- ``pipe_busy_png(points)``: mean busy fraction of every pipe, one panel per core
  kind (AIC, AIV), one bar per run.
- ``roofline_png(points)``: each kernel's position against its roofline bound.
  x = the TFLOPS the kernel would reach at its lower bound, flops / roofline_ns
  (roofline_ns is the largest of the compute, L2 and HBM times at peak rates);
  y = achieved TFLOPS, flops / makespan_ns. The diagonal y = x is the roofline: a
  point's height below it is the simulated/bound ratio (makespan_ns / roofline_ns).
  Kernels without flops (DeepEP) have no point here; their bound ratio is in the
  report's tables.
- ``layer_breakdown_png(points)``: MoE layer runs (an EP size x overlap sweep), one
  stacked bar each: the straggler's compute, exposed communication and imbalance wait.
- ``rank_strip_png(point)``: one MoE layer run, the same split for every rank.

Every function takes plain result dicts (``Result.to_dict()``) and returns PNG bytes;
one with nothing to plot raises ``ValueError`` (``has_*`` tell beforehand).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from simnode import units

#: the published cases of this checkout (absent from a non-editable install)
DEFAULT_CASES = Path(__file__).resolve().parents[2] / "validation" / "published.yaml"
BANDWIDTH_METRICS = ("dispatch_GBps", "combine_GBps", "transport_GBps")
CORE_KINDS = {"aic": "AIC (cube core)", "aiv": "AIV (vector core)"}
_COLORS = {"dispatch_GBps": "tab:blue", "combine_GBps": "tab:orange", "transport_GBps": "tab:green"}


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    # no Software/date metadata: the same figure gives the same bytes
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


# -- (a) bandwidth vs EP size ------------------------------------------------------------

def published_points(workload: str, cases_path=None) -> list[dict]:
    """Published DeepEP bandwidths of ``workload`` (a workload file stem) at plain EP sizes:
    [{"metric", "num_ranks", "GBps", "tolerance_frac", "source"}]. Read from the validation
    file (default: validation/published.yaml of this checkout; none if it is absent).
    Cases that set fields other than num_ranks are a different configuration and left out."""
    from simnode.validate import load_cases
    path = Path(cases_path) if cases_path else DEFAULT_CASES
    if cases_path is None and not path.exists():
        return []
    out = []
    for case in load_cases(path):
        sets = dict(s.split("=", 1) for s in case.sets)
        if (case.metric in BANDWIDTH_METRICS and Path(case.workload).stem == workload
                and set(sets) == {"num_ranks"}):
            out.append({"metric": case.metric, "num_ranks": int(sets["num_ranks"]),
                        "GBps": case.published, "tolerance_frac": case.tolerance, "source": case.source})
    return out


def bandwidth_points(points) -> list:
    """The points with a network bandwidth (``*_GBps`` of BANDWIDTH_METRICS) and an EP size
    (``num_ranks``); others (a chip kernel in a sweep of mixed kinds) are left out."""
    return [p for p in points if "num_ranks" in p.result and any(m in p.result for m in BANDWIDTH_METRICS)]


def has_bandwidth(points) -> bool:
    return bool(bandwidth_points(points))


def bandwidth_vs_ep_png(points, published=(), title: str = "") -> bytes:
    """``points``: PointData of DeepEP or transport runs (result has num_ranks and *_GBps);
    points without them are left out (``bandwidth_points``)."""
    points = bandwidth_points(points)
    if not points:
        raise ValueError("no network bandwidth (dispatch_GBps / combine_GBps / transport_GBps) to plot")
    fig = Figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot()
    series: dict[str, list] = {}
    for p in points:
        others = ", ".join(f"{k}={v}" for k, v in p.point.items() if k != "num_ranks")
        series.setdefault(others, []).append(p.result)
    markers = "osD^v<>p"
    ranks_seen = set()
    for i, (others, results) in enumerate(series.items()):
        results = sorted(results, key=lambda r: r["num_ranks"])
        x = [r["num_ranks"] for r in results]
        ranks_seen.update(x)
        for metric in BANDWIDTH_METRICS:
            with_metric = [r for r in results if metric in r]
            if not with_metric:
                continue
            label = f"{metric.split('_')[0]} (model{', ' + others if others else ''})"
            line, = ax.plot([r["num_ranks"] for r in with_metric], [r[metric] for r in with_metric],
                            marker=markers[i % len(markers)],
                            color=_COLORS[metric] if len(series) == 1 else None, label=label)
            net = metric.replace("_GBps", "_network_GBps")
            if all(net in r for r in with_metric):     # the same without the self-rank records
                ax.plot([r["num_ranks"] for r in with_metric], [r[net] for r in with_metric], linestyle="--",
                        color=line.get_color(), label=f"{metric.split('_')[0]} network only (model)")
    for metric in BANDWIDTH_METRICS:
        pub = [q for q in published if q["metric"] == metric]
        if pub:
            ranks_seen.update(q["num_ranks"] for q in pub)
            ax.errorbar([q["num_ranks"] for q in pub], [q["GBps"] for q in pub],
                        yerr=[q["GBps"] * q["tolerance_frac"] for q in pub], fmt="*", markersize=13,
                        capsize=4, color=_COLORS[metric], markeredgecolor="black",
                        label=f"{metric.split('_')[0]} (published, bar = tolerance)")
    ax.set_xscale("log", base=2)
    ticks = sorted(ranks_seen)
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("EP size (num_ranks)")
    ax.set_ylabel("bandwidth (GB/s per rank)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(title or "bandwidth vs EP size")
    fig.tight_layout()
    return _png(fig)


# -- (b) link utilization heat map ---------------------------------------------------------

def busiest_links(links: dict, max_links: int) -> list[str]:
    """The ``max_links`` names of ``links`` ({name: [busy frac per bin]}) with the highest
    mean busy fraction, busiest first (ties by name)."""
    return sorted(links, key=lambda n: (-float(np.mean(links[n])), n))[:max_links]


def link_heatmap_png(network_util: dict, max_links: int = 24, title: str = "") -> bytes:
    """``network_util``: {kernel: {"bin_edges_ns": [...], "links": {name: [busy frac per bin]}}}."""
    kernels = [k for k, s in network_util.items() if s.get("links") and len(s.get("bin_edges_ns", [])) > 1]
    if not kernels:
        raise ValueError("no binned link utilization to plot")
    panels = []
    for kernel in kernels:
        links = network_util[kernel]["links"]
        order = busiest_links(links, max_links)
        hidden = len(links) - len(order)
        panels.append((f"{kernel}: {len(order)} busiest links by mean busy fraction"
                       + (f" ({hidden} more not shown)" if hidden > 0 else ""),
                       network_util[kernel]["bin_edges_ns"], order, links))
    return _heatmaps(panels, title)


def has_chip_series(network_util: dict) -> bool:
    return any(s.get("chip") and len(s.get("bin_edges_ns", [])) > 1 for s in network_util.values())


def chip_heatmap_png(network_util: dict, max_ranks: int = 6, title: str = "") -> bytes:
    """``network_util[kernel]["chip"]``: {"rankR.hbm" / ".urma_tx" / ".urma_rx": [busy frac
    per bin]}; one panel per kernel, rows grouped by rank, busiest URMA ranks first."""
    kernels = [k for k, s in network_util.items() if s.get("chip") and len(s.get("bin_edges_ns", [])) > 1]
    if not kernels:
        raise ValueError("no binned chip-resource utilization to plot")
    panels = []
    for kernel in kernels:
        chip = network_util[kernel]["chip"]
        by_rank: dict = {}
        for name in chip:
            by_rank.setdefault(name.partition(".")[0], []).append(name)
        urma = {r: max([float(np.mean(chip[n])) for n in names if "urma" in n], default=0.0)
                for r, names in by_rank.items()}
        ranks = sorted(by_rank, key=lambda r: (-urma[r], int(r[4:])))[:max_ranks]
        hidden = len(by_rank) - len(ranks)
        panels.append((f"{kernel}: HBM and URMA ceiling of the busiest ranks"
                       + (f" ({hidden} more ranks not shown)" if hidden > 0 else ""),
                       network_util[kernel]["bin_edges_ns"],
                       [n for r in ranks for n in sorted(by_rank[r])], chip))
    return _heatmaps(panels, title)


def _heatmaps(panels, title: str) -> bytes:
    """One heat-map panel per (panel title, bin edges in ns, row names, {name: busy fracs})."""
    fig = Figure(figsize=(9, 1.2 + sum(0.22 * len(rows) + 1.1 for _, _, rows, _ in panels)),
                 layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False,
                        gridspec_kw={"height_ratios": [len(rows) + 4 for _, _, rows, _ in panels]})[:, 0]
    image = None
    for ax, (panel_title, edges_ns, rows, series) in zip(axes, panels):
        edges_us = units.ns_to_us(np.asarray(edges_ns, dtype=float))
        data = np.vstack([np.asarray(series[n], dtype=float) for n in rows])
        # pcolormesh, not imshow: the bins need not be of equal width (the last may be shorter)
        image = ax.pcolormesh(edges_us, np.arange(len(rows) + 1), data, cmap="viridis", vmin=0, vmax=1)
        ax.invert_yaxis()
        ax.set_yticks(np.arange(len(rows)) + 0.5, rows, fontsize=7)
        ax.set_xlabel("time (us)")
        ax.set_title(panel_title, fontsize=9)
    fig.colorbar(image, ax=list(axes), label="busy fraction", fraction=0.03)
    if title:
        fig.suptitle(title, fontsize=10)
    return _png(fig)


# -- (c) per-pipe busy fractions -------------------------------------------------------------

def has_pipes(points) -> bool:
    return any(p.result.get("pipe_busy_frac") for p in points)


def pipe_busy_png(points, title: str = "") -> bytes:
    """Bars of ``pipe_busy_frac`` ({"aic.m": frac, ...}) per core kind, one bar per run."""
    if not has_pipes(points):
        raise ValueError("no per-pipe busy fractions to plot")
    points = [p for p in points if p.result.get("pipe_busy_frac")]
    kinds = sorted({k.split(".")[0] for p in points for k in p.result["pipe_busy_frac"]})
    fig = Figure(figsize=(4.0 * len(kinds) + 1.5, 4.2))
    axes = fig.subplots(1, len(kinds), squeeze=False)[0]
    width = 0.8 / len(points)
    for ax, kind in zip(axes, kinds):
        pipes = sorted({k for p in points for k in p.result["pipe_busy_frac"] if k.startswith(kind + ".")})
        x = np.arange(len(pipes))
        for i, p in enumerate(points):
            busy = [100 * p.result["pipe_busy_frac"].get(pipe, 0.0) for pipe in pipes]
            ax.bar(x + (i - (len(points) - 1) / 2) * width, busy, width, label=p.label)
        ax.set_xticks(x, [pipe.split(".", 1)[1].upper() for pipe in pipes])
        ax.set_ylim(0, 105)
        ax.set_ylabel("busy (% of makespan)")
        ax.set_title(CORE_KINDS.get(kind, kind), fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    if len(points) > 1:
        axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)


# -- (d) roofline position -------------------------------------------------------------------

def _on_roofline(p) -> bool:
    r = p.result
    return bool(r.get("flops")) and bool(r.get("roofline_ns")) and bool(r.get("makespan_ns"))


def has_roofline(points) -> bool:
    return any(_on_roofline(p) for p in points)


def roofline_png(points, title: str = "") -> bytes:
    """Achieved TFLOPS (flops / makespan_ns) against bound TFLOPS (flops / roofline_ns)."""
    points = [p for p in points if _on_roofline(p)]
    if not points:
        raise ValueError("no kernel with flops and a roofline bound to plot")
    fig = Figure(figsize=(6.5, 5.0))
    ax = fig.add_subplot()
    bound = [units.tflops(p.result["flops"], p.result["roofline_ns"]) for p in points]
    achieved = [units.tflops(p.result["flops"], p.result["makespan_ns"]) for p in points]
    top = max(bound + achieved + [p.result.get("peak_tflops", 0.0) for p in points]) * 1.1
    line = np.array([0.0, top])
    ax.plot(line, line, color="black", lw=1, label="roofline (achieved = bound)")
    ax.plot(line, 0.5 * line, color="grey", lw=1, ls="--", label="half the bound")
    peaks = sorted({p.result["peak_tflops"] for p in points if p.result.get("peak_tflops")})
    for peak in peaks:
        ax.axhline(peak, color="tab:red", lw=1, ls=":", label=f"peak compute {peak:.0f} TFLOPS")
    for p, x, y in zip(points, bound, achieved):
        ax.scatter([x], [y], s=40, zorder=3)
        ax.annotate(f"{p.label}\nsim/bound {p.result['makespan_ns'] / p.result['roofline_ns']:.3f}",
                    (x, y), textcoords="offset points", xytext=(-8, -22), fontsize=7, ha="right")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("roofline-bound TFLOPS (flops / roofline_ns)")
    ax.set_ylabel("achieved TFLOPS (flops / makespan_ns)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title or "position against the roofline bound")
    fig.tight_layout()
    return _png(fig)


# -- (e) MoE layer: where the time goes ------------------------------------------------------

#: a layer's time, split for its straggler (rank the others wait for) into what adds up to it
LAYER_PARTS = (("compute_ns", "compute", "tab:blue"),
               ("exposed_comm_ns", "exposed communication", "tab:orange"),
               ("imbalance_wait_ns", "imbalance wait", "tab:gray"))


def has_layer(points) -> bool:
    return any(p.result.get("kind") == "moe_layer" and "compute_ns" in p.result for p in points)


def layer_breakdown_png(points, title: str = "") -> bytes:
    """One stacked bar per MoE-layer run (an EP size x overlap point of a sweep): the
    straggler's compute, the communication not hidden behind it, and its wait for the other
    ranks; the three add up to the layer's time."""
    points = [p for p in points if p.result.get("kind") == "moe_layer" and "compute_ns" in p.result]
    if not points:
        raise ValueError("no MoE layer results to plot")
    fig = Figure(figsize=(max(5.0, 0.7 * len(points) + 2.5), 4.4))
    ax = fig.subplots()
    x = np.arange(len(points))
    bottom = np.zeros(len(points))
    for key, label, color in LAYER_PARTS:
        v = np.array([units.ns_to_us(p.result.get(key, 0.0)) for p in points])
        ax.bar(x, v, 0.7, bottom=bottom, label=label, color=color)
        bottom += v
    ax.set_xticks(x, [p.label for p in points], rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("layer time (us)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)


def has_rank_strip(point) -> bool:
    return isinstance(point.result.get("per_rank"), dict) and "compute_ns" in point.result["per_rank"]


def rank_strip_png(point, title: str = "") -> bytes:
    """Every rank's breakdown side by side (x = rank): compute, exposed communication and
    barrier wait, the straggler marked; a rank with more routed rows computes longer and the
    others wait for it."""
    per = point.result.get("per_rank")
    if not isinstance(per, dict) or "compute_ns" not in per:
        raise ValueError("no per-rank breakdown to plot")
    R = len(per["compute_ns"])
    fig = Figure(figsize=(min(14.0, max(5.0, 0.09 * R + 3.0)), 3.6))
    ax = fig.subplots()
    x = np.arange(R)
    bottom = np.zeros(R)
    for key, label, color in LAYER_PARTS:
        v = np.array([units.ns_to_us(t) for t in per.get(key, [0.0] * R)])
        ax.bar(x, v, 0.85, bottom=bottom, label=label, color=color, linewidth=0)
        bottom += v
    s = point.result.get("straggler_rank")
    if isinstance(s, int) and 0 <= s < R:
        ax.annotate("straggler", (s, bottom[s]), xytext=(0, 8), textcoords="offset points",
                    ha="center", fontsize=7, arrowprops={"arrowstyle": "-", "lw": 0.8})
    ax.set_xlim(-0.6, R - 0.4)
    ax.set_ylim(0, 1.12 * float(bottom.max()) if R else 1.0)
    ax.set_xlabel("rank")
    ax.set_ylabel("time (us)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)
