"""One self-contained HTML page for a run or sweep output folder (``simnode report``).

``render_html(folder)`` -> the page as a string; ``write_report(result_dir, out_path)``
reads the folder (``simnode.report.folder.load_folder``), writes the page and returns
its path. The page has inline CSS, plots as base64 PNG ``data:`` images and no scripts
or external URLs, so it opens offline and can be mailed as one file.

The answer first, in pictures; the evidence behind it, folded:

1. the summary (``simnode.report.summary``): what was run, the summary plots, one line per
   run with its time and bottleneck; on a 1400 x 900 screen it is all in view;
2. the tables (``simnode.report.tables``): a folded group for the run and one per kernel,
   units in the headings, what is the same for every group said once above them;
3. the other plots: the sweep's other headline panels, busy shares, roofline position, and
   per run (folded) its heat maps over time and its per-rank strip (``simnode.report.plots``,
   ``simnode.report.timeplots``), each with a numbered caption;
4. a run's configuration (folded).

Everything is drawn from the typed results (``simnode.report.result``), never from a kind's
name.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from simnode.errors import ConfigError
from simnode.report import plots, timeplots
from simnode.report.breakdown import record_split
from simnode.report.folder import CORRUPTED, LAYOUTS, ResultFolder, load_folder
from simnode.report.summary import Figures, comparable_published, fraction_figure, strip_caption, summary_html
from simnode.report.tables import esc, kernel_group, run_group

#: runs of a sweep whose heat maps and strips the page holds (each is a few hundred kB)
MAX_HEATMAPS = 8

_CSS = """
body { font-family: sans-serif; margin: 16px 24px; color: #222; max-width: 1360px; }
h1 { font-size: 22px; margin: 0 0 4px 0; } h1 .what { font-weight: normal; color: #555; font-size: 17px; }
h2 { font-size: 18px; margin-top: 22px; border-bottom: 1px solid #ccc; }
.summary h2 { font-size: 15px; margin: 4px 0; border: none; } .summary h2 ~ h2 { margin-top: 14px; }
h4 { font-size: 13px; margin: 14px 0 2px 0; font-weight: normal; }
p.lede { margin: 0 0 8px 0; font-size: 14px; color: #333; }
.summary { display: flex; flex-wrap: wrap; gap: 8px 20px; align-items: flex-start; }
.summary figure { flex: 0 1 650px; margin: 0; }
.summary .runs { flex: 1 1 420px; font-size: 14px; }
.summary ul { margin: 0; padding-left: 18px; } .summary ul.many { column-width: 420px; }
.summary li { margin: 2px 0; } p.note { font-size: 13px; color: #555; }
details { margin: 4px 0; border: 1px solid #ddd; border-radius: 3px; padding: 4px 8px; }
details[open] { padding-bottom: 10px; }
summary { cursor: pointer; font-weight: bold; font-size: 15px; }
summary .what { font-weight: normal; color: #555; font-size: 13px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0 10px 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; text-align: left; } td.text { text-align: left; }
td.doc { text-align: left; color: #555; font-size: 12px; max-width: 420px; }
figure { margin: 12px 0; } figcaption { font-size: 13px; color: #444; max-width: 900px; }
img { max-width: 100%; border: 1px solid #ddd; }
pre { background: #f7f7f7; padding: 8px; font-size: 12px; overflow-x: auto; }
"""

#: said once above the tables: what every group's rows mean
_TABLES_NOTE = ("One group per kernel, after the run's own; open one to see it. A row is a figure, its unit "
                "in its heading (% = a fraction of 100; GB = 10<sup>9</sup> B, so 1 GB/s = 1 B/ns), a column "
                "a run. Simulated / bound = a kernel's time over its analytical lower bound, as its kind "
                "states it (chip kernels: compute, L2 and HBM at peak rates; network kernels: the busiest "
                "port's bytes / bandwidth, or a rank's payload / its URMA ceiling).")


def _tables(folder: ResultFolder) -> list[str]:
    pts = folder.points
    kernels = dict.fromkeys(k.name for p in pts for k in p.result.kernels)
    return (["<h2>Tables</h2>", f'<p class="note">{_TABLES_NOTE}</p>', run_group(pts)]
            + [kernel_group(pts, k) for k in kernels])


def _per_run(point, figures: Figures, strip: bool) -> str:
    """A run's heat maps (one per series name) and per-rank strip, folded."""
    shown, said = [], []
    for name in dict.fromkeys(s.name for s in point.result.series):
        group = [s for s in point.result.series if s.name == name]
        shown.append(figures.html(
            timeplots.series_png(group, title=point.label), f"{name} {point.label}",
            f"{point.label}: {group[0].doc or name} per time bin ({group[0].unit or 'value'}), one panel per "
            f"kernel; the {timeplots.MAX_ROWS} busiest rows on top (highest mean), the rest below the white line "
            "as their mean."))
        said.append(f"{name} over time")
    if strip and record_split(point.result) is not None:
        shown.append(figures.html(timeplots.rank_strip_png(point, title=point.label),
                                  f"per-rank breakdown {point.label}", strip_caption(point)))
        said.append("time per rank")
    if not shown:
        return ""
    return (f'<details><summary>{esc(point.label)} <span class="what">{esc(", ".join(said))}</span></summary>'
            f"{''.join(shown)}</details>")


def _plots(folder: ResultFolder, published, figures: Figures) -> list[str]:
    out = []
    pts = folder.points
    published = comparable_published(folder, published)[0]
    field = plots.x_field(folder.params, folder.band_field)
    if folder.is_sweep and field is not None and len(pts) > 1:
        primary = plots.primary_unit(pts, field, published)
        others = [u for u in plots.sweep_units(pts) if u != primary]
        if others:
            out.append(figures.html(
                plots.sweep_png(pts, field, published, f"{folder.workload}: other headline figures against {field}",
                                band_field=folder.band_field, units_=others),
                f"other headline figures against {field}",
                f"The other headline figures against {field}, one panel per unit ({', '.join(others)})."))
    if folder.is_sweep and field is not None:
        for y, x, limits in plots.tradeoff_candidates(pts):
            out.append(figures.html(
                plots.tradeoff_png(pts, field, y, x, limits, f"{folder.workload}: {y} against {x}"),
                f"{y} against {x}",
                f"{y} against {x}, a point per run labelled with its {field}"
                + (f"; dashed lines at {', '.join(f'{v:g}' for v in limits)}: the limits (SLOs) "
                   f"it is read against" if limits else "") + "."))
    for kernel, name in plots.fraction_bar_candidates(pts):
        if f"{kernel} {name}" not in figures.shown:
            out.append(fraction_figure(pts, kernel, name, figures))
    if plots.roofline_points(pts):
        out.append(figures.html(plots.roofline_png(pts), "roofline position",
                                "x: the TFLOPS at the kernel's bound (flops / bound); y: achieved TFLOPS "
                                "(flops / time). On the diagonal a kernel runs at its bound; its distance below "
                                "is the simulated/bound ratio."))
    runs = [p for p in pts if p.result.series or (folder.is_sweep and record_split(p.result) is not None)]
    out += [_per_run(p, figures, folder.is_sweep) for p in runs[:MAX_HEATMAPS]]
    if len(runs) > MAX_HEATMAPS:
        out.append(f'<p class="note">Plots over time of {len(runs) - MAX_HEATMAPS} further runs not shown.</p>')
    out = [part for part in out if part]
    return (["<h2>Plots</h2>"] + out) if out else []


def render_html(folder: ResultFolder, published=()) -> str:
    """The report page of ``folder`` (see the module docstring); ``published``: records of
    the validation file to plot beside the model (``simnode.report.plots``)."""
    what = "sweep" if folder.is_sweep else "run"
    title = f"simnode report: {folder.workload} ({folder.kind} {what})"
    figures = Figures()
    parts = [summary_html(folder, published, figures)] + _tables(folder) + _plots(folder, published, figures)
    if folder.config is not None:
        text = json.dumps(folder.config, indent=2)
        parts.append(f'<details><summary>Configuration <span class="what">config.json: the files, --set values, '
                     f"the resolved parameters and where each came from</span></summary><pre>{esc(text)}</pre>"
                     "</details>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{_CSS}</style></head>\n<body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


#: what a folder's content, read and type-checked by load_folder, can still raise while the page
#: is drawn from it (a combination the checks do not cover): turned into a user error naming it
_CONTENT_ERRORS = (TypeError, KeyError, ValueError, AttributeError, IndexError, ZeroDivisionError, OverflowError)


def check_output_path(path, source: str = "-o", key: str = "output") -> Path:
    """The page's path, checked before any work: not empty, not a folder, in an existing
    folder; else ``ConfigError`` naming ``source`` (the option) and the path."""
    text = str(path)
    if text == "":
        raise ConfigError(source, key, "", "the path of the HTML file to write (report.html)")
    out = Path(text)
    if out.is_dir():
        raise ConfigError(source, key, text, f"the path of a file, not of an existing folder "
                          f"(to write into it, name the file: {out / 'report.html'})")
    if text.endswith("/"):
        raise ConfigError(source, key, text, "the path of a file, not of a folder (it ends in a slash)")
    if not out.parent.is_dir():
        raise ConfigError(source, key, text, f"a file in an existing folder ({out.parent} is not one)")
    return out


def _corrupted_point(folder: ResultFolder, published) -> Path:
    """The result.json whose point alone fails to render (else the folder itself)."""
    if len(folder.points) > 1:
        for p in folder.points:
            try:
                render_html(dataclasses.replace(folder, points=[p]), published)
            except _CONTENT_ERRORS:
                return (p.dir or folder.path) / "result.json"
            except ConfigError:
                pass
    return folder.path


def write_report(result_dir, out_path=None, published=()) -> Path:
    """Write the report of ``result_dir`` to ``out_path`` (default RESULT_DIR/report.html).
    User mistakes (an empty, missing or corrupted folder; an output path that is empty, a
    folder, in a missing folder or not writable) raise ``ConfigError``; the output path is
    checked before the folder is read, the write's own failure (disk full) after."""
    option = ("-o", "output") if out_path is not None else ("simnode report", "-o (default RESULT_DIR/report.html)")
    if out_path is not None:
        out = check_output_path(out_path, *option)
    folder = load_folder(result_dir)
    if out_path is None:
        out = check_output_path(folder.path / "report.html", *option)
    elif out.suffix.lower() in (".json", ".csv") and out.exists() \
            and folder.path.resolve() in out.resolve().parents:
        raise ConfigError(*option, str(out), "a new file or an .html file: this one is part of the "
                          "results the report reads, and writing the page over it would lose them")
    try:
        page = render_html(folder, published)
    except _CONTENT_ERRORS as exc:
        where = _corrupted_point(folder, published)
        raise ConfigError(str(where), "", f"<{type(exc).__name__}: {exc}>",
                          f"{LAYOUTS}, with the fields the report reads", CORRUPTED) from None
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(*option, str(out), f"a file the report can be written to ({exc.strerror or exc})") from None
    return out
