"""One self-contained HTML page for a run or sweep output folder (``simnode report``).

``render_html(folder)`` -> the page as a string; ``write_report(result_dir, out_path)``
reads the folder (``simnode.report.folder.load_folder``), writes the page and returns
its path. The page has inline CSS, plots as base64 PNG ``data:`` images and no scripts
or external URLs, so it opens offline and can be mailed as one file.

Everything is drawn from the typed results (``simnode.report.result``), never from a
kind's name: every header carries its unit. Tables: each run's bottleneck; one row per
kernel record (time, bound, simulated/bound ratio, the kind's headline figures,
bottleneck); the run-level figures; per kernel its scalar figures, a table per mapping
figure (pipe busy shares, phases) and per list of records (hottest links). Plots: see
``simnode.report.plots``.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from simnode import units
from simnode.config.params import unit_of
from simnode.errors import ConfigError
from simnode.report import plots
from simnode.report.result import SATURATED_FRAC
from simnode.report.folder import CORRUPTED, LAYOUTS, ResultFolder, load_folder, read_json

MAX_HEATMAPS = 8

_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 8px 0 16px 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; text-align: left; } td.text { text-align: left; }
figure { margin: 12px 0; } figcaption { font-size: 13px; color: #444; max-width: 900px; }
img { max-width: 100%; border: 1px solid #ddd; }
pre { background: #f7f7f7; padding: 8px; font-size: 12px; overflow-x: auto; }
"""


def _esc(value) -> str:
    return html.escape(str(value), quote=True)


def _num(value, digits: int = 3) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, (int, float)) else "&ndash;"


def _table(columns: list[tuple[str, str]], rows: list[list]) -> str:
    """``columns``: (title, unit); ``rows``: cells, str cells left-aligned (escaped), numbers
    pre-formatted by the caller as ``(html,)`` tuples."""
    head = "".join(f"<th>{_esc(title)} ({_esc(unit)})</th>" for title, unit in columns)
    body = []
    for row in rows:
        cells = "".join(f"<td>{c[0]}</td>" if isinstance(c, tuple) else f'<td class="text">{_esc(c)}</td>'
                        for c in row)
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _point_columns(folder: ResultFolder) -> list[tuple[str, str]]:
    return [(k, "swept value") for k in folder.params]


def _point_cells(folder: ResultFolder, p) -> list:
    return [str(p.point.get(k, "")) for k in folder.params]


def _fmt(value, unit: str = "") -> str:
    """A value as a table cell shows it (fractions as percent)."""
    if isinstance(value, bool) or isinstance(value, str):
        return _esc(value)
    if not isinstance(value, (int, float)):
        return "&ndash;"
    if unit == "fraction":
        return f"{100 * value:,.1f}"
    if isinstance(value, int) or unit == "B":
        return f"{value:,.0f}"
    digits = 3 if unit in ("ratio", "us", "ns", "") else 1 if unit in ("GB/s", "TFLOPS") else 3
    return f"{value:,.{digits}f}"


def _shown_unit(unit: str) -> str:
    return "%" if unit == "fraction" else (unit or "value")


def _scalar(value) -> bool:
    return isinstance(value, (int, float, str, bool))


def _kernel_rows(folder: ResultFolder, headline: list) -> list[list]:
    rows = []
    for p in folder.points:
        for k in p.result.kernels:
            own = {f.name: f.value for f in k.figures if f.headline and _scalar(f.value)}
            busy = k.bottleneck_util_frac
            rows.append(_point_cells(folder, p) + [
                k.name, (_num(units.ns_to_us(k.time_ns)),),
                (_num(units.ns_to_us(k.bound_ns)) if k.bound_ns else "&ndash;",),
                (_num(k.sim_over_bound) if k.bound_ns else "&ndash;",)]
                + [(_fmt(own[name], unit) if name in own else "&ndash;",) for name, unit in headline]
                + [k.bottleneck or "&ndash;", (_num(100 * busy, 1) if busy is not None else "&ndash;",)])
    return rows


def _transposed(folder: ResultFolder, figures_of) -> str:
    """A table of the scalar figures ``figures_of(point)`` gives: a row per figure, a column
    per point (a run: one column)."""
    names: dict = {}
    for p in folder.points:
        for f in figures_of(p):
            if _scalar(f.value):
                names.setdefault(f.name, f.unit)
    if not names:
        return ""
    columns = [("figure", "name"), ("unit", "text")] + [(p.label, "value") for p in folder.points]
    rows = []
    for name, unit in names.items():
        cells = [name, _shown_unit(unit)]
        for p in folder.points:
            f = next((f for f in figures_of(p) if f.name == name), None)
            cells.append(("&ndash;",) if f is None else f.value if isinstance(f.value, str)
                         else (_fmt(f.value, f.unit),))
        rows.append(cells)
    return _table(columns, rows)


