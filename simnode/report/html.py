"""One self-contained HTML page for a run or sweep output folder (``simnode report``).

``render_html(folder)`` -> the page as a string; ``write_report(result_dir, out_path)``
reads the folder (``simnode.report.folder.load_folder``), writes the page and returns
its path. The page has inline CSS, plots as base64 PNG ``data:`` images and no scripts
or external URLs, so it opens offline and can be mailed as one file.

Tables (every header carries its unit): one row per kernel (a chip workload is one
kernel; DeepEP has dispatch and combine) with its time, its lower bound, the
simulated/bound ratio, TFLOPS or GB/s and its bottleneck; chip memory traffic;
per-pipe busy fractions; DeepEP hottest links and phases. Plots: see
``simnode.report.plots``.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from simnode import units
from simnode.errors import ConfigError
from simnode.report import plots
from simnode.report.result import SATURATED_FRAC
from simnode.report.folder import (ALL_NETWORK_KERNELS, CORRUPTED, DEEPEP_KERNELS, LAYOUTS,
                                   NETWORK_KERNELS, ResultFolder, load_folder, read_json)

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


def network_kernel_bottleneck(result: dict, kernel: str) -> str:
    """The busiest of the kernel's hottest link and its per-rank chip resources (as the
    deepep and transport workloads name the run's bottleneck)."""
    cands = [(h["util_frac"], f"link {h['link']}") for h in result.get(f"{kernel}_hottest_links", [])[:1]]
    busiest = result.get(f"{kernel}_chip_busiest", {})
    cands += [(u, busiest.get(name, f"rank {name}"))
              for name, u in result.get(f"{kernel}_chip_util_frac", {}).items()]
    if not cands:
        return result.get("bottleneck", "")
    util, label = max(cands, key=lambda c: c[0])
    return f"{label} ({100 * util:.1f}% busy)"


def _kernel_rows(folder: ResultFolder) -> list[list]:
    rows = []
    for p in folder.points:
        r = p.result
        if r["kind"] in NETWORK_KERNELS:
            for k in NETWORK_KERNELS[r["kind"]]:
                if f"{k}_ns" not in r:
                    continue
                rows.append(_point_cells(folder, p) + [
                    k, (_num(units.ns_to_us(r[f"{k}_ns"])),), (_num(units.ns_to_us(r[f"bound_{k}_ns"])),),
                    (_num(r[f"{k}_sim_over_bound"]),), ("&ndash;",), (_num(r[f"{k}_GBps"], 1),),
                    network_kernel_bottleneck(r, k)])
        else:
            span, bound = r["makespan_ns"], r.get("roofline_ns", 0.0)
            rows.append(_point_cells(folder, p) + [
                r["kind"], (_num(units.ns_to_us(span)),),
                (_num(units.ns_to_us(bound)) if bound else "&ndash;",),
                (_num(span / bound) if bound else "&ndash;",),
                (_num(r.get("tflops"), 1) if r.get("flops") else "&ndash;",), ("&ndash;",), r["bottleneck"]])
    return rows


