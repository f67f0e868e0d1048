"""Plots of results as PNG bytes (matplotlib, Agg canvas; no pyplot, no global state).

Every plot reads the typed results (``simnode.report.result``) by what the kinds declare,
never by a kind's name:

- ``sweep_png(points, field, published)``: each headline figure (flat name, e.g.
  ``dispatch_GBps``, ``tflops``) against a numeric swept field (``num_ranks``), one panel
  per unit, one line per other swept setting; published figures (``published``: records
  {metric, workload, set, published, tolerance_frac, source} from the validation file,
  which the ``report`` command reads) of the same metric and workload, measured at plain
  values of that field, as stars with their tolerance as error bars. A band sweep
  (``band_field``: the point field naming each run's overlay, ``sweep --band``) draws one
  line per overlay and shades, per figure, the band between their lowest and highest value.
- ``series_png(series)``: a heat map per kernel of series of one name (a link's, a rank
  resource's busy fraction over time); the rows with the highest mean first, and rows named
  ``group.what`` (``rank3.hbm``) kept together by group.
- ``fraction_bars_png(points, kernel, figure)``: a headline mapping of fractions
  (``pipe_busy_frac``), bars per key, one panel per key prefix (``aic``, ``aiv``), a bar
  per run.
- ``roofline_png(points)``: each kernel with FLOPs (a figure in unit FLOP) against its
  bound: x = flops / bound_ns, y = flops / time_ns; the diagonal is the roofline.
- ``layer_breakdown_png(points)``: runs whose header splits their time for the straggler
  (compute_ns, exposed_comm_ns, imbalance_wait_ns: a MoE layer), one stacked bar each.
- ``rank_strip_png(point)``: the same split for every rank (a ``per_rank`` figure: a list
  of records with those three fields).

Each function returns PNG bytes, or raises ``ValueError`` when there is nothing to plot
(the ``*_candidates`` helpers tell beforehand).
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.figure import Figure

from simnode import units

CORE_KINDS = {"aic": "AIC (cube core)", "aiv": "AIV (vector core)"}


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    # no Software/date metadata: the same figure gives the same bytes
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


# -- (a) headline figures against a swept field -------------------------------------------------

def sweep_fields(points, params: dict) -> list[str]:
    """Swept fields whose values are all numbers (more than one of them): x axes."""
    return [f for f, values in params.items()
            if len(values) > 1 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)]


def _headlines(points) -> list[tuple[str, str]]:
    """(flat name, unit) of every scalar headline figure of the points, in order."""
    return list(dict.fromkeys(c for p in points for c in p.result.headline_columns()))


def published_for(published, workload: str, field: str, metrics) -> list[dict]:
    """The published records of ``workload`` measured at a plain value of ``field``."""
    return [q for q in published or () if q["workload"] == workload and q["metric"] in metrics
            and set(q["set"]) == {field}]


def sweep_png(points, field: str, published=(), title: str = "", band_field: str = "",
              only=()) -> bytes:
    """``points``: PointData of a sweep over ``field``; see the module docstring. ``only``:
    the headline figures to draw (all if empty)."""
    columns = [(n, u) for n, u in _headlines(points) if any(n in p.flat for p in points)
               and (not only or n in only)]
    if not columns or len(points) < 2:
        raise ValueError(f"no headline figure to plot against {field}")
    units_ = list(dict.fromkeys(u for _, u in columns))
    fig = Figure(figsize=(7.5, 3.4 * len(units_) + 0.6))
    axes = fig.subplots(len(units_), 1, squeeze=False)[:, 0]
    lines: dict[str, list] = {}
    for p in points:
        others = ", ".join(f"{k}={v}" for k, v in p.point.items() if k != field)
        lines.setdefault(others, []).append(p)
    markers = "osD^v<>p"
    xs = sorted({p.point[field] for p in points})
    workload = points[0].result.workload
    for ax, unit in zip(axes, units_):
        names = [n for n, u in columns if u == unit]
        color = {}
        for i, (others, pts) in enumerate(lines.items()):
            pts = sorted(pts, key=lambda q: q.point[field])
            for name in names:
                with_it = [q for q in pts if name in q.flat]
                if with_it:
                    # a band: every overlay's line of one figure in that figure's colour
                    same = {"color": color[name]} if band_field and name in color else {}
                    line, = ax.plot([q.point[field] for q in with_it], [q.flat[name] for q in with_it],
                                    marker=markers[i % len(markers)], **same,
                                    label=f"{name} (model{', ' + others if others else ''})")
                    color.setdefault(name, line.get_color())
        if band_field:
            _shade_band(ax, points, field, band_field, names, color)
        for q in published_for(published, workload, field, names):
            ax.errorbar([q["set"][field]], [q["published"]], yerr=[q["published"] * q["tolerance_frac"]],
                        fmt="*", markersize=13, capsize=4, color=color.get(q["metric"], "black"),
                        markeredgecolor="black", label=f"{q['metric']} (published, bar = tolerance)")
            xs = sorted(set(xs) | {q["set"][field]})
        handles, labels = ax.get_legend_handles_labels()
        seen = dict(zip(labels, handles))              # one legend entry per label
        ax.legend(list(seen.values()), list(seen), fontsize=7, loc="lower left")
        if all(x > 0 and (x & (x - 1) == 0 if isinstance(x, int) else False) for x in xs):
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel(field)
        ax.set_ylabel(unit or "value")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].set_title(title or f"headline figures against {field}")
    fig.tight_layout()
    return _png(fig)


def _shade_band(ax, points, field: str, band_field: str, names, color: dict) -> None:
    """Per figure (and setting of the other swept fields), the band between the overlays'
    lowest and highest value at each value of ``field``."""
    groups: dict = {}
    for p in points:
        others = tuple((k, v) for k, v in p.point.items() if k not in (field, band_field))
        groups.setdefault(others, {}).setdefault(p.point[field], []).append(p)
    for others, by_x in groups.items():
        xs = sorted(by_x)
        for name in names:
            vals = [[q.flat[name] for q in by_x[x] if name in q.flat] for x in xs]
            if not all(vals):
                continue
            where = ", ".join(f"{k}={v}" for k, v in others)
            ax.fill_between(xs, [min(v) for v in vals], [max(v) for v in vals], alpha=0.2,
                            color=color.get(name), linewidth=0,
                            label=f"{name} band ({len(vals[0])} overlays{', ' + where if where else ''})")


# -- (b) time series as heat maps -----------------------------------------------------------------

def order_rows(rows: dict, max_rows: int) -> list[str]:
    """At most ``max_rows`` labels of ``rows`` ({label: [values]}): the highest mean first;
    labels ``group.what`` stay together, groups by their highest mean (ties by label)."""
    mean = {k: float(np.mean(v)) if len(v) else 0.0 for k, v in rows.items()}
    groups: dict = {}
    for label in rows:
        groups.setdefault(label.partition(".")[0] if "." in label else label, []).append(label)
    if all(len(g) == 1 for g in groups.values()):
        return sorted(rows, key=lambda k: (-mean[k], k))[:max_rows]
    order = sorted(groups, key=lambda g: (-max(mean[k] for k in groups[g]), g))
    out = [k for g in order for k in sorted(groups[g])]
    return out[:max_rows]


def series_png(series, max_rows: int = 24, title: str = "") -> bytes:
    """One heat-map panel per series of ``series`` (same name, one per kernel)."""
    series = [s for s in series if s.rows and len(s.bin_edges_ns) > 1]
    if not series:
        raise ValueError("no binned series to plot")
    panels = []
    for s in series:
        order = order_rows(s.rows, max_rows)
        hidden = len(s.rows) - len(order)
        panels.append((f"{s.kernel}: {s.name}, {len(order)} rows" + (f" ({hidden} more not shown)" if hidden else ""),
                       s.bin_edges_ns, order, s.rows, s.unit))
    fig = Figure(figsize=(9, 1.2 + sum(0.22 * len(rows) + 1.1 for _, _, rows, _, _ in panels)),
                 layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False,
                        gridspec_kw={"height_ratios": [len(rows) + 4 for _, _, rows, _, _ in panels]})[:, 0]
    image = None
    fractions = all(unit == "fraction" for *_, unit in panels)
    for ax, (panel_title, edges_ns, rows, values, _) in zip(axes, panels):
        edges_us = units.ns_to_us(np.asarray(edges_ns, dtype=float))
        data = np.vstack([np.asarray(values[n], dtype=float) for n in rows])
        # pcolormesh, not imshow: the bins need not be of equal width (the last may be shorter)
        kw = {"vmin": 0, "vmax": 1} if fractions else {}
        image = ax.pcolormesh(edges_us, np.arange(len(rows) + 1), data, cmap="viridis", **kw)
        ax.invert_yaxis()
        ax.set_yticks(np.arange(len(rows)) + 0.5, rows, fontsize=7)
        ax.set_xlabel("time (us)")
        ax.set_title(panel_title, fontsize=9)
    fig.colorbar(image, ax=list(axes), label=panels[0][4] or "value", fraction=0.03)
    if title:
        fig.suptitle(title, fontsize=10)
    return _png(fig)


# -- (c) headline mappings of fractions ------------------------------------------------------------

def fraction_bar_candidates(points) -> list[tuple[str, str]]:
    """(kernel, figure) of every headline mapping in unit fraction among the points."""
    out = []
    for p in points:
        for k in p.result.kernels:
            out += [(k.name, f.name) for f in k.figures
                    if f.headline and f.unit == "fraction" and isinstance(f.value, dict) and f.value]
    return list(dict.fromkeys(out))


def fraction_bars_png(points, kernel: str, figure: str, title: str = "") -> bytes:
    """Bars of one mapping of fractions per run; keys ``prefix.name`` get a panel per prefix."""
    rows = []
    for p in points:
        k = p.result.kernel(kernel)
        f = k.figure(figure) if k is not None else None
        if f is not None and isinstance(f.value, dict) and f.value:
            rows.append((p.label, f.value))
    if not rows:
        raise ValueError(f"no {kernel} {figure} to plot")
    prefixes = sorted({key.split(".")[0] for _, v in rows for key in v})
    fig = Figure(figsize=(4.0 * len(prefixes) + 1.5, 4.2))
    axes = fig.subplots(1, len(prefixes), squeeze=False)[0]
    width = 0.8 / len(rows)
    for ax, prefix in zip(axes, prefixes):
        keys = sorted({k for _, v in rows for k in v if k.split(".")[0] == prefix})
        x = np.arange(len(keys))
        for i, (label, v) in enumerate(rows):
            ax.bar(x + (i - (len(rows) - 1) / 2) * width, [100 * v.get(k, 0.0) for k in keys], width, label=label)
        ax.set_xticks(x, [k.split(".", 1)[1].upper() if "." in k else k for k in keys])
        ax.set_ylim(0, 105)
        ax.set_ylabel(f"{figure} (%)")
        ax.set_title(CORE_KINDS.get(prefix, prefix), fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    if len(rows) > 1:
        axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(title or f"{kernel}: {figure}", fontsize=10)
    fig.tight_layout()
    return _png(fig)


# -- (d) roofline position --------------------------------------------------------------------------

def roofline_points(points) -> list[tuple[str, float, float, float]]:
    """(label, flops, time_ns, bound_ns) of every kernel with FLOPs and a bound."""
    out = []
    for p in points:
        for k in p.result.kernels:
            flops = next((f.value for f in k.figures if f.unit == "FLOP"), 0)
            if flops and k.bound_ns and k.time_ns:
                label = p.label if len(p.result.kernels) == 1 else f"{p.label} {k.name}"
                out.append((label, float(flops), k.time_ns, k.bound_ns))
    return out


def roofline_png(points, title: str = "") -> bytes:
    """Achieved TFLOPS (flops / time_ns) against bound TFLOPS (flops / bound_ns)."""
    rows = roofline_points(points)
    if not rows:
        raise ValueError("no kernel with flops and a bound to plot")
    fig = Figure(figsize=(6.5, 5.0))
    ax = fig.add_subplot()
    bound = [units.tflops(f, b) for _, f, _, b in rows]
    achieved = [units.tflops(f, t) for _, f, t, _ in rows]
    top = max(bound + achieved) * 1.1
    line = np.array([0.0, top])
    ax.plot(line, line, color="black", lw=1, label="roofline (achieved = bound)")
    ax.plot(line, 0.5 * line, color="grey", lw=1, ls="--", label="half the bound")
    for (label, _, t, b), x, y in zip(rows, bound, achieved):
        ax.scatter([x], [y], s=40, zorder=3)
        ax.annotate(f"{label}\nsim/bound {t / b:.3f}", (x, y), textcoords="offset points", xytext=(-8, -22),
                    fontsize=7, ha="right")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("roofline-bound TFLOPS (flops / bound)")
    ax.set_ylabel("achieved TFLOPS (flops / time)")
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


def _has_breakdown(point) -> bool:
    d = point.result.details
    return all(key in d for key, _, _ in LAYER_PARTS)


def _stacked_png(fig: Figure, ax, title: str) -> bytes:
    """A stacked-bar plot of LAYER_PARTS finished: y grid, legend beside it, title."""
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)


def has_layer(points) -> bool:
    return any(_has_breakdown(p) for p in points)


def layer_breakdown_png(points, title: str = "") -> bytes:
    """One stacked bar per MoE-layer run (an EP size x overlap point of a sweep): the
    straggler's compute, the communication not hidden behind it, and its wait for the other
    ranks; the three add up to the layer's time."""
    points = [p for p in points if _has_breakdown(p)]
    if not points:
        raise ValueError("no results with a compute / exposed communication / wait split to plot")
    flats = [p.result.details for p in points]        # each a flat view, built once
    fig, ax, _ = _stacked_bars(points, [{k: units.ns_to_us(d[k]) for k, _, _ in LAYER_PARTS}
                                        for d in flats], LAYER_PARTS)
    ax.set_ylabel("layer time (us)")
    return _stacked_png(fig, ax, title)


