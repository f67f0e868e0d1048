"""``simnode describe TOPOLOGY [WORKLOAD] [--set KEY=VALUE ...] [--json] [--comments]``:
every parameter a run reads, with its value, unit, allowed range, where the value was set
(``FILE:LINE``, ``--set``, a calibration overlay or the declared default), where it comes
from (sourced, reasoned, calibrated or a setting, with the source ids its comment cites)
and its doc. ``--topology-overlay FILE`` applies a calibration overlay
(``simnode.config.overlay``): each value it sets shows as set in the overlay and as
"calibrated on CASES (overlay FILE, DATE)", the cases ``simnode calibrate`` fitted it on; a
value a case of validation/published.yaml records as fitted on it (``fit:``) shows as
"calibrated on CASE (FILE, fit: WHY)" while the run uses that value.

Everything but the value and its comment comes from the parameter's declaration
(``simnode.config.params``); the comment is the one the file gives the key
(``simnode.config.comments``). ``--json`` prints one object: a row per parameter with
the declaration's fields and the whole comment. ``--comments`` prints each comment below
its row.
"""

from __future__ import annotations

ORDER = 50

import json
from pathlib import Path

from simnode.commands.options import add_overlays, add_sets, overlays_of
from simnode.config import comments as notes
from simnode.config import params as declarations
from simnode.report.columns import align

SECTIONS = ("chip", "supernode")


def register(subparsers) -> None:
    p = subparsers.add_parser("describe", help="list every parameter a run reads: value, unit, "
                              "range, where it was set, its source and doc")
    p.add_argument("topology", help="topology YAML (topologies/...)")
    p.add_argument("workload", nargs="?", default=None, help="workload YAML (workloads/...)")
    add_sets(p, "an override, as for `simnode run` (shown as set by --set)")
    add_overlays(p, "a calibration overlay applied first (its values show as calibrated); repeatable")
    p.add_argument("--json", action="store_true", help="print one JSON object, a row per parameter")
    p.add_argument("--comments", action="store_true", help="print each value's file comment below its row")
    p.set_defaults(func=cmd_describe)


def _get(tree: dict, dotted: str):
    node = tree
    for part in dotted.split("."):
        node = node[part]
    return node


def describe_rows(topology_path, workload_path=None, sets=(), overlays=()) -> list[dict]:
    """One record per parameter the run reads (see the module docstring); ``overlays``:
    ``Overlay`` records applied before ``sets``."""
    from simnode.workloads.loader import load_inputs, load_topology_only, with_named_overlays
    if workload_path is None:
        topology, origins = load_topology_only(topology_path, sets, overlays)
        fields, values = (), {}
        overlays = with_named_overlays(topology_path, overlays)[1]   # to name their cases
    else:
        spec = load_inputs(topology_path, workload_path, sets, overlays=overlays)
        topology, origins, values = spec.topology, spec.origins, spec.params
        fields = spec.kind.all_fields(values, spec.workload_source)
        overlays = spec.overlays
    files: dict = {}

    def noted(path: str):
        if path not in files:
            files[path] = notes.annotate(path) if Path(path).is_file() else notes.FileNotes(path)
        return files[path]

    rows = []
    for section in SECTIONS:
        spec_obj = getattr(topology, section)
        if spec_obj is None:
            continue
        tree = declarations.resolved(spec_obj)
        for key, p in declarations.walk(type(spec_obj), section + "."):
            rows.append(_row(key, _get(tree, key[len(section) + 1:]), p, origins.get(key, ""), key, noted,
                             overlays))
    for p in fields:
        rows.append(_row(p.name, values[p.name], p, origins.get(f"workload.{p.name}", ""), p.name, noted,
                         overlays))
    return _fitted_on_cases(rows)


def _fitted_on_cases(rows: list[dict]) -> list[dict]:
    """A value a case of the shipped validation file records as fitted on it (``fit:``),
    while the run uses that value, says so: "calibrated on CASE (FILE, fit: WHY)"."""
    from simnode.runs.cases import DEFAULT_CASES, load_cases
    from simnode.runs.provenance import calibrated_by
    if not DEFAULT_CASES.is_file():
        return rows
    cases = [c for c in load_cases(DEFAULT_CASES) if c.fit_pairs]
    for r in rows:
        if r["set_in"].startswith("overlay "):
            continue
        key = ("topology." + r["parameter"] if r["parameter"].startswith(SECTIONS)
               else r["parameter"])
        where = calibrated_by(key, r["value"], cases)
        if where:
            r["origin"] = where.replace(str(DEFAULT_CASES.parent.parent) + "/", "")
    return rows


def _row(key: str, value, p: declarations.Param, set_in: str, file_key: str, noted, overlays=()) -> dict:
    from simnode.workloads.loader import FROM_OVERLAY
    if set_in.startswith(FROM_OVERLAY):
        # a fitted value: where it was fitted, never the topology file's comment on its default
        path = set_in[len(FROM_OVERLAY):]
        found = next((o for o in overlays if o.path == path), None)
        return {"parameter": key, "value": list(value) if isinstance(value, tuple) else value,
                **p.describe(), "origin": found.describe() if found else "calibrated",
                "cites": [], "set_in": set_in,
                "comment": found.note if found else ""}
    comment = ""
    where = set_in
    if set_in not in ("", "--set", "default"):
        file_notes = noted(set_in)
        comment = file_notes.comment(file_key)
        where = file_notes.where(file_key)
    # a setting is what the user asks for; a hardware value's origin is what its file says
    origin = p.origin or notes.origin_of(comment) or ("declared default" if set_in == "default"
                                                      else "unstated")
    return {"parameter": key, "value": list(value) if isinstance(value, tuple) else value,
            **p.describe(), "origin": origin, "cites": notes.cites(comment), "set_in": where,
            "comment": comment}


def _show(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value) if value != "" else "''"


def format_rows(rows: list[dict], with_comments: bool = False) -> str:
    """The table: parameter, value, unit, range, set in, source (origin and cited ids), doc."""
    header = ["parameter", "value", "unit", "range", "set in", "source", "doc"]
    table = [header]
    for r in rows:
        source = r["origin"] + (": " + ", ".join(r["cites"]) if r["cites"] else "")
        table.append([r["parameter"], _show(r["value"]), r["unit"] or "-", r["range"] or "-",
                      r["set_in"], source, r["doc"]])
    text = align(table)
    if not with_comments:
        return text
    lines = text.splitlines()
    out = [lines[0]]
    for line, r in zip(lines[1:], rows):
        out.append(line)
        if r["comment"]:
            out.append(f"    # {r['comment']}")
    return "\n".join(out)


def cmd_describe(args) -> int:
    overlays = overlays_of(args)
    rows = describe_rows(args.topology, args.workload, args.sets, overlays)
    if args.json:
        print(json.dumps({"topology": args.topology, "workload": args.workload, "sets": args.sets,
                          "parameters": rows}, indent=2))
    else:
        print(format_rows(rows, args.comments))
    return 0
