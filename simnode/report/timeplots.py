"""Plots of where time goes, as PNG bytes: over time bins, over ranks, in parts.

- ``series_png(series)``: a heat map per kernel of series of one name (a link's, a rank
  resource's busy fraction over time). At most ``max_rows`` rows, the busiest (highest mean)
  first, rows named ``group.what`` (``rank3.hbm``) kept together by group; the rows left out
  are summarized below a white line as their mean (one row per ``what`` of a group), so a
  128-rank run reads as well as an 8-rank one.
- ``split_bars_png(points)``: one stacked bar per run of a sweep, its time in the parts
  ``simnode.report.breakdown.run_split`` finds; ``split_png(point)``: one run's parts as
  horizontal bars, each with its time and share.
- ``rank_strip_png(point)``: every record of a ``breakdown.record_split`` (a rank) as a
  stacked bar of its parts, the highest first part first; past ``max_ranks`` the rest are one
  bar of their mean; the records a header figure in unit ``rank`` names are marked.

Each function returns PNG bytes (``simnode.report.plots.png``), or raises ``ValueError``
when there is nothing to plot.
"""

from __future__ import annotations

import re

import numpy as np
from matplotlib.figure import Figure

from simnode.report.breakdown import part_label, record_split, run_split, time_axis
from simnode.report.plots import png

MAX_ROWS = 24
MAX_RANKS = 32


def _color(i: int):
    return f"C{i}" if i < 10 else ("#8c564b", "#bcbd22", "#17becf", "#7f7f7f")[i % 4]


# -- time series as heat maps -------------------------------------------------------------------

def _group(label: str) -> tuple[str, str]:
    group, _, what = label.partition(".")
    return (group, what) if what else (label, "")


def summarized_rows(rows: dict, max_rows: int = MAX_ROWS) -> tuple[list[str], list[tuple[str, list]], str]:
    """(the labels shown, [(summary label, mean values)] of the rest, what is shown: "24 busiest
    of 288 rows", "8 busiest of 128 ranks"); see the module docstring."""
    mean = {k: float(np.mean(v)) if len(v) else 0.0 for k, v in rows.items()}
    groups: dict = {}
    for label in rows:
        groups.setdefault(_group(label)[0], []).append(label)
    if all(len(g) == 1 for g in groups.values()):
        order = sorted(rows, key=lambda k: (-mean[k], k))
        shown, rest = order[:max_rows], order[max_rows:]
        if not rest:
            return shown, [], f"{len(shown)} rows"
        return (shown, [(f"mean of {len(rest)} others", list(np.mean([rows[k] for k in rest], axis=0)))],
                f"{len(shown)} busiest of {len(rows)} rows")
    order = sorted(groups, key=lambda g: (-max(mean[k] for k in groups[g]), g))
    shown, rest = [], []
    for g in order:
        members = sorted(groups[g])
        if not rest and len(shown) + len(members) <= max_rows:
            shown += members
        else:
            rest.append(g)
    if not rest:
        return shown, [], f"{len(shown)} rows"
    whats: dict = {}
    for g in rest:
        for label in groups[g]:
            whats.setdefault(_group(label)[1], []).append(label)
    summary = [(f"{len(rest)} others: {what or 'all'} (mean)", list(np.mean([rows[k] for k in whats[what]], axis=0)))
               for what in sorted(whats)]
    # "rank104" -> ranks: what the groups are, read off their labels
    word = re.sub(r"\d+$", "", order[0]) or "group"
    return shown, summary, f"{len(order) - len(rest)} busiest of {len(order)} {word}s"


def order_rows(rows: dict, max_rows: int) -> list[str]:
    """The labels ``series_png`` shows of ``rows`` (``summarized_rows``), in order."""
    return summarized_rows(rows, max_rows)[0]


