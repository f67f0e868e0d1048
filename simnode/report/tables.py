"""The report's tables as HTML, grouped and folded: a ``<details>`` per group (the run, then
each kernel) with a plain ``<summary>`` heading the reader opens.

Drawn from the typed results (``simnode.report.result``), never from a kind's name:

- ``run_group(points)``: the run's time, roofline bound, bottleneck and header figures.
- ``kernel_group(points, kernel)``: one kernel's time, bound, time / bound, bottleneck and
  figures.

In both, a scalar figure is a row (its unit in the row's heading, fractions as %), a run a
column, and the figure's doc is said once, in the row's last cell; a text the same in every
run spans the runs' columns once. A mapping figure (a kernel's phases, busy shares) is a
table of its own, a row per key; a list of records (hottest links) a row per record, at most
``RECORD_ROWS`` per run.
"""

from __future__ import annotations

import html

from simnode import units
from simnode.config.params import unit_of
from simnode.report.result import Figure

#: records of a list figure shown per run (a per-rank list at EP128 would be 128)
RECORD_ROWS = 16


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def scalar(value) -> bool:
    return isinstance(value, (int, float, str, bool))


def fmt(value, unit: str = "") -> str:
    """A value as a cell shows it: fractions as percent, counts and bytes whole, rates with
    one decimal, ratios with three; ``&ndash;`` for a value that is not a number or text."""
    if isinstance(value, (bool, str)):
        return esc(value)
    if not isinstance(value, (int, float)):
        return "&ndash;"
    if unit == "fraction":
        return f"{100 * value:,.1f}"
    if isinstance(value, int) or unit == "B":
        return f"{value:,.0f}"
    if unit in ("GB/s", "TFLOPS", "ns") or abs(value) >= 1e4:
        return f"{value:,.1f}"
    return f"{value:,.3f}"


def shown_unit(unit: str) -> str:
    return "%" if unit == "fraction" else unit


def heading(name: str, unit: str) -> str:
    """``GBps (GB/s)``: a name with its unit as shown (none for text and bare counts)."""
    u = shown_unit(unit)
    return esc(f"{name} ({u})" if u else name)


def _columns(points) -> list[str]:
    return [p.label if p.point else "value" for p in points]


def _table(head: list[str], rows: list[str]) -> str:
    cells = "".join(f"<th>{h}</th>" for h in head)
    return f'<div class="scroll"><table><thead><tr>{cells}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _figure_rows(points, figures_of) -> list[str]:
    """A row per scalar figure of ``figures_of(point)``, a cell per point (module docstring)."""
    found: dict = {}
    for p in points:
        for f in figures_of(p):
            if scalar(f.value) and f.name not in found:
                found[f.name] = f
    rows = []
    for name, first in found.items():
        values = [next((f for f in figures_of(p) if f.name == name), None) for p in points]
        texts = [f.value for f in values if f is not None and isinstance(f.value, str)]
        row = f'<th scope="row">{heading(name, "" if texts else first.unit)}</th>'
        if len(points) > 1 and len(texts) == len(points) and len(set(texts)) == 1:
            row += f'<td class="text" colspan="{len(points)}">{esc(texts[0])}</td>'
        else:
            row += "".join("<td>&ndash;</td>" if f is None
                           else f'<td class="text">{esc(f.value)}</td>' if isinstance(f.value, (str, bool))
                           else f"<td>{fmt(f.value, f.unit)}</td>" for f in values)
        rows.append(f'<tr>{row}<td class="doc">{esc(first.doc)}</td></tr>')
    return rows


def figure_table(points, figures_of) -> str:
    """The scalar figures ``figures_of(point)`` gives, a row each, a column per point."""
    rows = _figure_rows(points, figures_of)
    return _table(["figure"] + [esc(c) for c in _columns(points)] + ["what it is"], rows) if rows else ""


def _flat_mapping(value: dict) -> dict:
    flat = {}
    for key, v in value.items():
        if isinstance(v, dict):
            flat.update({f"{key} / {sub}": x for sub, x in v.items()})
        else:
            flat[key] = v
    return flat


def mapping_table(points, name: str, figures_of, owner: str = "") -> str:
    """A mapping figure ``name``: a row per key (nested keys ``a / b``), a column per point;
    captioned ``owner: name (unit): doc`` (``owner``: the kernel's name, or "run")."""
    values, first = [], None
    for p in points:
        f = next((f for f in figures_of(p) if f.name == name), None)
        if f is not None and isinstance(f.value, dict) and f.value:
            values.append((p, _flat_mapping(f.value)))
            first = first or f
    if first is None:
        return ""
    keys = list(dict.fromkeys(k for _, flat in values for k in flat))
    rows = []
    for key in keys:
        cells = "".join("<td>&ndash;</td>" if key not in flat
                        else f'<td class="text">{esc(flat[key])}</td>' if isinstance(flat[key], (str, bool))
                        else f"<td>{fmt(flat[key], first.unit)}</td>" for _, flat in values)
        rows.append(f'<tr><th scope="row">{esc(key)}</th>{cells}</tr>')
    caption = _caption(owner, heading(name, first.unit), first.doc)
    return caption + _table([heading(name, first.unit)] + [esc(c) for c in _columns([p for p, _ in values])], rows)