def _stacked_bars(points, rows: list, parts, shift: float = 0.0, width: float = 0.7):
    """(figure, axes, x) with one bar per point, ``parts`` (key, label, colour) of each of
    ``rows`` (one mapping per point) stacked, ``shift`` off its tick."""
    fig = Figure(figsize=(max(5.0, 0.7 * len(points) + 2.5), 4.4))
    ax = fig.subplots()
    x = np.arange(len(points))
    bottom = np.zeros(len(points))
    for key, label, color in parts:
        v = np.array([r[key] for r in rows])
        ax.bar(x + shift, v, width, bottom=bottom, label=label, color=color)
        bottom += v
    ax.set_xticks(x, [p.label for p in points], rotation=35, ha="right", fontsize=7)
    return fig, ax, x


#: a decode layer's main stream, in the order its kernels run (``breakdown_us`` of moe_layer
#: with comm = low_latency), stacked; its shared stream and the layer are drawn beside them
DECODE_PARTS = (("dispatch", "dispatch", "tab:orange"), ("gemm1", "grouped GEMM 1", "tab:blue"),
                ("swiglu", "SwiGLU", "tab:green"), ("gemm2", "grouped GEMM 2", "tab:cyan"),
                ("combine", "combine", "tab:red"))


def _decode(point) -> dict:
    b = point.result.details.get("breakdown_us")
    return b if isinstance(b, dict) and all(k in b for k, _, _ in DECODE_PARTS) else {}


