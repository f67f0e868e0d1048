"""Output folders of ``simnode run --out DIR`` and ``simnode sweep --out DIR``.

The HTML report reads exactly this layout (JSON written with indent 2, UTF-8):

run::

    DIR/result.json        the typed result (``Result.to_record()``, simnode.report.result):
                           header fields, "figures", "kernels" [{name, time_ns, bound_ns,
                           bottleneck, figures: [{name, value, unit, doc, ...}]}]
    DIR/series.json        only if the result has time series: [{"name", "kernel", "unit",
                           "doc", "bin_edges_ns": [e0, ..., eN], "rows": {label: [N values]}}]
                           (a DeepEP kernel: "link_util" per link, "chip_util" per rank
                           resource; at most 64 bins of equal width, the last may be shorter)
    DIR/config.json        {"topology": path, "workload": path, "sets": ["k=v", ...],
                            "params": the workload's fields (defaults filled),
                            "topology_resolved": the topology's declared values,
                            "overlays": [path, ...] (only if a calibration overlay applied),
                            "origins": {dotted key: file, "--set", "overlay PATH" or "default"}}

sweep::

    DIR/sweep.json         {"topology": path, "workload": path, "sets": [...] (the
                            common --set values), "params": {field: [values]},
                            "overlays": [path, ...] (--topology-overlay, if any),
                            "band": {"field": "overlay", "overlays": {label: path}}
                            (sweep --band only: every point once per overlay, its
                            label as the point's "overlay" field),
                            "points": [{"point": {field: value}, "dir": "points/000"}, ...]}
    DIR/results.json       [{"point": {...}, **the flat result (Result.to_dict())}, ...]
    DIR/results.csv        one row per point, in grid order: "point.FIELD" columns (the
                           swept fields, in --param order), then every scalar (number,
                           string, bool) of the flat result, nested mappings flattened
                           with dots (pipe_busy_frac.aic.m), lists left out; columns in
                           order of first appearance, a cell empty if that point lacks it
                           (a figure a kind does not compute is absent, never 0); a
                           band sweep adds <figure>_lo and <figure>_hi to every row: the
                           lowest and highest value over the overlays at that grid point
    DIR/points/NNN/        result.json, config.json (sets = common + the point's) and
                           series.json, as for run; NNN = the point's index,
                           zero-padded to 3 digits (more when there are > 1000 points)

DIR may be new (its parent must exist), empty, or a folder simnode wrote before
(holding result.json or sweep.json), whose files are replaced; ``check_out_dir``
says so before anything runs. The folder is written beside DIR first and moved into
place whole, so an interrupted write (Ctrl-C) leaves the old folder or nothing, never a
folder that looks complete but is not.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path
from typing import Mapping

from simnode.errors import ConfigError

MARKERS = ("result.json", "sweep.json")        #: files that mark a folder as simnode's


def check_out_dir(out_dir: str, kind: str | None = None) -> Path:
    """The output folder, checked (not left created) before running: exit 2 if unusable.
    ``kind`` ("run" or "sweep") also refuses a folder that holds the other kind's output."""
    if not str(out_dir).strip():
        raise ConfigError("--out", "out", out_dir, "a folder path (it is empty)")
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise ConfigError("--out", "out", out_dir, "a folder (this is a file)")
    if not path.exists() and not path.parent.is_dir():
        raise ConfigError("--out", "out", out_dir,
                          f"a folder whose parent exists ({path.parent} does not)")
    if path.is_dir() and any(path.iterdir()) and not any((path / m).exists() for m in MARKERS):
        raise ConfigError("--out", "out", out_dir,
                          "a new or empty folder, or one simnode wrote before (it holds other files)")
    other = {"run": "sweep.json", "sweep": "result.json"}.get(kind or "")
    if other and (path / other).exists():
        raise ConfigError("--out", "out", out_dir,
                          f"a new folder or one an earlier {kind} wrote (it holds a "
                          f"{'sweep' if kind == 'run' else 'single run'}'s output)")
    if not path.exists():
        try:                                    # can we create it? (not left behind)
            path.mkdir()
            path.rmdir()
        except OSError as exc:
            raise ConfigError("--out", "out", out_dir, f"a folder simnode can create ({exc.strerror})") from None
    return path