def series_png(series, max_rows: int = MAX_ROWS, title: str = "") -> bytes:
    """One heat-map panel per series of ``series`` (same name, one per kernel)."""
    series = [s for s in series if s.rows and len(s.bin_edges_ns) > 1]
    if not series:
        raise ValueError("no binned series to plot")
    panels = []
    for s in series:
        shown, rest, what = summarized_rows(s.rows, max_rows)
        labels = shown + [label for label, _ in rest]
        data = np.vstack([np.asarray(s.rows[k], dtype=float) for k in shown] + [np.asarray(v) for _, v in rest])
        panels.append((f"{s.kernel}: {s.name}, {what}", s.bin_edges_ns, labels, len(shown), data, s.unit))
    scale, unit = time_axis(max(float(p[1][-1]) for p in panels))
    fig = Figure(figsize=(9, 1.2 + sum(0.22 * len(p[2]) + 1.1 for p in panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False,
                        gridspec_kw={"height_ratios": [len(p[2]) + 4 for p in panels]})[:, 0]
    image = None
    fractions = all(p[5] == "fraction" for p in panels)
    for ax, (panel_title, edges_ns, labels, n_shown, data, _) in zip(axes, panels):
        edges = np.asarray(edges_ns, dtype=float) / scale
        # pcolormesh, not imshow: the bins need not be of equal width (the last may be shorter)
        kw = {"vmin": 0, "vmax": 1} if fractions else {}
        image = ax.pcolormesh(edges, np.arange(len(labels) + 1), data, cmap="viridis", **kw)
        if n_shown < len(labels):
            ax.axhline(n_shown, color="white", lw=2)
        ax.invert_yaxis()
        ax.set_yticks(np.arange(len(labels)) + 0.5, labels, fontsize=7)
        ax.set_xlabel(f"time ({unit})")
        ax.set_title(panel_title, fontsize=9)
    fig.colorbar(image, ax=list(axes), label=panels[0][5] or "value", fraction=0.03)
    if title:
        fig.suptitle(title, fontsize=10)
    return png(fig)


# -- a run's time in parts ----------------------------------------------------------------------

def _finish(fig: Figure, ax, title: str, legend: bool = True) -> bytes:
    ax.grid(True, axis="y" if legend else "x", alpha=0.3)
    if legend:
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles[::-1], labels[::-1], fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return png(fig)


def split_bars_png(points, title: str = "", size=(7.5, 4.4)) -> bytes:
    """One stacked bar per run with a ``run_split``, x labelled by its swept values."""
    rows = [(p, s) for p in points for s in [run_split(p.result)] if s is not None]
    if not rows:
        raise ValueError("no run whose time splits into parts that add up to it")
    parts = list(dict.fromkeys(name for _, s in rows for name in s.parts))
    scale, unit = time_axis(max(s.total_ns for _, s in rows))
    fig = Figure(figsize=size)
    ax = fig.subplots()
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for i, name in enumerate(parts):
        v = np.array([dict(zip(s.parts, s.values_ns)).get(name, 0.0) / scale for _, s in rows])
        ax.bar(x, v, 0.7, bottom=bottom, label=part_label(name), color=_color(i))
        bottom += v
    for xi, top in zip(x, bottom):
        ax.annotate(f"{top:,.0f}" if top >= 100 else f"{top:,.1f}", (xi, top), xytext=(0, 2),
                    textcoords="offset points", ha="center", va="bottom", fontsize=7)
    ax.set_ylim(0, 1.08 * float(bottom.max()))
    fields = list(dict.fromkeys(k for p, _ in rows for k in p.point))
    ax.set_xticks(x, ["\n".join(str(p.point.get(k, "")) for k in fields) or p.label for p, _ in rows],
                  fontsize=8)
    ax.set_xlabel(" / ".join(fields))
    ax.set_ylabel(f"time ({unit})")
    return _finish(fig, ax, title)


def split_png(point, title: str = "") -> bytes:
    """One run's ``run_split``: a horizontal bar per part with its time and share."""
    s = run_split(point.result)
    if s is None:
        raise ValueError("the run's time does not split into parts that add up to it")
    scale, unit = time_axis(s.total_ns)
    fig = Figure(figsize=(7.5, 1.3 + 0.4 * len(s.parts)))
    ax = fig.subplots()
    y = np.arange(len(s.parts))
    values = np.array(s.values_ns) / scale
    ax.barh(y, values, 0.65, color=[_color(i) for i in range(len(s.parts))])
    top = float(values.max()) if len(values) else 1.0
    for i, v in enumerate(values):
        ax.text(v + 0.01 * top, i, f"{v:,.1f} {unit} ({100 * s.values_ns[i] / s.total_ns:.1f}%)",
                va="center", fontsize=8)
    ax.set_yticks(y, [part_label(n) for n in s.parts])
    ax.invert_yaxis()
    ax.set_xlim(0, 1.35 * top)
    ax.set_xlabel(f"time ({unit}); the parts add up to {s.total_ns / scale:,.1f} {unit}")
    return _finish(fig, ax, title, legend=False)


def rank_strip_png(point, title: str = "", max_ranks: int = MAX_RANKS, width: float | None = None) -> bytes:
    """Every record of the run's ``record_split`` (module docstring); ``width`` in inches
    (default: from the number of bars)."""
    rs = record_split(point.result)
    if rs is None:
        raise ValueError("no per-rank records whose parts add up to a total")
    first = rs.parts[0]
    order = sorted(range(len(rs.records)), key=lambda i: (-rs.records[i][first], rs.label(i)))
    shown, rest = order[:max_ranks], order[max_ranks:]
    ns = {k: rs.scale(k) for k in rs.parts}
    bars = [[rs.records[i][k] * ns[k] for k in rs.parts] for i in shown]
    labels = [rs.label(i) for i in shown]
    if rest:
        bars.append(list(np.mean([[rs.records[i][k] * ns[k] for k in rs.parts] for i in rest], axis=0)))
        labels.append(f"mean of\n{len(rest)} others")
    data = np.array(bars)
    scale, unit = time_axis(float(data.sum(axis=1).max()))
    data = data / scale
    n = len(bars)
    fig = Figure(figsize=(width or min(13.0, max(6.0, 0.28 * n + 3.0)), 3.8))
    ax = fig.subplots()
    x = np.arange(n)
    bottom = np.zeros(n)
    for i, name in enumerate(rs.parts):
        ax.bar(x, data[:, i], 0.8, bottom=bottom, label=part_label(name), color=_color(i), linewidth=0)
        bottom += data[:, i]
    marks = dict((value, name) for name, value in rs.marks)
    for pos, i in enumerate(shown):
        key = rs.records[i][rs.key] if rs.key else i
        if key in marks:
            ax.annotate(part_label(marks[key]), (pos, bottom[pos]), xytext=(0, 8), textcoords="offset points",
                        ha="center", fontsize=7, arrowprops={"arrowstyle": "-", "lw": 0.8})
    ax.set_xticks(x, labels, fontsize=7 if n <= 24 else 6, rotation=0 if n <= 24 else 90)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, 1.15 * float(bottom.max()) if n else 1.0)
    ax.set_xlabel(f"{rs.key or 'record'}, by {part_label(first)}, the highest first")
    ax.set_ylabel(f"time ({unit})")
    return _finish(fig, ax, title)