def _tables(folder: ResultFolder) -> list[str]:
    pc = _point_columns(folder)
    out = ["<h2>Kernels</h2>",
           "<p>Simulated / bound = kernel time over its analytical lower bound (roofline for chip "
           "kernels: compute, L2 and HBM at peak rates; DeepEP and transport: the busiest port's bytes / "
           "bandwidth, or a rank's payload / its URMA ceiling if that is longer). DeepEP bandwidth: received tokens (self-rank included) x logical bytes per token "
           "/ kernel time, mean over ranks; transport: payload put per sending rank / time.</p>",
           _table(pc + [("kernel", "name"), ("time", "us"), ("bound", "us"), ("simulated / bound", "ratio"),
                        ("achieved", "TFLOPS"), ("bandwidth", "GB/s per rank"), ("bottleneck", "resource")],
                  _kernel_rows(folder))]
    chip = [p for p in folder.points if p.result["kind"] not in NETWORK_KERNELS]
    if chip:
        out += ["<h2>Chip memory traffic</h2>", _table(
            pc + [("L2 traffic", "GB"), ("L2", "GB/s"), ("L2", "% of peak"),
                  ("HBM traffic", "GB"), ("HBM", "GB/s"), ("HBM", "% of peak")],
            [_point_cells(folder, p) + [
                (_num(p.result.get("l2_bytes", 0) / units.BYTES_PER_GB),), (_num(p.result.get("l2_GBps"), 0),),
                (_num(100 * p.result.get("l2_util_frac", 0.0), 1),),
                (_num(p.result.get("hbm_bytes", 0) / units.BYTES_PER_GB),), (_num(p.result.get("hbm_GBps"), 0),),
                (_num(100 * p.result.get("hbm_util_frac", 0.0), 1),)] for p in chip])]
    pipes = sorted({k for p in folder.points for k in p.result.get("pipe_busy_frac", {})})
    if pipes:
        out += ["<h2>Pipe busy fractions</h2>", _table(
            pc + [(k, "% of makespan") for k in pipes],
            [_point_cells(folder, p) + [(_num(100 * p.result["pipe_busy_frac"][k], 1)
                                         if k in p.result["pipe_busy_frac"] else "&ndash;",) for k in pipes]
             for p in folder.points if p.result.get("pipe_busy_frac")])]
    links = []
    for p in folder.points:
        for k in ALL_NETWORK_KERNELS:
            for h in p.result.get(f"{k}_hottest_links", []):
                links.append(_point_cells(folder, p) + [k, h["link"], (_num(h["bytes"] / units.BYTES_PER_GB),),
                                                        (_num(100 * h["util_frac"], 1),)])
    if links:
        out += ["<h2>Hottest links</h2>", _table(
            pc + [("kernel", "name"), ("link", "name"), ("traffic", "GB"), ("busy", "% of kernel time")], links)]
    for k in ALL_NETWORK_KERNELS:
        runs = [p for p in folder.points if p.result.get(f"{k}_phases_us")]
        names = list(dict.fromkeys(n for p in runs for n in p.result[f"{k}_phases_us"]))
        if runs:
            what = f"DeepEP {k}" if k in DEEPEP_KERNELS else k.capitalize()
            out += [f"<h2>{what} phases (first sending rank)</h2>", _table(
                pc + [(n, "us") for n in names],
                [_point_cells(folder, p) + [(_num(p.result[f"{k}_phases_us"].get(n)),) for n in names]
                 for p in runs])]
    return out


def _figure(png: bytes, alt: str, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img alt="{_esc(alt)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_esc(caption)}</figcaption></figure>")


def _plots(folder: ResultFolder, cases_path=None) -> list[str]:
    out = []
    pts = folder.points
    if plots.has_bandwidth(pts):
        workload = str(plots.bandwidth_points(pts)[0].result.get("workload", ""))
        published = plots.published_points(workload, cases_path)
        out.append(_figure(plots.bandwidth_vs_ep_png(pts, published, f"{workload}: bandwidth vs EP size"),
                           "bandwidth vs EP size",
                           "Bandwidth per rank (GB/s: DeepEP dispatch and combine, or transport puts) against "
                           "the EP size; stars: the published figures of validation/published.yaml, error bars "
                           "their tolerance."))
    with_util = [p for p in pts if p.network_util]
    for p in with_util[:MAX_HEATMAPS]:
        out.append(_figure(plots.link_heatmap_png(p.network_util, title=p.label), f"link utilization {p.label}",
                           f"{p.label}: busy fraction of each network link per time bin (busiest links on top)."))
        if plots.has_chip_series(p.network_util):
            out.append(_figure(plots.chip_heatmap_png(p.network_util, title=p.label),
                               f"chip utilization {p.label}",
                               f"{p.label}: busy fraction of each rank's HBM and URMA send / receive "
                               "ceiling per time bin (ranks with the busiest URMA on top)."))
    if len(with_util) > MAX_HEATMAPS:
        out.append(f"<p>Link heat maps of {len(with_util) - MAX_HEATMAPS} further points not shown.</p>")
    if plots.has_pipes(pts):
        out.append(_figure(plots.pipe_busy_png(pts), "pipe busy fractions",
                           "Mean busy fraction of each pipe over the makespan, per core kind."))
    if plots.has_roofline(pts):
        out.append(_figure(plots.roofline_png(pts), "roofline position",
                           "x: the TFLOPS at the kernel's roofline bound (flops / roofline_ns); y: achieved "
                           "TFLOPS (flops / makespan_ns). On the diagonal a kernel runs at its bound; its "
                           "distance below is the simulated/bound ratio."))
    if plots.has_layer(pts):
        out.append(_figure(plots.layer_breakdown_png(pts, "MoE layer: where the time goes"),
                           "MoE layer breakdown",
                           "Each run's layer time, split for its straggler (the rank the others wait "
                           "for): compute, communication not hidden behind compute, and the wait for "
                           "slower ranks at the barriers. The three add up to the layer time."))
    strips = [p for p in pts if plots.has_rank_strip(p)]
    for p in strips[:MAX_HEATMAPS]:
        out.append(_figure(plots.rank_strip_png(p, title=p.label), f"per-rank breakdown {p.label}",
                           f"{p.label}: every rank's compute, exposed communication and wait; "
                           f"{p.result.get('straggler_reason', '')}"))
    return (["<h2>Plots</h2>"] + out) if out else []


