"""``simnode calibrate TOPOLOGY CASES --fit KEY=LO:HI [--fit ...] [-o OVERLAY.yaml]``: fit
free parameters of a topology (or workload fields) to measured cases, and record the fit.

CASES is a file in the format of validation/published.yaml (a workload, ``set:``
overrides, a metric, a measured value, a tolerance); ``--only PATTERN`` picks its cases
(each must run on TOPOLOGY). Every ``--fit`` names a ``--set`` key and its bounds;
``--start KEY=VALUE`` moves where its search starts (a local minimum near the default start
can hold a fit: the start is recorded in the overlay). The fit minimizes the sum of squared relative errors inside the bounds, then finds each
value's profile interval (``simnode.calibrate.solver``); points run in parallel
(``--jobs``). It prints the fitted values, their intervals and every case's residual, and
with ``-o`` writes an overlay (``simnode.config.overlay``) recording the values, the
cases, the residuals, the intervals, the date and the simnode version. ``--set`` and
``--topology-overlay`` apply to every case during the fit (and are recorded); a TOPOLOGY
that names overlays (``base:``/``overlay:``, ``simnode.config.overlay``) is its base with
those overlays beneath the fit, recorded the same way. The overlay is written whole or not
at all (Ctrl-C or SIGTERM leave no part of one). The same
inputs give the same overlay, byte for byte (``--date`` or SOURCE_DATE_EPOCH fixes the date).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
from pathlib import Path

from simnode.commands import jobs_count
from simnode.errors import ConfigError

ORDER = 35
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def register(subparsers) -> None:
    p = subparsers.add_parser("calibrate", help="fit free parameters to measured cases and "
                              "write an overlay that records the fit")
    p.add_argument("topology", help="topology YAML the values belong to (topologies/...)")
    p.add_argument("cases", help="measured cases, in the format of validation/published.yaml")
    p.add_argument("--fit", dest="fits", action="append", default=[], metavar="KEY=LO:HI",
                   help="a free value and its bounds, as a --set key (topology.supernode."
                        "urma_wqe_ns_per_peer=0:0.5); repeatable")
    p.add_argument("--start", dest="starts", action="append", default=[], metavar="KEY=VALUE",
                   help="where the fit of a --fit key starts (default: the value the cases run "
                        "with, clipped into the bounds); recorded in the overlay; repeatable")
    p.add_argument("-o", "--output", metavar="OVERLAY.yaml", default=None,
                   help="write the overlay here (topologies/calibrated/...)")
    p.add_argument("--only", action="append", default=[], metavar="PATTERN",
                   help="fit on the cases whose id matches this glob (deepep-ep8-*); repeatable")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="an override for every case during the fit (recorded); repeatable")
    p.add_argument("--topology-overlay", dest="overlays", action="append", default=[],
                   metavar="FILE", help="an overlay applied beneath the fit (recorded); repeatable")
    p.add_argument("--jobs", type=jobs_count, default=0, help="worker processes (0 = one per core)")
    p.add_argument("--no-profile", action="store_true",
                   help="skip the profile intervals (the fit alone: fewer runs)")
    p.add_argument("--note", default="", help="what the fitted values stand for (kept in the overlay)")
    p.add_argument("--date", default=None, metavar="YYYY-MM-DD",
                   help="the date recorded (default: SOURCE_DATE_EPOCH if set, else today, UTC)")
    p.add_argument("--json", action="store_true", help="print the fit as one JSON object")
    p.add_argument("--verbose", action="store_true",
                   help="print every evaluated point and its errors on stderr (long fits)")
    p.set_defaults(func=cmd_calibrate)


def _starts(specs: list, free: list) -> dict:
    """``--start KEY=VALUE`` -> {key: value}: each a key of a --fit, once, a finite number
    within its bounds (a whole number for an integer key)."""
    from simnode.config.overrides import parse_assignment
    bounds = {p.key: p for p in free}
    out = {}
    for spec in specs:
        key, value = parse_assignment(spec, "--start")
        raw = spec.partition("=")[2].strip()
        p = bounds.get(key)
        if p is None:
            raise ConfigError("--start", key, raw, "a key fitted with --fit (fitted: "
                              + ", ".join(sorted(bounds)) + ")")
        if key in out:
            raise ConfigError("--start", key, raw, "each key once")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not p.lo <= value <= p.hi:
            raise ConfigError("--start", key, raw, f"a number within the --fit bounds {p.lo:g}..{p.hi:g}")
        if p.integer and not float(value).is_integer():
            raise ConfigError("--start", key, raw, "a whole number: the key takes integers")
        out[key] = value
    return out


def _date(option: str | None) -> str:
    if option is not None:
        if not _DATE.fullmatch(option):
            raise ConfigError("--date", "date", option, "a date YYYY-MM-DD")
        try:
            datetime.date.fromisoformat(option)
        except ValueError:
            raise ConfigError("--date", "date", option, "a calendar date YYYY-MM-DD") from None
        return option
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None:
        try:
            stamp = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc)
        except (ValueError, OverflowError, OSError):
            raise ConfigError("SOURCE_DATE_EPOCH", "SOURCE_DATE_EPOCH", epoch,
                              "seconds since 1970-01-01 (an integer)") from None
        return stamp.date().isoformat()
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def _as_written(path) -> str:
    """A path as an overlay records it: relative to the repository root when inside it."""
    from simnode.commands.validate import REPO_ROOT
    p = Path(path).resolve()
    try:
        return str(p.relative_to(REPO_ROOT))
    except ValueError:
        return str(p)


def _write_whole(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all: beside it first, then renamed over it, so a
    Ctrl-C or SIGTERM in the write leaves no half an overlay (and an older one intact)."""
    part = path.parent / f".{path.name}.simnode-{os.getpid()}"
    try:
        part.write_text(text, encoding="utf-8")
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


