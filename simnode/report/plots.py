"""Plots of results as PNG bytes (matplotlib, Agg canvas; no pyplot, no global state).

Every plot reads the typed results (``simnode.report.result``) by what the kinds declare,
never by a kind's name:

- ``sweep_png(points, field, published)``: each headline figure (flat name, e.g.
  ``dispatch_GBps``, ``tflops``) against a swept field (``num_ranks``; ``x_field`` picks it:
  the first numeric one, else the first other, drawn as categories), one panel per unit
  (``units_`` narrows them; ``primary_unit`` is the one a summary shows), one line per other
  swept setting; published figures (``published``: records {metric, workload, set, published,
  tolerance_frac, source} from the validation file, which the ``report`` command reads) of the
  same metric and workload, measured at plain values of that field, as stars with their
  tolerance as error bars. A band sweep (``band_field``: the point field naming each run's
  overlay, ``sweep --band``) draws one line per overlay and shades, per figure, the band
  between their lowest and highest value.
- ``fraction_bars_png(points, kernel, figure)``: a headline mapping of fractions
  (``pipe_busy_frac``), bars per key, one panel per key prefix (``aic``, ``aiv``), a bar
  per run.
- ``roofline_png(points)``: each kernel with FLOPs (a figure in unit FLOP) against its
  bound: x = flops / bound_ns, y = flops / time_ns; the diagonal is the roofline.
- ``kernel_bounds_png(point)``: a run's kernels, a bar each for its time with its bound
  marked, labelled with time / bound and the bottleneck.
- ``tradeoff_png(points, field, y, x, limits)``: a trade-off a kind declares on a figure
  (``Figure.against``, ``Figure.limits``; ``tradeoff_candidates`` finds them): over a sweep, y
  against x, a point per run labelled with its value of ``field``, a line per setting of the
  other swept fields, and a dashed line at each limit (decode: TPOT against tokens/s per chip
  with the 10, 20 and 50 ms SLOs).

Time over ranks and time in parts are ``simnode.report.timeplots``. Each function returns
PNG bytes, or raises ``ValueError`` when there is nothing to plot (the ``*_candidates``
helpers tell beforehand).
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.figure import Figure

from simnode import units
from simnode.report.breakdown import time_axis

CORE_KINDS = {"aic": "AIC (cube core)", "aiv": "AIV (vector core)"}
#: lines one panel of a sweep plot draws at most (a decode step has a ratio per kernel)
MAX_LINES = 8


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    # no Software/date metadata: the same figure gives the same bytes
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


# -- (a) headline figures against a swept field -------------------------------------------------

def _numeric(values) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def sweep_fields(points, params: dict) -> list[str]:
    """Swept fields whose values are all numbers (more than one of them): x axes."""
    return [f for f, values in params.items() if len(values) > 1 and _numeric(values)]


def x_field(params: dict, band_field: str = "") -> str | None:
    """The field a sweep's figures are drawn against: the first numeric swept field, else
    the first other swept field of more than one value (drawn as categories), else None."""
    numeric = sweep_fields((), params)
    others = [f for f, values in params.items() if len(values) > 1 and f != band_field]
    return (numeric or others or [None])[0]


def _headlines(points) -> list[tuple[str, str]]:
    """(flat name, unit) of every scalar headline figure of the points, in order."""
    return list(dict.fromkeys(c for p in points for c in p.result.headline_columns()))


def published_for(published, workload: str, field: str, metrics) -> list[dict]:
    """The published records of ``workload`` measured at a plain value of ``field``."""
    return [q for q in published or () if q["workload"] == workload and q["metric"] in metrics
            and set(q["set"]) == {field}]


def headline_figures(points, only=()) -> list[tuple[str, str]]:
    """(flat name, unit) of the headline figures a sweep plot draws (``only``: those named)."""
    return [(n, u) for n, u in _headlines(points) if any(n in p.flat for p in points) and (not only or n in only)]


def sweep_units(points) -> list[str]:
    """The units of the headline figures a sweep plot draws, one panel each, in order."""
    return list(dict.fromkeys(u for _, u in headline_figures(points)))


def primary_unit(points, field: str, published=()) -> str | None:
    """The panel a summary shows: the unit of the first headline figure with published
    points against ``field``; else the first unit whose figures every run has; else the first."""
    columns = headline_figures(points)
    if not columns:
        return None
    workload = points[0].result.workload
    for name, unit in columns:
        if published_for(published, workload, field, [name]):
            return unit
    for name, unit in columns:
        if all(name in p.flat for p in points):
            return unit
    return columns[0][1]


def sweep_png(points, field: str, published=(), title: str = "", band_field: str = "",
              only=(), units_=None, size=(7.5, 3.4)) -> bytes:
    """``points``: PointData of a sweep over ``field``; see the module docstring. ``only``:
    the headline figures to draw (all if empty); ``units_``: the panels (all if None);
    ``size``: (width, height of a panel) in inches."""
    columns = [(n, u) for n, u in headline_figures(points, only) if units_ is None or u in units_]
    if not columns or len(points) < 2:
        raise ValueError(f"no headline figure to plot against {field}")
    units_ = list(dict.fromkeys(u for _, u in columns))
    numeric = _numeric([p.point[field] for p in points])
    categories = list(dict.fromkeys(p.point[field] for p in points))

    def x_of(value):
        return value if numeric else categories.index(value)
    fig = Figure(figsize=(size[0], size[1] * len(units_) + 0.6))
    axes = fig.subplots(len(units_), 1, squeeze=False)[:, 0]
    lines: dict[str, list] = {}
    for p in points:
        others = ", ".join(f"{k}={v}" for k, v in p.point.items() if k != field)
        lines.setdefault(others, []).append(p)
    markers = "osD^v<>p"
    xs = sorted({x_of(p.point[field]) for p in points})
    workload = points[0].result.workload
    for ax, unit in zip(axes, units_):
        names = [n for n, u in columns if u == unit]
        shown_of = len(names)
        if len(names) > MAX_LINES:             # a panel of many kernels: the largest at the last run
            last = max(points, key=lambda q: x_of(q.point[field])).flat
            names = sorted(names, key=lambda n: (-abs(last.get(n, 0) or 0), n))[:MAX_LINES]
        color = {}
        for i, (others, pts) in enumerate(lines.items()):
            pts = sorted(pts, key=lambda q: x_of(q.point[field]))
            for name in names:
                with_it = [q for q in pts if name in q.flat]
                if with_it:
                    # a band: every overlay's line of one figure in that figure's colour
                    same = {"color": color[name]} if band_field and name in color else {}
                    line, = ax.plot([x_of(q.point[field]) for q in with_it], [q.flat[name] for q in with_it],
                                    marker=markers[i % len(markers)], **same,
                                    label=f"{name} (model{', ' + others if others else ''})")
                    color.setdefault(name, line.get_color())
        if band_field:
            _shade_band(ax, points, field, band_field, names, color)
        for q in published_for(published, workload, field, names) if numeric else ():
            ax.errorbar([q["set"][field]], [q["published"]], yerr=[q["published"] * q["tolerance_frac"]],
                        fmt="*", markersize=13, capsize=4, color=color.get(q["metric"], "black"),
                        markeredgecolor="black", label=f"{q['metric']} (published, bar = tolerance)")
            xs = sorted(set(xs) | {q["set"][field]})
        handles, labels = ax.get_legend_handles_labels()
        seen = dict(zip(labels, handles))              # one legend entry per label
        ax.legend(list(seen.values()), list(seen), fontsize=7, loc="lower left",
                  title=f"the {MAX_LINES} largest of {shown_of}" if shown_of > len(names) else None,
                  title_fontsize=7)
        if not numeric:
            ax.set_xticks(range(len(categories)), [str(c) for c in categories])
            ax.set_xlim(-0.5, len(categories) - 0.5)
        elif all(x > 0 and (x & (x - 1) == 0 if isinstance(x, int) else False) for x in xs):
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel(field)
        ax.set_ylabel(unit or "value")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].set_title(title or f"headline figures against {field}")
    fig.tight_layout()
    return png(fig)


def _shade_band(ax, points, field: str, band_field: str, names, color: dict) -> None:
    """Per figure (and setting of the other swept fields), the band between the overlays'
    lowest and highest value at each value of ``field``."""
    groups: dict = {}
    for p in points:
        others = tuple((k, v) for k, v in p.point.items() if k not in (field, band_field))
        groups.setdefault(others, {}).setdefault(p.point[field], []).append(p)
    for others, by_x in groups.items():
        if not _numeric(by_x):
            continue
        xs = sorted(by_x)
        for name in names:
            vals = [[q.flat[name] for q in by_x[x] if name in q.flat] for x in xs]
            if not all(vals):
                continue
            where = ", ".join(f"{k}={v}" for k, v in others)
            ax.fill_between(xs, [min(v) for v in vals], [max(v) for v in vals], alpha=0.2,
                            color=color.get(name), linewidth=0,
                            label=f"{name} band ({len(vals[0])} overlays{', ' + where if where else ''})")


# -- (b) headline mappings of fractions ------------------------------------------------------------

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
    fig = Figure(figsize=(max(6.5, 4.0 * len(prefixes) + 1.5), 4.2))
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
    return png(fig)


# -- (c) roofline position --------------------------------------------------------------------------

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
    return png(fig)


# -- (d) a run's kernels against their bounds --------------------------------------------------

def kernel_bounds_png(point, title: str = "") -> bytes:
    """A horizontal bar per kernel of one run: its time, its bound marked as a black tick,
    labelled with time / bound and its bottleneck."""
    kernels = [k for k in point.result.kernels if k.time_ns > 0]
    if not kernels:
        raise ValueError("no kernel time to plot")
    scale, unit = time_axis(max(max(k.time_ns, k.bound_ns) for k in kernels))
    fig = Figure(figsize=(6.5, max(3.0, 1.6 + 0.5 * len(kernels))))
    ax = fig.subplots()
    y = np.arange(len(kernels))
    ax.barh(y, [k.time_ns / scale for k in kernels], 0.6, color="tab:blue", label="simulated time")
    bounded = [(i, k) for i, k in enumerate(kernels) if k.bound_ns]
    if bounded:
        ax.scatter([k.bound_ns / scale for _, k in bounded], [i for i, _ in bounded], marker="|", s=600,
                   color="black", linewidths=2.5, zorder=3, label="analytical bound")
    top = max(max(k.time_ns, k.bound_ns) for k in kernels) / scale
    for i, k in enumerate(kernels):
        text = (f"{k.sim_over_bound:.3f}x bound" if k.bound_ns else "no bound") \
            + (f", {k.bottleneck}" if k.bottleneck else "")
        ax.text(max(k.time_ns, k.bound_ns) / scale + 0.01 * top, i, text, va="center", ha="left", fontsize=8)
    ax.set_yticks(y, [k.name for k in kernels])
    ax.set_ylim(len(kernels) - 0.3, -0.7)        # the first kernel on top, bars not too fat
    ax.set_xlim(0, 1.6 * top)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)
    ax.set_title(title or "kernels against their bounds", fontsize=10)
    fig.tight_layout()
    return png(fig)


def tradeoff_candidates(points) -> list[tuple[str, str, tuple]]:
    """(y figure, x figure, limits) of every trade-off the runs' figures declare, where every
    run has both figures as numbers."""
    if len(points) < 2:
        return []
    out = []
    for f in points[0].result.figures:
        if f.against and all(_numeric([p.flat.get(f.name), p.flat.get(f.against)]) for p in points):
            out.append((f.name, f.against, tuple(f.limits)))
    return out


def tradeoff_png(points, field: str, y: str, x: str, limits=(), title: str = "") -> bytes:
    """``y`` against ``x`` over the sweep's runs (module docstring); ``field`` labels them."""
    fig = Figure(figsize=(7.5, 4.6))
    ax = fig.subplots()
    lines: dict[str, list] = {}
    for p in points:
        others = ", ".join(f"{k}={v}" for k, v in p.point.items() if k != field)
        lines.setdefault(others, []).append(p)
    numeric = _numeric([p.point.get(field) for p in points])
    for i, (others, pts) in enumerate(lines.items()):
        if numeric:
            pts = sorted(pts, key=lambda q: q.point[field])
        xs, ys = [q.flat[x] for q in pts], [q.flat[y] for q in pts]
        ax.plot(xs, ys, marker="osD^v<>p"[i % 8], label=others or "model")
        for q, a, b in zip(pts, xs, ys):
            ax.annotate(f"{field}={q.point.get(field, '')}", (a, b), fontsize=6, xytext=(3, 3),
                        textcoords="offset points")
    unit = next((f.unit for f in points[0].result.figures if f.name == y), "")
    for v in limits:
        ax.axhline(v, linestyle="--", linewidth=0.9, color="grey")
        ax.annotate(f"{y} = {v:g} {unit}", (0.01, v), xycoords=("axes fraction", "data"), fontsize=7,
                    color="dimgrey", xytext=(0, 2), textcoords="offset points")
    top = max([q.flat[y] for q in points] + list(limits))
    ax.set_ylim(0, top * 1.08)
    ax.set_xlim(left=0)
    ax.set_xlabel(x)
    ax.set_ylabel(f"{y} ({unit})" if unit else y)
    ax.grid(True, alpha=0.3)
    if len(lines) > 1:
        ax.legend(fontsize=7, loc="upper left")
    ax.set_title(title or f"{y} against {x}")
    fig.tight_layout()
    return png(fig)
