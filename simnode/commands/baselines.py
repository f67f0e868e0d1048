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
  (``StaleFigures`` when only the figure list or tolerances changed)
- ``check_figures(sfile, scenario, kind, figures, result)``: every figure is in the result
- ``compare(scenario, figures, baseline, result)`` -> ``FigureRow`` list;
  ``format_rows(rows)``: the diff table; ``baseline_record(...)`` checks and builds one
  baseline, ``write_baselines(folder, records)`` writes them all (after every check).

Errors about a scenario name the scenario file and the scenario id; its ``set:`` values
reach the run as typed (``assignment_text``: ``0.00001`` stays a number).

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

from simnode.config.fields import Reader, did_you_mean
from simnode.config.overrides import assignment_text
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
    index: int = -1         #: position in the file's ``scenarios:`` list

    def key_path(self, key: str) -> str:
        return f"scenarios[{self.index}].{key}" if self.index >= 0 else key

    def inputs(self) -> dict:
        """The inputs recorded in the baseline file (paths as written, not resolved)."""
        return {"topology": self.topology, "workload": self.workload, "set": dict(self.overrides)}

    def sets(self) -> tuple[str, ...]:
        """The overrides as ``--set`` text that reads back as the same typed values."""
        return tuple(assignment_text(k, v) for k, v in self.overrides.items())


@dataclass(frozen=True)
class ScenarioFile:
    path: Path
    root: Path              #: folder the topology and workload paths are relative to
    figures: dict           #: kind -> {figure: relative tolerance}
    scenarios: list

    def where(self, scenario: Scenario) -> str:
        """How errors name a scenario: ``FILE, scenario 'ID'``."""
        return f"{self.path}, scenario '{scenario.id}'"


class StaleFigures(ConfigError):
    """A baseline recorded for other figures or tolerances than the scenario now lists."""


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
    from simnode.commands.validate import check_set_keys, read_yaml
    from simnode.workloads.registry import all_kinds
    path = Path(path)
    r = Reader(read_yaml(path), str(path))
    r.integer("version", min_value=1, max_value=1)
    root = (path.parent / r.string("root", default=".")).resolve()
    fig = r.section("figures")
    figures, kinds = {}, sorted(all_kinds())
    for kind in fig.mapping_keys():
        if kind not in kinds:
            raise fig.error(str(kind), kind, "the name of a workload kind: one of " + ", ".join(kinds),
                            did_you_mean(str(kind), kinds))
        figures[kind] = _tolerance_map(fig, kind)
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
        s.source = f"{path}, scenario '{sid}'"        # every later error names the scenario
        if sid in seen:
            raise s.error("id", sid, "an id used once")
        seen.add(sid)
        sets = check_set_keys(s.raw("set", {}), s)
        if not _json_exact(sets):                        # the baseline records them as JSON
            raise s.error("set", sets, "values a JSON baseline records as they are (numbers, "
                          "strings, true/false, null, lists)")
        scenarios.append(Scenario(sid, s.string("checks"), s.string("topology"), s.string("workload"),
                                  dict(sets), _tolerance_map(s, "tolerance", {}), i))
        s.finish()
    r.finish()
    return ScenarioFile(path, root, figures, scenarios)


def _json_exact(value) -> bool:
    """Whether JSON writes ``value`` so that it reads back equal (no dates, NaN, int keys)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False)) == value
    except (TypeError, ValueError):
        return False


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


def _read_json(path: Path, what: str, hint: str = ""):
    """A JSON file's data; an unreadable, non-UTF-8 or unparsable file is a ConfigError."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), "", f"<byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}>",
                          f"{what} (a UTF-8 JSON file)", hint) from None
    except OSError as exc:
        raise ConfigError(str(path), "", "<unreadable>", f"{what} (a readable file: {exc.strerror})",
                          hint) from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(str(path), "", "<unparsable>", f"{what} (valid JSON: {exc})", hint) from None


