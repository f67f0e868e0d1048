"""Golden baselines of modeled figures: the recorded values, the comparison, the run.

Beside a scenario file (``simnode.runs.scenarios``) a baselines folder holds one
``<scenario id>.json`` per scenario with its inputs and recorded figures. Only ``simnode
regress --update`` writes them.

- ``regress(folder, patterns, sets, jobs, update)``: checks every selected scenario's
  inputs and baseline before running anything, runs them through the executor, and
  returns the ``FigureRow`` of every figure (and, with ``update``, the new baselines'
  records, checked, for ``write_baselines``)
- ``load_baseline(folder, scenario, figures)``: the recorded figures, checked current
  (``StaleFigures`` when only the figure list or tolerances changed)
- ``check_figures(sfile, scenario, kind, figures, result)``: every figure is in the result;
  ``figure_value(result, name)`` reads one (a dotted path reaches nested records)
- ``compare(scenario, figures, baseline, result)`` -> ``FigureRow`` list;
  ``baseline_record(...)`` checks and builds one baseline, ``write_baselines(folder,
  records)`` writes them all (after every check).

Numbers drift when ``|now - baseline| / |baseline|`` exceeds the figure's tolerance
(a fraction; 0 = exact); strings (bottleneck, link names) must match exactly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from simnode.config.fields import Reader, did_you_mean
from simnode.errors import ConfigError
from simnode.runs.entries import in_entry, select
from simnode.runs.scenarios import SCENARIOS_FILE, Scenario, ScenarioFile, load_scenarios, resolve_figures

_ABSENT = object()


class StaleFigures(ConfigError):
    """A baseline recorded for other figures or tolerances than the scenario now lists."""


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


def recorded_values(path: Path) -> dict | None:
    """Whatever figure values an old (perhaps stale) baseline holds, for the --update diff."""
    try:
        figures = json.loads(path.read_text()).get("figures", {})
        return {k: v["value"] for k, v in figures.items() if isinstance(v, dict) and "value" in v}
    except (OSError, ValueError, AttributeError):
        return None


@dataclass(frozen=True)
class _Plan:
    """A selected scenario, checked and parsed, ready to run."""
    scenario: Scenario
    kind: str
    figures: dict               #: figure -> tolerance
    baseline: dict | None       #: recorded values (None: none yet)
    spec: object                #: its RunSpec (simnode.workloads.loader)


def regress(folder: Path, patterns=(), sets=(), jobs: int = 0,
            update: bool = False) -> tuple[list[FigureRow], list[dict] | None]:
    """Recompute the scenarios of ``folder`` matching ``patterns`` (all if none) with the
    extra ``sets`` (``--set`` text) and compare each figure with its baseline: every
    scenario's inputs and baseline are checked before anything runs. With ``update`` the
    old baselines are read only for the diff, and the records of the new ones are returned
    (each checked; none written). A baseline whose figures or tolerances changed raises its
    ``StaleFigures``, after a run has shown that the result has every figure the scenario
    now lists (a figure it lacks is the scenario file's mistake: --update would not help)."""
    from simnode.runs.executor import execute
    from simnode.workloads.loader import load_inputs
    sfile = load_scenarios(Path(folder) / SCENARIOS_FILE)
    plans, stale = [], []
    for sc in select(sfile.scenarios, list(patterns)):
        topology, workload = str(sfile.root / sc.topology), str(sfile.root / sc.workload)
        try:
            spec = load_inputs(topology, workload, list(sc.sets() + tuple(sets)))
        except ConfigError as exc:
            raise in_entry(exc, sfile.where(sc), sc.key_path("set"), sc.sets(), sets) from None
        kind = spec.kind.name
        figures = resolve_figures(sfile, sc, kind)
        baseline = None
        if update:
            check_writable(baseline_path(folder, sc), sc)
            baseline = recorded_values(baseline_path(folder, sc))
        else:
            try:
                baseline = load_baseline(folder, sc, figures)
            except StaleFigures as exc:
                stale.append((_Plan(sc, kind, figures, None, spec), exc))
        plans.append(_Plan(sc, kind, figures, baseline, spec))

    def run(selected: list[_Plan]) -> list[dict]:
        return [r.to_dict() for r in execute([p.spec for p in selected], jobs,
                                             labels=[sfile.where(p.scenario) for p in selected],
                                             title="regress")]

    if stale:
        for (p, _), result in zip(stale, run([p for p, _ in stale])):
            check_figures(sfile, p.scenario, p.kind, p.figures, result)
        raise stale[0][1]
    results = run(plans)
    records = [baseline_record(sfile, p.scenario, p.kind, p.figures, result)
               for p, result in zip(plans, results)] if update else None
    rows = [row for p, result in zip(plans, results)
            for row in compare(p.scenario, p.figures, p.baseline, result)]
    return rows, records