def _mapping_table(folder: ResultFolder, kernel: str, name: str) -> str:
    """A mapping figure of ``kernel``: a row per point, a column per key (nested keys a / b)."""
    values, unit = [], ""
    for p in folder.points:
        k = p.result.kernel(kernel)
        f = k.figure(name) if k is not None else None
        if f is not None and isinstance(f.value, dict):
            flat = {}
            for key, v in f.value.items():
                if isinstance(v, dict):
                    flat.update({f"{key} / {sub}": x for sub, x in v.items()})
                else:
                    flat[key] = v
            values.append((p, flat))
            unit = f.unit
    keys = list(dict.fromkeys(key for _, flat in values for key in flat))
    if not keys:
        return ""
    text_only = all(isinstance(v, str) for _, flat in values for v in flat.values())
    columns = _point_columns(folder) + [(key, "text" if text_only else _shown_unit(unit)) for key in keys]
    rows = [_point_cells(folder, p) + [(_fmt(flat[key], unit),) if key in flat and not isinstance(flat[key], str)
                                       else flat.get(key, "&ndash;") for key in keys] for p, flat in values]
    return f"<h3>{_esc(kernel)}: {_esc(name)}</h3>" + _table(columns, rows)


def _records_table(folder: ResultFolder, kernel: str, name: str) -> str:
    """A list-of-records figure of ``kernel`` (hottest links): a row per record."""
    rows, fields = [], {}
    for p in folder.points:
        k = p.result.kernel(kernel)
        f = k.figure(name) if k is not None else None
        if f is None or not isinstance(f.value, list):
            continue
        for rec in f.value:
            if isinstance(rec, dict):
                for key, v in rec.items():
                    fields.setdefault(key, "text" if isinstance(v, str) else (unit_of(f"_{key}") or "value"))
                rows.append((p, rec))
    if not rows:
        return ""
    columns = _point_columns(folder) + [(key, _shown_unit(u) if u != "text" else "text") for key, u in fields.items()]
    cells = [_point_cells(folder, p) + [rec.get(key, "&ndash;") if fields[key] == "text"
                                        else (_fmt(rec.get(key), fields[key]),) for key in fields]
             for p, rec in rows]
    return f"<h3>{_esc(kernel)}: {_esc(name)}</h3>" + _table(columns, cells)


def _tables(folder: ResultFolder) -> list[str]:
    pc = _point_columns(folder)
    # a kernel's headline figures by their own names: a row per kernel shows its own
    headline = list(dict.fromkeys((f.name, f.unit) for p in folder.points for k in p.result.kernels
                                  for f in k.figures if f.headline and _scalar(f.value)
                                  and not isinstance(f.value, (str, bool))))
    out = ["<h2>Kernels</h2>",
           "<p>Simulated / bound = a kernel's time over its analytical lower bound, as its kind states "
           "it (chip kernels: compute, L2 and HBM at peak rates; network kernels: the busiest port's "
           "bytes / bandwidth, or a rank's payload / its URMA ceiling). The other columns are the "
           "figures each kind declares as its headline.</p>",
           _table(pc + [("kernel", "name"), ("time", "us"), ("bound", "us"), ("simulated / bound", "ratio")]
                  + [(n, _shown_unit(u)) for n, u in headline]
                  + [("bottleneck", "resource"), ("bottleneck busy", "% of kernel time")],
                  _kernel_rows(folder, headline))]
    run_figures = _transposed(folder, lambda p: p.result.figures)
    if run_figures:
        out += ["<h2>Run figures</h2>", run_figures]
    for kernel in dict.fromkeys(k.name for p in folder.points for k in p.result.kernels):
        out.append(f"<h2>Kernel {_esc(kernel)}</h2>")
        out.append(_transposed(folder, lambda p: (p.result.kernel(kernel).figures
                                                 if p.result.kernel(kernel) else ())))
        names = dict.fromkeys(f.name for p in folder.points if p.result.kernel(kernel)
                              for f in p.result.kernel(kernel).figures)
        for name in names:
            out.append(_mapping_table(folder, kernel, name))
            out.append(_records_table(folder, kernel, name))
    return [part for part in out if part]


def _figure(png: bytes, alt: str, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img alt="{_esc(alt)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_esc(caption)}</figcaption></figure>")