def render_html(folder: ResultFolder, cases_path=None) -> str:
    """The report page of ``folder`` (see the module docstring)."""
    what = "sweep" if folder.is_sweep else "run"
    title = f"simnode report: {folder.workload} ({folder.kind} {what})"
    parts = [f"<h1>{_esc(title)}</h1>",
             f"<p>Folder <code>{_esc(folder.path)}</code>; {len(folder.points)} "
             f"run{'s' if len(folder.points) != 1 else ''}.</p>"]
    if folder.is_sweep:
        parts.append(_table([("swept field", "name"), ("values", "as given")],
                            [[k, ", ".join(map(str, v))] for k, v in folder.params.items()]))
    by_unit = [p.result.get("busiest_pipe_by_unit", {}) for p in folder.points]
    kinds = sorted({k for b in by_unit for k in b})        # chip runs: "aic", "aiv"; DeepEP: none
    busy = [p.result.get("bottleneck_util_frac") for p in folder.points]
    with_busy = any(u is not None for u in busy)
    busy_cols = [("bottleneck busy", "% of makespan")] if with_busy else []
    bottlenecks = [[p.label, p.result["bottleneck"]]
                   + ([(_num(100 * u, 1) if u is not None else "&ndash;",)] if with_busy else [])
                   + [b.get(k, ("&ndash;",)) for k in kinds]
                   for p, b, u in zip(folder.points, by_unit, busy)]
    parts.append("<h2>Bottleneck of each run</h2>")
    if any(u is not None and u < SATURATED_FRAC for u in busy):
        parts.append(f"<p>A chip run's bottleneck is its busiest pipe or memory. Below "
                     f"{100 * SATURATED_FRAC:.0f}% busy it does not set the time by itself: the run "
                     f"waits on dependencies and latencies (idle_on_flags_frac in its result).</p>")
    parts.append(_table([("run", "name"), ("bottleneck", "resource")] + busy_cols
                        + [(f"busiest {k.upper()} pipe", "pipe") for k in kinds], bottlenecks))
    parts += _tables(folder) + _plots(folder, cases_path)
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


def _corrupted_point(folder: ResultFolder, cases_path) -> Path:
    """The result.json whose point alone fails to render (else the folder itself)."""
    if len(folder.points) > 1:
        for p in folder.points:
            try:
                render_html(ResultFolder(folder.path, folder.is_sweep, folder.params, [p]), cases_path)
            except _CONTENT_ERRORS:
                return (p.dir or folder.path) / "result.json"
            except ConfigError:
                pass
    return folder.path


def write_report(result_dir, out_path=None, cases_path=None) -> Path:
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
        page = render_html(folder, cases_path)
    except _CONTENT_ERRORS as exc:
        where = _corrupted_point(folder, cases_path)
        raise ConfigError(str(where), "", f"<{type(exc).__name__}: {exc}>",
                          f"{LAYOUTS}, with the fields the report reads", CORRUPTED) from None
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(*option, str(out), f"a file the report can be written to ({exc.strerror or exc})") from None
    return out