def load_baseline(folder: Path, scenario: Scenario, figures: dict) -> dict:
    """The recorded figure values of a scenario, after checking that the baseline was
    recorded for the scenario as it is now defined (inputs, figures, tolerances).
    ``StaleFigures`` when only its figures or tolerances differ (the caller checks the
    scenario's figures against a run before advising ``--update``)."""
    path = baseline_path(folder, scenario)
    update = f"Record it with `simnode regress --update --only {scenario.id}`."
    what = f"the baseline of scenario '{scenario.id}'"
    if path.is_dir():
        raise ConfigError(str(path), "", "<a folder>", f"{what} (a JSON file, not a folder)",
                          "Remove the folder, then record the baseline with "
                          f"`simnode regress --update --only {scenario.id}`.")
    if not path.is_file():
        raise ConfigError(str(path), "", "<missing>", f"a baseline file for scenario '{scenario.id}'", update)
    data = _read_json(path, what, update)
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
        raise StaleFigures(str(path), "figures", recorded, f"the scenario's figures and tolerances {figures}",
                           stale)
    return values


def check_figures(sfile: ScenarioFile, scenario: Scenario, kind: str, figures: dict, result: dict) -> None:
    """Every figure the scenario keeps is a number or string of its run's result; one that
    is not is an error of the scenario file (where the figure is listed)."""
    for name in figures:
        if figure_value(result, name) is _ABSENT:
            key = (scenario.key_path(f"tolerance.{name}") if name in scenario.tolerance
                   else f"figures.{kind}.{name}")
            fields = [k for k in result if figure_value(result, k) is not _ABSENT]
            raise ConfigError(sfile.where(scenario), key, "<not in the result>",
                              f"a number or string of the run's JSON result (workload kind '{kind}'; "
                              "a dotted path reaches nested records): " + ", ".join(fields),
                              did_you_mean(name, fields))


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


def rows_json(rows: list[FigureRow]) -> dict:
    """The diff table as one JSON object: a row per figure and the drifted ones."""
    return {
        # change_frac null: not two numbers, or a move away from a baseline of 0 (infinite)
        "figures": [{"scenario": r.scenario, "figure": r.figure, "baseline": r.baseline,
                     "now": r.now, "tolerance_frac": r.tolerance, "status": r.status,
                     "change_frac": r.change_frac if r.change_frac is not None
                     and math.isfinite(r.change_frac) else None} for r in rows],
        "scenarios": len({r.scenario for r in rows}),
        "drifted": [f"{r.scenario}/{r.figure}" for r in rows if r.drifted],
    }


def baseline_record(sfile: ScenarioFile, scenario: Scenario, kind: str, figures: dict,
                    result: dict) -> dict:
    """The baseline file's record of a scenario (every figure must be in the result)."""
    check_figures(sfile, scenario, kind, figures, result)
    values = {name: {"value": figure_value(result, name), "tolerance": tol} for name, tol in figures.items()}
    return {"scenario": scenario.id, "checks": scenario.checks, "inputs": scenario.inputs(),
            "figures": values}


def check_writable(path: Path, scenario: Scenario) -> None:
    """Before any run: the baseline of ``scenario`` can be written at ``path``."""
    if path.is_dir():
        raise ConfigError(str(path), "", "<a folder>",
                          f"a path the baseline of scenario '{scenario.id}' can be written to "
                          "(a JSON file, not a folder)", "Remove the folder first.")


def write_baselines(folder: Path, records: list[dict]) -> list[Path]:
    """Write every record as ``<scenario>.json``: each to a temporary file first, then all
    renamed into place, so a failed write leaves every old baseline as it was."""
    staged = []
    try:
        for record in records:
            path = Path(folder) / f"{record['scenario']}.json"
            tmp = path.with_name(path.name + ".tmp")
            staged.append((tmp, path))
            tmp.write_text(json.dumps(record, indent=2) + "\n")
    except OSError as exc:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        failed = exc.filename or staged[-1][0]
        raise ConfigError(str(failed), "", "<not written>", f"a baseline file simnode can write "
                          f"({exc.strerror or exc}); no baseline was changed") from None
    for tmp, path in staged:
        tmp.replace(path)
    return [path for _, path in staged]
