"""The top of a report page: what was run, the answer as a picture, one line per run.

``summary_html(folder, published, figures)`` -> the page's heading and its summary section:

- what was run: the workload and topology files, the common --set values, the swept fields
  and their values;
- the summary plots (``class="summary-plot"``), at most two, side by side on a wide screen:
  for a sweep, its headline figures against the swept field (``plots.x_field``) in the
  ``plots.primary_unit`` panel, with the published points, their tolerance and a calibrated
  band where there is one; and, where the runs' times split into parts
  (``simnode.report.breakdown``), the stacked split per run. A single run shows its split
  and its per-rank strip where it has them, else its kernels against their bounds and its
  first headline mapping of busy shares;
- one line per run: its label, its time, its bottleneck (with its busy share), and for a
  single run its headline figures; the note on a bottleneck below ``SATURATED_FRAC`` said
  once; for a sweep, each published figure it has a run at, against the model's value.

Published figures are drawn and compared only where they were measured as the runs were made
(``comparable_published``). ``figures`` numbers the page's figures (``Figures``), so captions
read "Figure 1.".
"""

from __future__ import annotations

import base64
from pathlib import Path

from simnode.report import plots, timeplots
from simnode.report.breakdown import record_split, run_split, time_axis
from simnode.report.result import SATURATED_FRAC
from simnode.report.tables import esc, fmt, shown_unit

#: (width, panel height) of a summary plot in inches: two fit side by side on a 1400-pixel screen
SUMMARY_SIZE = (6.5, 3.7)


class Figures:
    """Numbers the figures of one page in order of appearance."""

    def __init__(self):
        self.count = 0
        self.shown: set = set()               #: the alt texts of the figures so far

    def html(self, png: bytes, alt: str, caption: str, cls: str = "") -> str:
        self.count += 1
        self.shown.add(alt)
        data = base64.b64encode(png).decode("ascii")
        klass = f' class="{cls}"' if cls else ""
        return (f'<figure{klass}><img alt="{esc(alt)}" src="data:image/png;base64,{data}">'
                f"<figcaption><b>Figure {self.count}.</b> {esc(caption)}</figcaption></figure>")


def _what_was_run(folder) -> str:
    inputs = folder.inputs
    said = []
    if "workload" in inputs:
        said.append(f"<code>{esc(inputs['workload'])}</code>"
                    + (f" on <code>{esc(inputs['topology'])}</code>" if "topology" in inputs else ""))
    if inputs.get("sets"):
        said.append("with " + ", ".join(f"<code>{esc(s)}</code>" for s in inputs["sets"]))
    if folder.is_sweep:
        said.append("swept " + "; ".join(f"<b>{esc(k)}</b> = {esc(', '.join(map(str, v)))}"
                                         for k, v in folder.params.items()))
    runs = len(folder.points)
    said.append(f"{runs} run{'s' if runs != 1 else ''} in <code>{esc(folder.path)}</code>")
    return f'<p class="lede">{"; ".join(said)}.</p>'


def comparable_published(folder, published) -> tuple[list, str]:
    """The published records measured as the folder's runs were: on a topology file of the
    same name (where both state one), with no --set beyond the swept fields; and, when a --set
    rules out those of the folder's workload, why (said in the caption)."""
    sets = folder.inputs.get("sets") or []
    if sets:
        ruled_out = any(q["workload"] == folder.workload for q in published)
        return [], (f"the runs set {', '.join(sets)}, which the published measurements did not"
                    if ruled_out else "")
    topology = Path(folder.inputs.get("topology", "")).name
    return [q for q in published if not topology or Path(q.get("topology", topology)).name == topology], ""


def _published_note(points, field: str, unit: str, published) -> str:
    names = [n for p in points for n, u in p.result.headline_columns() if u == unit]
    if not plots.published_for(published, points[0].result.workload, field, names):
        return ""
    return "; stars: the published figures of the validation file, bars their tolerance"