def has_decode(points) -> bool:
    return any(_decode(p) for p in points)


def decode_breakdown_png(points, title: str = "") -> bytes:
    """One stacked bar per decode-layer run (a point of a sweep over tokens per rank, say):
    the straggler's main stream kernel by kernel, beside it its shared experts' stream (a
    hatched bar) and the layer's time (a black tick): flat bars while weights and latencies
    set the time, growing ones once the rows do."""
    points = [p for p in points if _decode(p)]
    if not points:
        raise ValueError("no decode-layer breakdown to plot")
    parts = [_decode(p) for p in points]
    fig, ax, x = _stacked_bars(points, parts, DECODE_PARTS, -0.15, 0.5)
    ax.bar(x + 0.3, [b.get("shared_stream", 0.0) for b in parts], 0.2, label="shared stream",
           color="white", edgecolor="black", hatch="//")
    ax.plot(x, [b.get("layer", 0.0) for b in parts], "k_", markersize=22, label="layer")
    ax.set_ylabel("time (us)")
    return _stacked_png(fig, ax, title)


def _per_rank(point) -> list:
    f = point.result.details.get("per_rank")
    if isinstance(f, list) and f and all(isinstance(r, dict) and all(k in r for k, _, _ in LAYER_PARTS)
                                         for r in f):
        return f
    return []