def cmd_calibrate(args) -> int:
    from simnode import __version__
    from simnode.calibrate.cases import Problem, calibration_cases, free_params
    from simnode.calibrate.report import fit_record, format_fit
    from simnode.calibrate.solver import fit
    from simnode.commands.run import check_output_path, overlays_of
    from simnode.commands.validate import cases_path, load_cases
    from simnode.config.overlay import dump_overlay
    from simnode.config.overrides import parse_assignment
    from simnode.workloads.loader import check_overlays, with_named_overlays

    date = _date(args.date)
    if args.output is not None:
        check_output_path(args.output, "--output")
    if not str(args.topology).strip() or not Path(args.topology).is_file():
        raise ConfigError("the TOPOLOGY argument", "", str(args.topology), "an existing topology YAML file")
    for s in args.sets:
        parse_assignment(s)
    # a topology file that names overlays: its base is calibrated, its overlays beneath the fit
    topology, overlays = with_named_overlays(args.topology, overlays_of(args))
    cases = calibration_cases(topology, load_cases(cases_path(args.cases)), args.only)
    check_overlays(overlays, topology)
    problem = Problem(topology, cases, sets=tuple(args.sets), user_sets=tuple(args.sets),
                      overlays=overlays, jobs=args.jobs, verbose=args.verbose)
    for c in cases:
        problem.load(c)                      # every case loads with the overlays, before any run
    problem.free = free_params(problem, args.fits)
    chosen = _starts(args.starts, problem.free)
    start = []
    for p in problem.free:
        v = chosen[p.key] if p.key in chosen else problem.current(p.key)
        start.append(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                     else (p.lo + p.hi) / 2)
    result = fit(problem.free, start, problem.evaluate, problem.tolerances,
                 profile=not args.no_profile)
    record = fit_record(problem, result, _as_written(args.cases), date, __version__,
                        [_as_written(o.path) for o in overlays])
    values = {p.key: (int(v) if p.integer else float(v)) for p, v in zip(result.free, result.best.values)}
    if args.json:
        print(json.dumps({"topology": _as_written(topology), "values": values, "fit": record},
                         indent=2))
    else:
        print(format_fit(problem, result))
    if args.output is not None:
        text = dump_overlay(_as_written(topology), values, record, args.note)
        _write_whole(Path(args.output), text)
        if not args.json:
            print(f"wrote {args.output}")
    return 0