def _against_published(folder, published) -> str:
    """A line per published figure the sweep has a run at: the model's value against it."""
    field = plots.x_field(folder.params, folder.band_field)
    if field is None:
        return ""
    unit_of = dict(plots.headline_figures(folder.points))
    lines = []
    for q in plots.published_for(published, folder.workload, field, list(unit_of)):
        for p in folder.points:
            model = p.flat.get(q["metric"])
            if p.point.get(field) != q["set"][field] or not isinstance(model, (int, float)):
                continue
            error = model / q["published"] - 1.0
            inside = "within" if abs(error) <= q["tolerance_frac"] else "outside"
            lines.append(f"<li><b>{esc(q['metric'])}</b> at {esc(p.label)}: {fmt(model, unit_of[q['metric']])} against "
                         f"{q['published']:g} published ({100 * error:+.1f}%, {inside} "
                         f"\u00b1{100 * q['tolerance_frac']:.0f}%)</li>")
    return f"<h2>Against the published figures</h2><ul>{''.join(lines)}</ul>" if lines else ""


def _sweep_plot(folder, published, figures: Figures, why_not: str = "") -> str:
    """``why_not``: why no published figure is drawn (said in the caption), or ""."""
    pts = folder.points
    field = plots.x_field(folder.params, folder.band_field)
    if field is None or len(pts) < 2:
        return ""
    unit = plots.primary_unit(pts, field, published)
    names = [n for n, u in plots.headline_figures(pts) if u == unit]
    shown = ", ".join(names) if len(names) <= 2 else unit or "value"
    try:
        png = plots.sweep_png(pts, field, published, f"{folder.workload}: {shown} against {field}",
                              band_field=folder.band_field, units_=[unit], size=SUMMARY_SIZE)
    except ValueError:
        return ""
    others = [k for k in folder.params if k not in (field, folder.band_field)]
    lines = f"; one line per {', '.join(others)}" if others else ""
    band = (f"; one line per calibration overlay ({folder.band_field}); the shaded band spans "
            "their lowest to highest value") if folder.band_field else ""
    return figures.html(png, f"headline figures against {field}",
                        f"{'The headline figures in ' + (unit or 'value') if len(names) > 2 else shown} "
                        f"against {field}{lines}"
                        f"{_published_note(pts, field, unit, published)}{band}"
                        + (f"; no published figure drawn: {why_not}" if why_not else "") + ".", "summary-plot")


def _split_caption(points) -> str:
    s = next(split for p in points for split in [run_split(p.result)] if split is not None)
    source = "" if s.figure == ", ".join(s.parts) else f" (the figure {s.figure})"
    docs = "; ".join(f"{name}: {doc}" for name, doc in zip(s.parts, s.docs) if doc)
    whose = "Each run's" if len(points) > 1 else "The run's"
    return (f"{whose} time split into {', '.join(s.parts)}{source}; the parts add up to the run's time"
            + (f". {docs}" if docs else "") + ".")


def strip_caption(point) -> str:
    """The caption of ``point``'s per-rank strip (``timeplots.rank_strip_png``)."""
    rs = record_split(point.result)
    who = rs.key or "record"
    n, limit = len(rs.records), timeplots.MAX_RANKS
    order = (f"the {limit} {who}s with the highest {rs.parts[0]} first, the other {n - limit} as one bar of "
             "their mean" if n > limit else f"the highest {rs.parts[0]} first")
    marked = "; marked: " + ", ".join(f"{name} {value}" for name, value in rs.marks) if rs.marks else ""
    return (f"{point.label}: {rs.figure}" + (f" ({rs.doc})" if rs.doc else "") + f": per {who}, "
            f"{', '.join(rs.parts)}, adding up to its {rs.total}; {order}{marked}.")


def _run_plots(point, figures: Figures) -> list[str]:
    out = []
    if run_split(point.result) is not None:
        out.append(figures.html(timeplots.split_png(point, f"{point.label}: where the time goes"),
                                "time split", _split_caption([point]), "summary-plot"))
    if record_split(point.result) is not None:
        out.append(figures.html(timeplots.rank_strip_png(point, f"{point.label}: per rank", width=SUMMARY_SIZE[0]),
                                f"per-rank breakdown {point.label}", strip_caption(point), "summary-plot"))
    if not out and any(k.time_ns > 0 for k in point.result.kernels):
        out.append(figures.html(plots.kernel_bounds_png(point, f"{point.label}: kernels against their bounds"),
                                "kernels against their bounds",
                                "Each kernel's simulated time (bar) and its analytical lower bound (black tick), "
                                "labelled with time / bound and the kernel's bottleneck.", "summary-plot"))
        for kernel, name in plots.fraction_bar_candidates([point])[:1]:
            out.append(fraction_figure([point], kernel, name, figures, "summary-plot"))
    return out