def has_rank_strip(point) -> bool:
    return bool(_per_rank(point))


def rank_strip_png(point, title: str = "") -> bytes:
    """Every rank's breakdown side by side (x = rank): compute, exposed communication and
    barrier wait, the straggler marked; a rank with more routed rows computes longer and the
    others wait for it."""
    per = _per_rank(point)
    if not per:
        raise ValueError("no per-rank breakdown to plot")
    R = len(per)
    fig = Figure(figsize=(min(14.0, max(5.0, 0.09 * R + 3.0)), 3.6))
    ax = fig.subplots()
    x = np.arange(R)
    bottom = np.zeros(R)
    for key, label, color in LAYER_PARTS:
        v = np.array([units.ns_to_us(r[key]) for r in per])
        ax.bar(x, v, 0.85, bottom=bottom, label=label, color=color, linewidth=0)
        bottom += v
    s = point.result.details.get("straggler_rank")
    if isinstance(s, int) and 0 <= s < R:
        ax.annotate("straggler", (s, bottom[s]), xytext=(0, 8), textcoords="offset points",
                    ha="center", fontsize=7, arrowprops={"arrowstyle": "-", "lw": 0.8})
    ax.set_xlim(-0.6, R - 0.4)
    ax.set_ylim(0, 1.12 * float(bottom.max()) if R else 1.0)
    ax.set_xlabel("rank")
    ax.set_ylabel("time (us)")
    return _stacked_png(fig, ax, title)
