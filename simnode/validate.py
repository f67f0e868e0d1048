"""``simnode validate``: run every published case of a validation file and compare.

``load_cases(path)`` reads the versioned case list (validation/published.yaml);
``run_cases(cases, root, sets)`` runs each distinct (topology, workload, overrides)
once, in parallel processes, and returns ``CaseResult`` rows; ``format_cases``
prints the table with the mean and max absolute error. The command exits 1 if any
case leaves its tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simnode.config.fields import Reader, load_yaml
from simnode.errors import ConfigError
from simnode.parallel import run_all
from simnode.report.columns import align


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    topology: str
    workload: str
    sets: tuple          #: ("key=value", ...)
    metric: str
    published: float
    tolerance: float     #: fraction of the published value


@dataclass(frozen=True)
class CaseResult:
    case: Case
    model: float

    @property
    def error_frac(self) -> float:
        return (self.model - self.case.published) / self.case.published

    @property
    def ok(self) -> bool:
        return abs(self.error_frac) <= self.case.tolerance


def load_cases(path) -> list[Case]:
    data = load_yaml(path)
    r = Reader(data, str(path))
    r.integer("version", min_value=1)
    raw = r.raw("cases")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(str(path), "cases", raw, "a non-empty list of cases")
    cases = []
    for i, item in enumerate(raw):
        c = Reader(item, str(path), f"cases[{i}]")
        sets = c.raw("set", {})
        if not isinstance(sets, dict):
            raise c.error("set", sets, "a mapping of field: value")
        cases.append(Case(c.string("id"), c.string("source"), c.string("topology"),
                          c.string("workload"), tuple(f"{k}={v}" for k, v in sets.items()),
                          c.string("metric"), c.number("published", positive=True),
                          c.number("tolerance", positive=True)))
        c.finish()
    r.finish()
    return cases


def run_cases(cases: list[Case], root: Path, sets=(), jobs: int = 0) -> list[CaseResult]:
    def task(c: Case):
        return (str(root / c.topology), str(root / c.workload), c.sets + tuple(sets))
    outs = run_all([task(c) for c in cases], jobs)
    rows = []
    for c in cases:
        out = outs[task(c)]
        if c.metric not in out:
            raise ConfigError(c.id, "metric", c.metric, "a key of the run's JSON result: "
                              + ", ".join(k for k, v in out.items() if isinstance(v, (int, float))))
        rows.append(CaseResult(c, float(out[c.metric])))
    return rows


def format_cases(rows: list[CaseResult]) -> str:
    header = ["case", "metric", "model", "published", "error %", "tolerance %", "within", "source"]
    table = [header] + [[r.case.id, r.case.metric, f"{r.model:.1f}", f"{r.case.published:g}",
                         f"{100 * r.error_frac:+.1f}", f"{100 * r.case.tolerance:.0f}",
                         "yes" if r.ok else "NO", r.case.source] for r in rows]
    lines = [align(table)]
    errs = [abs(r.error_frac) for r in rows]
    lines.append(f"mean |error| {100 * sum(errs) / len(errs):.1f}%, max |error| {100 * max(errs):.1f}%, "
                 f"{sum(r.ok for r in rows)} of {len(rows)} within tolerance")
    return "\n".join(lines)
