"""The printed result of ``simnode calibrate`` and the ``fit:`` record of its overlay.

``format_fit(problem, fit)``: the fitted values with their profile intervals (and how much
of the bounds each interval covers: a parameter the cases pin down has a narrow one), then
every case's model, measured value and residual. ``fit_record(problem, fit, ...)``: the
overlay's ``fit:`` mapping (cases, bounds, start, residuals, intervals, runs, date, version).
"""

from __future__ import annotations

from simnode.calibrate.solver import worst
from simnode.report.columns import align

OBJECTIVE = "least squares of the relative errors (model - measured) / measured, within the bounds"


def _num(x: float) -> str:
    return f"{x:.6g}"


def interval_text(p, interval, at_bound) -> str:
    """``LO .. HI (x% of the bounds)``, ``<`` / ``>`` where an end is a bound."""
    if interval is None:
        return "none: no value keeps every case within its tolerance"
    lo, hi = interval
    share = (hi - lo) / p.span if p.span else 1.0
    left = _num(lo) + (" (bound)" if at_bound[0] else "")
    right = _num(hi) + (" (bound)" if at_bound[1] else "")
    verdict = "not pinned by these cases" if at_bound[0] and at_bound[1] else f"{100 * share:.0f}% of the bounds"
    return f"{left} .. {right}, {verdict}"


def format_fit(problem, fit) -> str:
    cases = problem.cases
    ids = ", ".join(c.id for c in cases)
    lines = [f"fitted {len(fit.free)} value(s) on {len(cases)} case(s) ({ids}), {fit.runs} points, "
             f"{problem.runs} runs"]
    table = [["parameter", "bounds", "start", "fitted", "interval: every case within tolerance"]]
    for k, p in enumerate(fit.free):
        table.append([p.key + (" (integer)" if p.integer else ""), f"{_num(p.lo)}..{_num(p.hi)}",
                      _num(fit.start[k]), _num(fit.best.values[k]),
                      interval_text(p, fit.intervals[k], fit.at_bound[k]) if fit.intervals else "-"])
    lines.append(align(table))
    rows = [["case", "metric", "model", "measured", "residual %", "tolerance %", "within"]]
    for c, r in zip(cases, fit.best.residuals):
        model = c.published * (1 + r)
        rows.append([c.id, c.metric, f"{model:.4g}", f"{c.published:g}", f"{100 * r:+.2f}",
                     f"{100 * c.tolerance:g}", "yes" if abs(r) <= c.tolerance else "NO"])
    lines.append(align(rows))
    w = worst(fit.best.residuals, problem.tolerances)
    lines.append(f"sum of squared relative errors {fit.best.sse:.3g}; largest |error| / tolerance {w:.2f}")
    return "\n".join(lines)


def fit_record(problem, fit, cases_file: str, date: str, version: str, overlays=()) -> dict:
    """The overlay's ``fit:`` mapping (plain YAML types, fixed key order)."""
    def plain(v):
        return int(v) if float(v).is_integer() and abs(v) < 2**53 else float(v)

    def typed(p, v):
        return int(v) if p.integer else float(v)

    cases = []
    for c in problem.cases:
        sets = {}
        for s in c.sets:
            from simnode.config.overrides import parse_assignment
            k, v = parse_assignment(s)
            sets[k] = v
        cases.append({"id": c.id, "metric": c.metric, "measured": plain(c.published),
                      "tolerance": float(c.tolerance), "workload": c.workload, "set": sets})
    return {
        "cases_file": cases_file,
        "cases": cases,
        "sets": list(problem.user_sets),
        "overlays": list(overlays),
        "objective": OBJECTIVE,
        "bounds": {p.key: [typed(p, p.lo), typed(p, p.hi)] for p in fit.free},
        "start": {p.key: typed(p, v) for p, v in zip(fit.free, fit.start)},
        "residuals": {c.id: float(f"{r:.6g}") for c, r in zip(problem.cases, fit.best.residuals)},
        "within_tolerance": bool(worst(fit.best.residuals, problem.tolerances) <= 1),
        "intervals": {p.key: (None if iv is None else [typed(p, iv[0]), typed(p, iv[1])])
                      for p, iv in zip(fit.free, fit.intervals or [None] * len(fit.free))},
        "runs": int(problem.runs),
        "date": date,
        "simnode_version": version,
    }