def run_config(spec) -> dict:
    """config.json of a run: its inputs, what they resolve to and where each value came from."""
    resolved = spec.resolved()
    return {"topology": spec.topology_path, "workload": spec.workload_path, "sets": list(spec.sets),
            **({"overlays": [o.path for o in spec.overlays]} if spec.overlays else {}),
            "params": resolved["workload"], "topology_resolved": resolved["topology"],
            "origins": dict(spec.origins)}


def write_run(out_dir: str, result, spec) -> Path:
    """Write one run's folder (see the module docstring); returns it."""
    path = check_out_dir(out_dir, "run")
    with _staged(path) as stage:
        _write_point(stage, result, run_config(spec))
    return path


def write_sweep(out_dir: str, rows: list, params: dict, topology: str, workload: str,
                sets: list[str], extra: list | None = None, band: dict | None = None,
                overlays=()) -> Path:
    """Write a sweep's folder from ``[(point, RunSpec, Result)]``; returns it. ``extra``:
    per row, columns added to results.json and results.csv (a band's ``<figure>_lo`` and
    ``_hi``); ``band``: {label: overlay path} of a band sweep; ``overlays``: the overlays
    applied to every point (both recorded in sweep.json)."""
    path = check_out_dir(out_dir, "sweep")
    width = max(3, len(str(len(rows) - 1)))
    with _staged(path) as stage:
        index, dicts = [], []
        for i, (point, spec, result) in enumerate(rows):
            rel = f"points/{i:0{width}d}"
            (stage / rel).mkdir(parents=True)
            d = _write_point(stage / rel, result, run_config(spec))
            index.append({"point": dict(point), "dir": rel})
            dicts.append({"point": dict(point), **d, **(extra[i] if extra else {})})
        _write_json(stage / "results.json", dicts)
        write_csv(stage / "results.csv", list(params), dicts)
        info = {"topology": str(topology), "workload": str(workload), "sets": list(sets),
                "params": params}
        if overlays:
            info["overlays"] = list(overlays)
        if band:
            info["band"] = {"field": "overlay", "overlays": dict(band)}
        _write_json(stage / "sweep.json", {**info, "points": index})
    return path


class _staged:
    """A fresh folder beside ``path`` to write into; on success it replaces ``path`` (an
    earlier output, or an empty folder), on any failure or interrupt it is removed."""

    def __init__(self, path: Path):
        self.path = path
        self.stage = path.parent / f".{path.name}.simnode-{os.getpid()}"

    def __enter__(self) -> Path:
        shutil.rmtree(self.stage, ignore_errors=True)
        self.stage.mkdir()
        return self.stage

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.stage, ignore_errors=True)
            return
        old = self.path.parent / f".{self.path.name}.simnode-old-{os.getpid()}"
        try:
            if self.path.exists():
                self.path.rename(old)
            self.stage.rename(self.path)
        except BaseException:
            if old.exists() and not self.path.exists():
                old.rename(self.path)
            shutil.rmtree(self.stage, ignore_errors=True)
            raise
        shutil.rmtree(old, ignore_errors=True)


def write_csv(path: Path, point_fields: list[str], dicts: list[dict]) -> None:
    """results.csv: "point.FIELD" columns, then the flattened scalars of each result dict."""
    flat_rows = []
    columns = {f"point.{k}": None for k in point_fields}
    for d in dicts:
        flat = {f"point.{k}": v for k, v in d["point"].items()}
        flat.update(flatten({k: v for k, v in d.items() if k != "point"}))
        columns.update(dict.fromkeys(flat))
        flat_rows.append(flat)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), restval="")
        writer.writeheader()
        writer.writerows(flat_rows)


def flatten(d: Mapping, prefix: str = "") -> dict:
    """Scalars of a nested mapping under dotted keys; lists (and None) are left out."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        elif isinstance(v, (int, float, str, bool)):
            out[key] = v
    return out


def _write_point(path: Path, result, config: dict) -> dict:
    """result.json, config.json and (if any) series.json; returns the flat result."""
    _write_json(path / "config.json", config)
    if result.series:
        _write_json(path / "series.json", [s.to_record() for s in result.series])
    _write_json(path / "result.json", result.to_record())
    return result.to_dict()


def _write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