def _plots(folder: ResultFolder, published=()) -> list[str]:
    out = []
    pts = folder.points
    for field in plots.sweep_fields(pts, folder.params)[:1]:
        try:
            png = plots.sweep_png(pts, field, published, f"{folder.workload}: headline figures against {field}",
                                  band_field=folder.band_field)
        except ValueError:
            continue
        band = (f" One line per calibration overlay ({folder.band_field}); the shaded band spans "
                "their lowest to highest value.") if folder.band_field else ""
        out.append(_figure(png, f"headline figures against {field}",
                           f"Each headline figure against {field}, one panel per unit; stars: the published "
                           "figures of the validation file at that value, error bars their tolerance." + band))
    with_series = [p for p in pts if p.result.series]
    for p in with_series[:MAX_HEATMAPS]:
        for name in dict.fromkeys(s.name for s in p.result.series):
            group = [s for s in p.result.series if s.name == name]
            out.append(_figure(plots.series_png(group, title=p.label), f"{name} {p.label}",
                               f"{p.label}: {group[0].doc or name} per time bin ({group[0].unit}), one panel "
                               "per kernel, the busiest rows on top."))
    if len(with_series) > MAX_HEATMAPS:
        out.append(f"<p>Time series of {len(with_series) - MAX_HEATMAPS} further points not shown.</p>")
    for kernel, name in plots.fraction_bar_candidates(pts):
        out.append(_figure(plots.fraction_bars_png(pts, kernel, name), f"{kernel} {name}",
                           f"{kernel}: {name} per run, one panel per key group."))
    if plots.roofline_points(pts):
        out.append(_figure(plots.roofline_png(pts), "roofline position",
                           "x: the TFLOPS at the kernel's bound (flops / bound); y: achieved TFLOPS "
                           "(flops / time). On the diagonal a kernel runs at its bound; its distance below "
                           "is the simulated/bound ratio."))
    if plots.has_layer(pts):
        out.append(_figure(plots.layer_breakdown_png(pts, "MoE layer: where the time goes"),
                           "MoE layer breakdown",
                           "Each run's layer time, split for its straggler (the rank the others wait "
                           "for): compute, communication not hidden behind compute, and the wait for "
                           "slower ranks at the barriers. The three add up to the layer time."))
    if plots.has_decode(pts):
        out.append(_figure(plots.decode_breakdown_png(pts, "decode MoE layer: where the time goes"),
                           "decode MoE layer breakdown",
                           "Each run's straggler: its main stream kernel by kernel (stacked), its "
                           "shared experts' stream beside it (hatched) and the layer's time (tick)."))
    strips = [p for p in pts if plots.has_rank_strip(p)]
    for p in strips[:MAX_HEATMAPS]:
        out.append(_figure(plots.rank_strip_png(p, title=p.label), f"per-rank breakdown {p.label}",
                           f"{p.label}: every rank's compute, exposed communication and wait; "
                           f"{p.result.details.get('straggler_reason', '')}"))
    return (["<h2>Plots</h2>"] + out) if out else []


def render_html(folder: ResultFolder, published=()) -> str:
    """The report page of ``folder`` (see the module docstring); ``published``: records of
    the validation file to plot beside the model (``simnode.report.plots``)."""
    what = "sweep" if folder.is_sweep else "run"
    title = f"simnode report: {folder.workload} ({folder.kind} {what})"
    parts = [f"<h1>{_esc(title)}</h1>",
             f"<p>Folder <code>{_esc(folder.path)}</code>; {len(folder.points)} "
             f"run{'s' if len(folder.points) != 1 else ''}.</p>"]
    if folder.is_sweep:
        parts.append(_table([("swept field", "name"), ("values", "as given")],
                            [[k, ", ".join(map(str, v))] for k, v in folder.params.items()]))
    busy = [p.result.bottleneck_util_frac for p in folder.points]
    with_busy = any(u is not None for u in busy)
    busy_cols = [("bottleneck busy", "% of makespan")] if with_busy else []
    bottlenecks = [[p.label, p.result.bottleneck]
                   + ([(_num(100 * u, 1) if u is not None else "&ndash;",)] if with_busy else [])
                   for p, u in zip(folder.points, busy)]
    parts.append("<h2>Bottleneck of each run</h2>")
    if any(u is not None and u < SATURATED_FRAC for u in busy):
        parts.append(f"<p>A run's bottleneck is its busiest resource. Below {100 * SATURATED_FRAC:.0f}% "
                     f"busy it does not set the time by itself: the run waits on dependencies and "
                     f"latencies (for a chip run, idle_on_flags_frac).</p>")
    parts.append(_table([("run", "name"), ("bottleneck", "resource")] + busy_cols, bottlenecks))
    parts += _tables(folder) + _plots(folder, published)
    config = folder.path / "config.json"
    if config.exists() and not folder.is_sweep:
        text = json.dumps(read_json(config, dict, "the run's configuration"), indent=2)
        parts.append(f"<h2>Configuration</h2><pre>{_esc(text)}</pre>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title><style>{_CSS}</style></head>\n<body>\n"
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
                render_html(ResultFolder(folder.path, folder.is_sweep, folder.params, [p]), published)
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
