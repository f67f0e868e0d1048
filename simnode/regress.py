"""Golden baselines of modeled figures: scenario file, baseline files, comparison.

A baselines folder (``traces/baselines/``) holds ``scenarios.yaml``, the versioned list
of scenarios (topology, workload, ``--set`` overrides) and, per workload kind, which
figures of a run's JSON result are kept with their relative tolerance; and one
``<scenario id>.json`` per scenario with its inputs and recorded figures. Only
``simnode regress --update`` writes the JSON files.

- ``load_scenarios(path)`` -> ``ScenarioFile`` (``Scenario`` records, figure lists by kind)
- ``select(scenarios, patterns)``: the scenarios whose id matches a glob pattern
- ``resolve_figures(sfile, scenario, kind)``: figure -> tolerance for one scenario
- ``load_baseline(folder, scenario, figures)``: the recorded figures, checked current
- ``compare(scenario, figures, baseline, result)`` -> ``FigureRow`` list;
  ``format_rows(rows)``: the diff table; ``write_baseline(...)``: record a scenario.

Numbers drift when ``|now - baseline| / |baseline|`` exceeds the figure's tolerance
(a fraction; 0 = exact); strings (bottleneck, link names) must match exactly.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from simnode.config.fields import Reader, load_yaml
from simnode.errors import ConfigError
from simnode.report.columns import align

SCENARIOS_FILE = "scenarios.yaml"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ABSENT = object()


@dataclass(frozen=True)
class Scenario:
    id: str
    checks: str             #: what this scenario guards (one line, for the README)
    topology: str           #: path as written in the file, relative to its root
    workload: str
    overrides: dict         #: field -> value, as ``--set field=value``
    tolerance: dict         #: figure -> relative tolerance, overriding the kind's list

    def inputs(self) -> dict:
        """The inputs recorded in the baseline file (paths as written, not resolved)."""
        return {"topology": self.topology, "workload": self.workload, "set": dict(self.overrides)}

    def sets(self) -> tuple[str, ...]:
        return tuple(f"{k}={v}" for k, v in self.overrides.items())


@dataclass(frozen=True)
class ScenarioFile:
    path: Path
    root: Path              #: folder the topology and workload paths are relative to
    figures: dict           #: kind -> {figure: relative tolerance}
    scenarios: list


def _tolerance(r: Reader, key: str) -> float:
    """A relative tolerance: a number >= 0, or ``exact`` (0)."""
    if r.raw(key) == "exact":
        return 0.0
    return r.number(key, min_value=0)


def _tolerance_map(r: Reader, key: str, default=None) -> dict:
    section = r.section(key, default)
    out = {str(name): _tolerance(section, name) for name in section.mapping_keys()}
    section.finish()
    return out


def load_scenarios(path) -> ScenarioFile:
    """Read and check a scenario file; errors name the file and key path."""
    path = Path(path)
    r = Reader(load_yaml(path), str(path))
    r.integer("version", min_value=1, max_value=1)
    root = (path.parent / r.string("root", default=".")).resolve()
    fig = r.section("figures")
    figures = {}
    for kind in fig.mapping_keys():
        figures[str(kind)] = _tolerance_map(fig, kind)
        if not figures[kind]:
            raise fig.error(kind, {}, "a non-empty mapping of figure: tolerance")
    fig.finish()
    raw = r.raw("scenarios")
    if not isinstance(raw, list) or not raw:
        raise r.error("scenarios", raw, "a non-empty list of scenarios")
    scenarios, seen = [], set()
    for i, item in enumerate(raw):
        s = Reader(item, str(path), f"scenarios[{i}]")
        sid = s.string("id")
        if not _ID.match(sid):
            raise s.error("id", sid, "letters, digits, '.', '_' or '-' (it names the baseline file)")
        if sid in seen:
            raise s.error("id", sid, "an id used once")
        seen.add(sid)
        sets = s.raw("set", {})
        if not isinstance(sets, dict):
            raise s.error("set", sets, "a mapping of field: value")
        scenarios.append(Scenario(sid, s.string("checks"), s.string("topology"), s.string("workload"),
                                  dict(sets), _tolerance_map(s, "tolerance", {})))
        s.finish()
    r.finish()
    return ScenarioFile(path, root, figures, scenarios)


def select(scenarios: list, patterns: list[str]) -> list:
    """Scenarios (or validation cases: anything with an ``id``) whose id matches any glob
    pattern (all if none); a pattern matching none is an error."""
    if not patterns:
        return list(scenarios)
    for p in patterns:
        if not any(fnmatch.fnmatchcase(s.id, p) for s in scenarios):
            raise ConfigError("--only", "only", p, "an id or glob pattern matching one of: "
                              + ", ".join(s.id for s in scenarios))
    return [s for s in scenarios if any(fnmatch.fnmatchcase(s.id, p) for p in patterns)]


def resolve_figures(sfile: ScenarioFile, scenario: Scenario, kind: str) -> dict:
    """figure -> tolerance for a scenario: its kind's list, then the scenario's own tolerances."""
    if kind not in sfile.figures:
        raise ConfigError(str(sfile.path), f"figures.{kind}", "<missing>",
                          f"a figure list for workload kind '{kind}' (scenario '{scenario.id}')")
    return {**sfile.figures[kind], **scenario.tolerance}


def baseline_path(folder: Path, scenario: Scenario) -> Path:
    return Path(folder) / f"{scenario.id}.json"


def load_baseline(folder: Path, scenario: Scenario, figures: dict) -> dict:
    """The recorded figure values of a scenario, after checking that the baseline was
    recorded for the scenario as it is now defined (inputs, figures, tolerances)."""
    path = baseline_path(folder, scenario)
    update = f"Record it with `simnode regress --update --only {scenario.id}`."
    if not path.is_file():
        raise ConfigError(str(path), "", "<missing>", f"a baseline file for scenario '{scenario.id}'", update)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(str(path), "", "<unparsable>", f"valid JSON ({exc})", update) from None
    r = Reader(data, str(path))
    r.string("scenario", choices=[scenario.id])
    r.string("checks", default="")          # documentation only: may be reworded freely
    stale = "The scenario changed since its baseline was recorded. " + update
    inputs = r.raw("inputs")
    if inputs != scenario.inputs():
        raise r.error("inputs", inputs, f"the scenario's inputs {scenario.inputs()}", stale)
    fig = r.section("figures")
    values, recorded = {}, {}
    for name in fig.mapping_keys():
        f = fig.section(name)
        value = f.raw("value")
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise f.error("value", value, "a number or a string")
        values[name], recorded[name] = value, f.number("tolerance", min_value=0)
        f.finish()
    fig.finish()
    r.finish()
    if recorded != figures:
        raise ConfigError(str(path), "figures", recorded, f"the scenario's figures and tolerances {figures}",
                          stale)
    return values


def figure_value(result: dict, name: str):
    """A figure of a run's JSON result: a key, or a dotted path into nested records
    (``dispatch_hottest_links.0.link``; keys may themselves hold dots, as ``aic.m``)."""
    def walk(node, parts):
        if not parts:
            return node if isinstance(node, (int, float, str)) and not isinstance(node, bool) else _ABSENT
        if isinstance(node, list) and parts[0].isdigit() and int(parts[0]) < len(node):
            return walk(node[int(parts[0])], parts[1:])
        if isinstance(node, dict):
            for i in range(len(parts), 0, -1):
                key = ".".join(parts[:i])
                if key in node:
                    return walk(node[key], parts[i:])
        return _ABSENT
    return walk(result, name.split("."))


@dataclass(frozen=True)
class FigureRow:
    scenario: str
    figure: str
    baseline: object        #: recorded value (None: no baseline yet)
    now: object             #: recomputed value (None: not in the result any more)
    tolerance: float        #: relative, fraction

    @property
    def change_frac(self) -> float | None:
        numbers = all(isinstance(v, (int, float)) for v in (self.baseline, self.now))
        if not numbers:
            return None
        if self.baseline == self.now:
            return 0.0
        return (self.now - self.baseline) / abs(self.baseline) if self.baseline else math.inf

    @property
    def status(self) -> str:
        if self.baseline is None:
            return "NEW"
        if self.now is None:
            return "MISSING"
        if self.now == self.baseline:
            return "same"
        change = self.change_frac
        return "ok" if change is not None and abs(change) <= self.tolerance else "DRIFT"

    @property
    def drifted(self) -> bool:
        return self.status in ("DRIFT", "MISSING")


def compare(scenario: Scenario, figures: dict, baseline: dict | None, result: dict) -> list[FigureRow]:
    """One row per figure; ``baseline`` None for a scenario recorded for the first time."""
    rows = []
    for name, tol in figures.items():
        now = figure_value(result, name)
        rows.append(FigureRow(scenario.id, name, None if baseline is None else baseline.get(name),
                              None if now is _ABSENT else now, tol))
    return rows


def _show(value) -> str:
    if value is None:
        return "-"
    return f"{value:.10g}" if isinstance(value, (int, float)) else str(value)


def format_rows(rows: list[FigureRow]) -> str:
    """The diff table and a summary line naming every drifted figure."""
    header = ["scenario", "figure", "baseline", "now", "change %", "tolerance", "status"]
    table = [header]
    for r in rows:
        change = r.change_frac
        exact = r.tolerance == 0 or isinstance(r.baseline, str) or isinstance(r.now, str)
        table.append([r.scenario, r.figure, _show(r.baseline), _show(r.now),
                      "-" if change is None else f"{100 * change:+.2f}",
                      "exact" if exact else f"{100 * r.tolerance:g}%", r.status])
    drifted = [r for r in rows if r.drifted]
    counts = {s: sum(r.status == s for r in rows) for s in ("same", "ok", "NEW", "DRIFT", "MISSING")}
    n_scenarios = len({r.scenario for r in rows})
    summary = (f"{n_scenarios} scenario{'s' * (n_scenarios != 1)}, {len(rows)} figures: "
               + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    lines = [align(table), summary]
    if drifted:
        lines.append("drifted beyond tolerance: " + ", ".join(f"{r.scenario}/{r.figure}" for r in drifted))
    return "\n".join(lines)


def write_baseline(folder: Path, scenario: Scenario, figures: dict, result: dict) -> Path:
    """Record a scenario's figures (every one must be a number or a string in the result)."""
    values = {}
    for name, tol in figures.items():
        value = figure_value(result, name)
        if value is _ABSENT:
            raise ConfigError(f"scenario '{scenario.id}'", f"figures.{name}", "<not in the result>",
                              "a number or string of the run's JSON result: "
                              + ", ".join(k for k, v in result.items() if figure_value(result, k) is not _ABSENT))
        values[name] = {"value": value, "tolerance": tol}
    path = baseline_path(folder, scenario)
    record = {"scenario": scenario.id, "checks": scenario.checks, "inputs": scenario.inputs(),
              "figures": values}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path
