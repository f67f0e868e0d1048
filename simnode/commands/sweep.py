"""Parameter sweeps: the cartesian grid of ``--param FIELD=V1,V2,...``, run by the executor.

``parse_params(["num_ranks=8,16"])`` -> {"num_ranks": [8, 16]}; ``grid(params)`` ->
the list of points (dicts, in the order the values were given, last field fastest);
``run_sweep(topology, workload, params, sets, jobs, executor=, address=)`` parses every
point into a ``RunSpec`` first (a bad value fails before any run, exit 2), then runs
them with ``simnode.runs.executor.execute`` (local worker processes or Dask) and
returns ``[(point, RunSpec, Result)]`` in grid order. Field names are those of ``--set``
(workload fields, or ``topology.``-prefixed topology fields). ``format_sweep`` prints the
table from what each kind declares as its headline figures, whatever the kind.

``--topology-overlay FILE`` applies a calibration overlay (``simnode.config.overlay``) to
every point. ``--band A.yaml,B.yaml,...`` runs every point under each overlay (all in
one executor call): each run's point gains the field ``overlay`` (the overlay's file
stem), and per point and headline figure the band is the overlays' lowest and highest
value (``simnode.calibrate.band``): printed as a table with each overlay's value, added
to every row of results.csv and results.json as ``<figure>_lo`` and ``<figure>_hi``, and
recorded in sweep.json (``band``), so the report draws it around the overlays' lines.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from simnode.commands.options import add_inputs, add_jobs, overlays_of
from simnode.config.overrides import assignment_text, parse_assignment
from simnode.errors import ConfigError
from simnode.report.columns import align
from simnode.report.result import RATIO_UNITS
from simnode.runs.executor import check_executor, execute
from simnode.units import ns_to_us


ORDER = 20


def register(subparsers) -> None:
    sweep = subparsers.add_parser("sweep", help="run a grid of --param values in parallel")
    add_inputs(sweep)
    sweep.add_argument("--param", dest="params", action="append", default=[],
                       metavar="FIELD=V1,V2,...", help="a swept field (as --set); repeatable: "
                       "the grid is their cartesian product")
    add_jobs(sweep)
    sweep.add_argument("--json", action="store_true", help="print a JSON list of result objects")
    sweep.add_argument("--out", metavar="DIR", help="write sweep.json, results.csv, points/ "
                       "(simnode.commands.outdir)")
    sweep.add_argument("--executor", default="local", help="local (worker processes) or dask")
    sweep.add_argument("--address", metavar="HOST:PORT", help="dask scheduler (default: a local cluster)")
    sweep.add_argument("--progress", action="store_true",
                       help="draw the progress bar on stderr even when it is not a terminal")
    sweep.add_argument("--band", default=None, metavar="A.yaml,B.yaml,...",
                       help="run every point under each of these overlays (two or more) and report, "
                       "per figure, the lowest, the highest and each overlay's value")
    sweep.set_defaults(func=cmd_sweep)


def cmd_sweep(args) -> int:
    import json
    import sys

    from simnode.calibrate.band import BAND_FIELD, band_extra, format_band, parse_band
    from simnode.commands.outdir import check_out_dir, write_sweep
    params = parse_params(args.params)
    overlays = overlays_of(args)
    band = parse_band(args.band, params) if args.band is not None else {}
    if args.out is not None:
        check_out_dir(args.out, "sweep")
    rows = run_sweep(args.topology, args.workload, params, args.sets, args.jobs,
                     executor=args.executor, address=args.address,
                     progress=True if args.progress else None,
                     announce=lambda note: print(f"simnode: note: {note}", file=sys.stderr),
                     overlays=overlays, band=band)
    extra = band_extra(rows, list(band)) if band else None
    if args.out is not None:
        swept = {**params, BAND_FIELD: list(band)} if band else params
        write_sweep(args.out, rows, swept, args.topology, args.workload, args.sets, extra=extra,
                    band={label: o.path for label, o in band.items()} if band else None,
                    overlays=[o.path for o in overlays])
    if args.json:
        print(json.dumps([{"point": p, **r.to_dict(), **(extra[i] if extra else {})}
                          for i, (p, _, r) in enumerate(rows)], indent=2))
    elif band:
        print(format_band(rows, list(band)))
    else:
        print(format_sweep(rows))
    return 0


def parse_params(specs: list[str]) -> dict[str, list]:
    out: dict[str, list] = {}
    for spec in specs:
        key, raw = parse_assignment(spec, "--param")
        text = str(raw) if not isinstance(raw, list) else ",".join(map(str, raw))
        items = [v.strip() for v in text.split(",")]
        if not any(items):
            raise ConfigError("--param", key, raw, "a comma-separated list of one or more values")
        if "" in items:
            raise ConfigError("--param", key, raw, f"a comma-separated list without empty items "
                              f"(item {items.index('') + 1} of {len(items)} is empty)")
        values = [parse_assignment(f"{key}={v}", "--param")[1] for v in items]
        if len(set(map(repr, values))) < len(values):
            raise ConfigError("--param", key, raw, "distinct values (a point would run twice)")
        if key in out:
            raise ConfigError("--param", key, raw, "each field at most once")
        out[key] = values
    if not out:
        raise ConfigError("--param", "", "<none>", "at least one --param FIELD=V1,V2,...")
    return out


def grid(params: dict[str, list]) -> list[dict]:
    keys = list(params)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(params[k] for k in keys))]


def run_sweep(topology: str, workload: str, params: dict[str, list], sets: list[str],
              jobs: int = 0, executor: str = "local", address: str | None = None,
              progress: bool | None = None, announce=None, overlays=(), band=None) -> list:
    """Run every point of ``grid(params)``; ``progress`` None = a bar only on a terminal;
    ``announce(note)`` is told, before anything runs, of the longest point when it is far
    above its kind's reference run. ``overlays`` apply to every point; ``band`` ({label:
    Overlay}) runs every point under each (after ``overlays``), the label as the point's
    ``overlay`` field."""
    from simnode.calibrate.band import BAND_FIELD
    from simnode.workloads.loader import check_overlays, load_inputs
    check_executor(executor, address)
    grid_points = grid(params)
    topology, workload = str(Path(topology).resolve()), str(Path(workload).resolve())
    check_overlays(tuple(overlays) + tuple((band or {}).values()), topology)
    if sets or overlays:
        load_inputs(topology, workload, list(sets), overlays=overlays)   # a bad --set is named as such
    variants = [({BAND_FIELD: label}, tuple(overlays) + (o,)) for label, o in band.items()] if band \
        else [({}, tuple(overlays))]
    points, specs = [], []
    for point in grid_points:
        point_sets = list(sets) + [assignment_text(k, v) for k, v in point.items()]
        for tag, ovs in variants:
            try:
                specs.append(load_inputs(topology, workload, point_sets, overlays=ovs))   # parsed once, here
                points.append({**point, **tag})
            except ConfigError as exc:
                if not exc.source.startswith("--set"):
                    raise
                # the --set values passed alone, so the grid point is at fault: name --param
                raise ConfigError("--param", exc.key_path, exc.value, exc.expected, exc.hint) from None
    if announce is not None:
        long = [(p, s) for p, s in zip(points, specs) if s.cost_note()]
        if long:
            point, spec = max(long, key=lambda ps: ps[1].estimated_s())
            where = ", ".join(f"{k}={v}" for k, v in point.items())
            announce(f"{len(long)} of {len(points)} points are long; the longest ({where}): {spec.cost_note()}")
    results = execute(specs, jobs, executor, address, progress=progress, title="sweep")
    return [(p, s, r) for p, s, r in zip(points, specs, results)]


def format_sweep(rows: list) -> str:
    """A table: the swept fields, makespan, each kind's headline figures, bottleneck."""
    if not rows:
        return "(no points)"
    keys = list(rows[0][0])
    columns = list(dict.fromkeys(c for _, _, r in rows for c in r.headline_columns()))
    header = keys + ["makespan_us"] + [name for name, _ in columns] + ["bottleneck"]
    table = [header]
    for point, _, r in rows:
        flat = r.details
        line = [str(point[k]) for k in keys] + [f"{ns_to_us(r.makespan_ns):.2f}"]
        for name, unit in columns:
            v = flat.get(name)
            line.append("-" if v is None else f"{v:.3f}" if unit in RATIO_UNITS else f"{v:.1f}")
        line.append(r.bottleneck)
        table.append(line)
    return align(table)
