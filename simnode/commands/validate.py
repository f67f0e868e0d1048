"""``simnode validate``: run every published case of a validation file and compare.

The cases and their runs are ``simnode.runs.cases`` (``load_cases``, ``run_cases``: a fit
case is shown as ``fit``, never a check); this command chooses them (``--cases``,
``--only``), applies ``--set`` and ``--topology-overlay`` to them and prints the table
(``format_cases``: model, published, error and tolerance per case, then the mean and max
absolute error of the checks) or one JSON object (``cases_json``). It exits 1 if any check
leaves its tolerance.
"""

from __future__ import annotations

from simnode.commands.options import add_jobs, add_only, add_overlays, add_sets, cases_path, overlays_of
from simnode.report.columns import align
from simnode.runs.cases import CaseResult

ORDER = 30


def register(subparsers) -> None:
    val = subparsers.add_parser("validate", help="compare the model with every published figure")
    val.add_argument("--cases", default=None, metavar="FILE",
                     help="validation file (default: validation/published.yaml of this checkout)")
    add_sets(val, "an override applied to every case (e.g. a what-if on the hardware)")
    add_jobs(val)
    add_only(val, "run only cases whose id matches this glob (deepep-*); repeatable")
    val.add_argument("--json", action="store_true",
                     help="print one JSON object (a row per case, then the summary); same exit code")
    add_overlays(val, "a calibration overlay (topologies/calibrated/...) applied to the cases "
                      "on the topology it was fitted on; the cases it was fitted on show as fit, "
                      "not as checks; repeatable")
    val.set_defaults(func=cmd_validate)


def cmd_validate(args) -> int:
    import json

    from simnode.runs.cases import check_overlays_apply, load_cases, run_cases
    from simnode.runs.entries import select
    overlays = list(overlays_of(args))
    cases = select(load_cases(cases_path(args.cases)), args.only)
    check_overlays_apply(overlays, cases)
    rows = run_cases(cases, sets=args.sets, jobs=args.jobs, overlays=overlays)
    print(json.dumps(cases_json(rows), indent=2) if args.json else format_cases(rows))
    return 0 if all(r.ok for r in rows) else 1


def _within(r: CaseResult) -> str:
    return "fit" if r.fit else ("yes" if r.ok else "NO")


def format_cases(rows: list[CaseResult]) -> str:
    """The table of every case, then the checks' mean and max |error| and the fit cases."""
    header = ["case", "metric", "model", "published", "error %", "tolerance %", "within", "source"]
    table = [header] + [[r.case.id, r.case.metric, f"{r.model:.1f}", f"{r.case.published:g}",
                         f"{100 * r.error_frac:+.1f}", f"{100 * r.case.tolerance:.0f}",
                         _within(r), r.case.source] for r in rows]
    lines = [align(table)]
    checks = [r for r in rows if not r.fit]
    fitted = [f"{r.case.id} ({r.fit})" for r in rows if r.fit]
    if checks:
        errs = [abs(r.error_frac) for r in checks]
        lines.append(f"mean |error| {100 * sum(errs) / len(errs):.1f}%, max |error| "
                     f"{100 * max(errs):.1f}%, {sum(r.ok for r in checks)} of {len(checks)} "
                     f"within tolerance")
    else:
        lines.append("no checks: every case shown is a fit")
    if fitted:
        lines.append(f"fit cases, not checks: {'; '.join(fitted)}")
    overlays = sorted({o for r in rows for o in r.overlays})
    if overlays:
        lines.append("with overlays: " + ", ".join(overlays))
    return "\n".join(lines)


def cases_json(rows: list[CaseResult]) -> dict:
    """The table as one JSON object: a row per case (fractions, not %; a fit case's
    ``within`` is null and its ``fit`` says what was fitted on it) and the summary of the
    checks."""
    checks = [r for r in rows if not r.fit]
    errs = [abs(r.error_frac) for r in checks] or [0.0]
    return {
        "cases": [{"id": r.case.id, "metric": r.case.metric, "model": r.model,
                   "published": r.case.published, "error_frac": r.error_frac,
                   "tolerance_frac": r.case.tolerance,
                   "within": None if r.fit else r.ok, "source": r.case.source,
                   "topology": r.case.topology, "workload": r.case.workload,
                   "set": list(r.case.sets), "fit": r.fit or None, "overlays": list(r.overlays)}
                  for r in rows],
        "mean_abs_error_frac": sum(errs) / len(errs),
        "max_abs_error_frac": max(errs),
        "within": sum(r.ok for r in checks),
        "total": len(checks),
        "fit_cases": len(rows) - len(checks),
    }
