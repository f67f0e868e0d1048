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
import os
import re
from pathlib import Path

from simnode.commands.options import (add_jobs, add_list, add_only, add_overlays, add_sets, cases_path,
                                      check_output_path, overlays_of)
from simnode.errors import ConfigError

ORDER = 35
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def register(subparsers) -> None:
    p = subparsers.add_parser("calibrate", help="fit free parameters to measured cases and "
                              "write an overlay that records the fit")
    p.add_argument("topology", help="topology YAML the values belong to (topologies/...)")
    p.add_argument("cases", help="measured cases, in the format of validation/published.yaml")
    add_list(p, "--fit", "KEY=LO:HI", "a free value and its bounds, as a --set key (topology."
             "supernode.urma_wqe_ns_per_peer=0:0.5); repeatable", dest="fits")
    add_list(p, "--start", "KEY=VALUE", "where the fit of a --fit key starts (default: the value "
             "the cases run with, clipped into the bounds); recorded in the overlay; repeatable",
             dest="starts")
    p.add_argument("-o", "--output", metavar="OVERLAY.yaml", default=None,
                   help="write the overlay here (topologies/calibrated/...)")
    add_only(p, "fit on the cases whose id matches this glob (deepep-ep8-*); repeatable")
    add_sets(p, "an override for every case during the fit (recorded); repeatable")
    add_overlays(p, "an overlay applied beneath the fit (recorded); repeatable")
    add_jobs(p)
    p.add_argument("--no-profile", action="store_true",
                   help="skip the profile intervals (the fit alone: fewer runs)")
    p.add_argument("--note", default="", help="what the fitted values stand for (kept in the overlay)")
    p.add_argument("--date", default=None, metavar="YYYY-MM-DD",
                   help="the date recorded (default: SOURCE_DATE_EPOCH if set, else today, UTC)")
    p.add_argument("--json", action="store_true", help="print the fit as one JSON object")
    p.add_argument("--verbose", action="store_true",
                   help="print every evaluated point and its errors on stderr (long fits)")
    p.set_defaults(func=cmd_calibrate)


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
    from simnode.runs.cases import REPO_ROOT
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
    from simnode.calibrate.cases import prepare
    from simnode.calibrate.report import fit_record, format_fit
    from simnode.calibrate.solver import fit
    from simnode.config.overlay import dump_overlay
    from simnode.config.overrides import parse_assignment

    date = _date(args.date)
    if args.output is not None:
        check_output_path(args.output, "--output")
    if not str(args.topology).strip() or not Path(args.topology).is_file():
        raise ConfigError("the TOPOLOGY argument", "", str(args.topology), "an existing topology YAML file")
    for s in args.sets:
        parse_assignment(s)
    overlays = overlays_of(args)
    problem, start = prepare(args.topology, cases_path(args.cases), patterns=args.only, fits=args.fits,
                             starts=args.starts, sets=tuple(args.sets), overlays=overlays,
                             jobs=args.jobs, verbose=args.verbose)
    result = fit(problem.free, start, problem.evaluate, problem.tolerances,
                 profile=not args.no_profile)
    record = fit_record(problem, result, _as_written(args.cases), date, __version__,
                        [_as_written(o.path) for o in problem.overlays])
    values = {p.key: (int(v) if p.integer else float(v)) for p, v in zip(result.free, result.best.values)}
    if args.json:
        print(json.dumps({"topology": _as_written(problem.topology), "values": values, "fit": record},
                         indent=2))
    else:
        print(format_fit(problem, result))
    if args.output is not None:
        text = dump_overlay(_as_written(problem.topology), values, record, args.note)
        _write_whole(Path(args.output), text)
        if not args.json:
            print(f"wrote {args.output}")
    return 0
