"""Read a result folder written by ``simnode run --out`` or ``simnode sweep --out``.

``load_folder(path)`` -> ``ResultFolder``: ``is_sweep``, the swept ``params``
({field: [values]}, empty for a run) and one ``PointData`` per run (its ``point``
{field: value}, its ``result`` dict as ``Result.to_dict()`` wrote it, and its
``network_util`` {kernel: {"bin_edges_ns": [...], "links": {name: [busy frac]},
"chip": {rank resource: [busy frac]} (optional)}}
when the run wrote network_util.json). Layouts read:

- run:   DIR/result.json, DIR/config.json, [DIR/network_util.json]
- sweep: DIR/sweep.json ({"params", "points": [{"point", "dir"}]}), and per point
  DIR/<dir>/result.json, [DIR/<dir>/network_util.json]

A missing folder, a folder that is neither layout, or a file that is not the JSON
expected raises ``ConfigError`` naming the file (the CLI prints it and exits 2).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from simnode.errors import ConfigError

LAYOUTS = ("a folder written by `simnode run --out` (with result.json) "
           "or `simnode sweep --out` (with sweep.json)")


@dataclass(frozen=True)
class PointData:
    point: dict                       #: swept field -> value ({} for a single run)
    result: dict                      #: Result.to_dict() of the run
    network_util: dict = field(default_factory=dict)   #: kernel -> binned link busy fractions
    dir: Path | None = None

    @property
    def label(self) -> str:
        """``num_ranks=8, seed=1`` for a sweep point, the workload name for a run."""
        if self.point:
            return ", ".join(f"{k}={v}" for k, v in self.point.items())
        return str(self.result.get("workload", "run"))


@dataclass(frozen=True)
class ResultFolder:
    path: Path
    is_sweep: bool
    params: dict                      #: swept field -> values ({} for a run)
    points: list                      #: [PointData], in grid order

    @property
    def workload(self) -> str:
        return str(self.points[0].result.get("workload", "")) if self.points else ""

    @property
    def kind(self) -> str:
        return str(self.points[0].result.get("kind", "")) if self.points else ""


def read_json(path: Path, expected_type: type, what: str):
    """The JSON value in ``path``, which must be of ``expected_type`` (dict or list)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(str(path), "", "<missing>", f"a file holding {what}") from None
    except OSError as exc:
        raise ConfigError(str(path), "", f"<unreadable: {exc.strerror}>", f"a readable file holding {what}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(str(path), "", f"<invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}>",
                          f"valid JSON holding {what}") from None
    if not isinstance(value, expected_type):
        raise ConfigError(str(path), "", f"<a JSON {type(value).__name__}>",
                          f"a JSON {'object' if expected_type is dict else 'list'} holding {what}")
    return value


def _result(path: Path) -> dict:
    result = read_json(path, dict, "a run result (Result.to_dict())")
    for key in ("kind", "makespan_ns", "bottleneck"):
        if key not in result:
            raise ConfigError(str(path), key, "<missing>", "a run result with kind, makespan_ns and bottleneck")
    return result


def _point(folder: Path, point: dict) -> PointData:
    util_path = folder / "network_util.json"
    util = read_json(util_path, dict, "binned link utilization per kernel") if util_path.exists() else {}
    for kernel, series in util.items():
        if not (isinstance(series, dict) and isinstance(series.get("bin_edges_ns"), list)
                and isinstance(series.get("links"), dict)):
            raise ConfigError(str(util_path), kernel, "<malformed>",
                              'an object {"bin_edges_ns": [...], "links": {name: [busy fraction per bin]}}')
        bins = len(series["bin_edges_ns"]) - 1
        if not isinstance(series.get("chip", {}), dict):
            raise ConfigError(str(util_path), f"{kernel}.chip", "<malformed>",
                              "an object {resource name: [busy fraction per bin]}")
        for group in ("links", "chip"):
            for name, fracs in series.get(group, {}).items():
                if not isinstance(fracs, list) or len(fracs) != bins:
                    raise ConfigError(str(util_path), f"{kernel}.{group}.{name}", "<a list of another length>",
                                      f"one busy fraction per time bin ({bins})")
    return PointData(dict(point), _result(folder / "result.json"), util, folder)


def load_folder(path) -> ResultFolder:
    """Read a run or sweep output folder; see the module docstring."""
    path = Path(path)
    if not path.is_dir():
        raise ConfigError("simnode report", "RESULT_DIR", str(path), f"an existing folder: {LAYOUTS}")
    if (path / "sweep.json").exists():
        sweep_path = path / "sweep.json"
        sweep = read_json(sweep_path, dict, 'a sweep index {"params", "points"}')
        params, entries = sweep.get("params"), sweep.get("points")
        if not isinstance(params, dict) or not isinstance(entries, list) or not entries:
            raise ConfigError(str(sweep_path), "points", entries,
                              'a "params" object and a non-empty "points" list')
        points = []
        for i, entry in enumerate(entries):
            if not (isinstance(entry, dict) and isinstance(entry.get("point"), dict)
                    and isinstance(entry.get("dir"), str)):
                raise ConfigError(str(sweep_path), f"points[{i}]", entry, '{"point": {...}, "dir": "points/NNN"}')
            points.append(_point(path / entry["dir"], entry["point"]))
        return ResultFolder(path, True, params, points)
    if (path / "result.json").exists():
        return ResultFolder(path, False, {}, [_point(path, {})])
    raise ConfigError("simnode report", "RESULT_DIR", str(path), LAYOUTS)