def records_table(points, name: str, figures_of, owner: str = "") -> str:
    """A list-of-records figure ``name``: a row per record, a column per record field (its
    unit read off its name), at most ``RECORD_ROWS`` records per point; captioned as
    ``mapping_table``'s."""
    per_point, fields, first = [], {}, None
    for p in points:
        f = next((f for f in figures_of(p) if f.name == name), None)
        if f is None or not isinstance(f.value, list):
            continue
        recs = [r for r in f.value if isinstance(r, dict)]
        for rec in recs:
            for key, v in rec.items():
                fields.setdefault(key, "text" if isinstance(v, str) else unit_of(f"_{key}") or "")
        if recs:
            per_point.append((p, recs))
            first = first or f
    if first is None:
        return ""
    sweep = any(p.point for p, _ in per_point)
    head = (["run"] if sweep else []) + [heading(k, "" if u == "text" else u) for k, u in fields.items()]
    rows = []
    for p, recs in per_point:
        run = f'<td class="text">{esc(p.label)}</td>' if sweep else ""
        for rec in recs[:RECORD_ROWS]:
            cells = "".join("<td>&ndash;</td>" if k not in rec
                            else f'<td class="text">{esc(rec[k])}</td>' if isinstance(rec[k], (str, bool))
                            else f"<td>{fmt(rec[k], u)}</td>" for k, u in fields.items())
            rows.append(f"<tr>{run}{cells}</tr>")
        if len(recs) > RECORD_ROWS:
            where = f"{p.dir.name}/result.json" if p.dir is not None and p.point else "result.json"
            rows.append(f'<tr>{run}<td class="text" colspan="{len(fields)}">and {len(recs) - RECORD_ROWS} '
                        f"more records in {esc(where)}</td></tr>")
    caption = _caption(owner, esc(name), first.doc)
    return caption + _table(head, rows)


def _group(summary: str, what: str, parts: list[str]) -> str:
    body = "".join(part for part in parts if part)
    return (f'<details><summary>{esc(summary)} <span class="what">{esc(what)}</span></summary>'
            f"{body}</details>")


def _caption(owner: str, name: str, doc: str) -> str:
    return f"<h4>{esc(owner) + ': ' if owner else ''}{name}{': ' + esc(doc) if doc else ''}</h4>"


def _sub_tables(points, figures_of, owner: str) -> tuple[list[str], list[str]]:
    """The tables of the mapping and record figures, and their names."""
    names = list(dict.fromkeys(f.name for p in points for f in figures_of(p) if not scalar(f.value)))
    tables = [mapping_table(points, n, figures_of, owner) or records_table(points, n, figures_of, owner)
              for n in names]
    return tables, [n for n, t in zip(names, tables) if t]


def _described(what: str, n_figures: int, names: list[str]) -> str:
    """``time, bound, bottleneck, 11 figures; phases_us, hottest_links``."""
    if n_figures:
        what += f", {n_figures} figure{'s' if n_figures != 1 else ''}"
    return what + (f"; {', '.join(names)}" if names else "")


def run_group(points) -> str:
    """The run-level table (module docstring), folded."""
    def figures_of(p):
        r = p.result
        first = [Figure("time", units.ns_to_us(r.makespan_ns), "us", "the run's makespan")]
        if r.roofline_ns:
            first += [Figure("roofline bound", units.ns_to_us(r.roofline_ns), "us", "the run's analytical lower bound"),
                      Figure("time / bound", r.makespan_ns / r.roofline_ns, "ratio", "")]
        first.append(Figure("bottleneck", r.bottleneck, "", "the run's busiest resource"))
        if r.bottleneck_util_frac is not None:
            first.append(Figure("bottleneck busy", r.bottleneck_util_frac, "fraction", "its busy share of the run"))
        return first + list(r.figures)
    tables, names = _sub_tables(points, figures_of, "run")
    n = sum(1 for f in {f.name: f for p in points for f in p.result.figures}.values() if scalar(f.value))
    return _group("Run", _described("time, bound, bottleneck", n, names),
                  [figure_table(points, figures_of)] + tables)


def kernel_group(points, kernel: str) -> str:
    """One kernel's table (module docstring), folded."""
    def figures_of(p):
        k = p.result.kernel(kernel)
        if k is None:
            return []
        first = [Figure("time", units.ns_to_us(k.time_ns), "us", "the kernel's time")]
        if k.bound_ns:
            first += [Figure("bound", units.ns_to_us(k.bound_ns), "us", "its analytical lower bound"),
                      Figure("simulated / bound", k.sim_over_bound, "ratio", "")]
        if k.bottleneck:
            first.append(Figure("bottleneck", k.bottleneck, "", "its busiest resource"))
        if k.bottleneck_util_frac is not None:
            first.append(Figure("bottleneck busy", k.bottleneck_util_frac, "fraction", "its busy share of the kernel"))
        return first + list(k.figures)
    tables, names = _sub_tables(points, figures_of, kernel)
    n = len({f.name for p in points if p.result.kernel(kernel) for f in p.result.kernel(kernel).figures
             if scalar(f.value)})
    return _group(f"Kernel {kernel}", _described("time against its bound, bottleneck", n, names),
                  [figure_table(points, figures_of)] + tables)