def fraction_figure(points, kernel: str, name: str, figures: Figures, cls: str = "") -> str:
    """The bars of a headline mapping of fractions (``plots.fraction_bars_png``), captioned."""
    f = next(k.figure(name) for p in points for k in p.result.kernels if k.name == kernel and k.figure(name))
    return figures.html(plots.fraction_bars_png(points, kernel, name), f"{kernel} {name}",
                        f"{kernel}: {name}" + (f" ({f.doc})" if f.doc else "")
                        + (", a bar per run" if len(points) > 1 else "") + ", one panel per key group.", cls)


def _unit_after(unit: str) -> str:
    """A unit as it follows a number in a line of text: ``%``, `` GB/s``; none for ratios."""
    u = shown_unit(unit)
    return "" if u in ("", "ratio") else u if u == "%" else f" {esc(u)}"


def _run_line(point, scale: float, unit: str, names) -> str:
    """``names``: the headline figures the line shows (all if None)."""
    r = point.result
    busy = f", {100 * r.bottleneck_util_frac:.1f}% busy" if r.bottleneck_util_frac is not None else ""
    shown = [(n, u) for n, u in r.headline_columns() if isinstance(point.flat.get(n), (int, float))
             and (names is None or n in names)]
    figures = ""
    for i, (n, u) in enumerate(shown[:6]):       # a unit said once after a run of figures in it
        last = i == len(shown[:6]) - 1 or shown[i + 1][1] != u
        figures += f"{'; ' if i == 0 or shown[i - 1][1] != u else ', '}{esc(n)} {fmt(point.flat[n], u)}" \
            + (_unit_after(u) if last else "")
    return (f'<li><b>{esc(point.label)}</b>: {r.makespan_ns / scale:,.1f} {unit}; '
            f"bottleneck {esc(r.bottleneck)}{busy}{figures}</li>")


def summary_html(folder, published, figures: Figures) -> str:
    """The heading and the summary section of ``folder``'s page (module docstring)."""
    pts = folder.points
    what = (f"a {folder.kind} sweep of {', '.join(folder.params)}" if folder.is_sweep
            else f"a {folder.kind} run")
    parts = [f'<h1>{esc(folder.workload)} <span class="what">{esc(what)}</span></h1>', _what_was_run(folder)]
    published, why_not = comparable_published(folder, published)
    sweep_plot = _sweep_plot(folder, published, figures, why_not) if folder.is_sweep else ""
    shown = [sweep_plot] if sweep_plot else []
    if sweep_plot and any(run_split(p.result) is not None for p in pts):
        shown.append(figures.html(timeplots.split_bars_png(pts, f"{folder.workload}: where the time goes",
                                                           size=(SUMMARY_SIZE[0], SUMMARY_SIZE[1] + 0.6)),
                                  "time split per run", _split_caption(pts), "summary-plot"))
    if not shown:
        shown = _run_plots(pts[0], figures)
    scale, unit = time_axis(max(p.result.makespan_ns for p in pts))
    # a sweep's figures are in its plot: its lines say time and bottleneck; a run's, its figures too
    lines = "".join(_run_line(p, scale, unit, () if sweep_plot else None) for p in pts)
    busy = [p.result.bottleneck_util_frac for p in pts]
    note = ""
    if any(u is not None and u < SATURATED_FRAC for u in busy):
        note = (f'<p class="note">A run\'s bottleneck is its busiest resource; below {100 * SATURATED_FRAC:.0f}% '
                "busy it does not set the time by itself: the run waits on dependencies and latencies (for a "
                "chip run, idle_on_flags_frac).</p>")
    runs = (f'<div class="runs"><h2>{"Runs" if len(pts) > 1 else "The run"}: time and bottleneck</h2>'
            f'<ul class="{"many" if len(pts) > 8 else ""}">{lines}</ul>{note}'
            f'{_against_published(folder, published) if sweep_plot else ""}</div>')
    parts.append(f'<section id="summary" class="summary">{"".join(shown)}{runs}</section>')
    return "\n".join(parts)
