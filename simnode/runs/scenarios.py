"""Regression scenarios: the versioned list of runs whose modeled figures are kept.

A baselines folder (``traces/baselines/``) holds ``scenarios.yaml``: per workload kind, the
figures of a run's JSON result that are kept, each with its relative tolerance (a number
>= 0, or ``exact``); and the scenarios, each a topology, a workload, ``set:`` overrides and
its own tolerances. ``simnode.runs.baselines`` holds the recorded values and compares.

- ``load_scenarios(path)`` -> ``ScenarioFile`` (``Scenario`` records, figure lists by kind)
- ``resolve_figures(sfile, scenario, kind)``: figure -> tolerance for one scenario

Errors about a scenario name the scenario file and the scenario id; its ``set:`` values
reach the run as typed (``assignment_text``: ``0.00001`` stays a number).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from simnode.config.fields import Reader, did_you_mean
from simnode.config.overrides import assignment_text
from simnode.errors import ConfigError
from simnode.runs.entries import check_set_keys, read_yaml

SCENARIOS_FILE = "scenarios.yaml"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


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


def resolve_figures(sfile: ScenarioFile, scenario: Scenario, kind: str) -> dict:
    """figure -> tolerance for a scenario: its kind's list, then the scenario's own tolerances."""
    if kind not in sfile.figures:
        raise ConfigError(str(sfile.path), f"figures.{kind}", "<missing>",
                          f"a figure list for workload kind '{kind}' (scenario '{scenario.id}')")
    return {**sfile.figures[kind], **scenario.tolerance}

