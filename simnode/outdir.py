"""Output folders of ``simnode run --out DIR`` and ``simnode sweep --out DIR``.

The HTML report reads exactly this layout (JSON written with indent 2, UTF-8):

run::

    DIR/result.json        Result.to_dict() without its time series (below)
    DIR/config.json        {"topology": path, "workload": path, "sets": ["k=v", ...],
                            "params": the resolved workload fields (defaults filled),
                            "topology_resolved": the topology file's mapping after
                                                 the topology.* overrides}
    DIR/network_util.json  only if the result has link time series (deepep):
                           {kernel: {"bin_edges_ns": [e0, ..., eN],
                                     "links": {link name: [busy fraction per bin] (N)},
                                     "chip": {"rankR.hbm" / ".urma_tx" / ".urma_rx": [...] (N)}}}
                           kernel = "dispatch" / "combine"; at most 64 bins of equal
                           width, except the last (it ends at the last recorded edge)

sweep::

    DIR/sweep.json         {"topology": path, "workload": path, "sets": [...] (the
                            common --set values), "params": {field: [values]},
                            "points": [{"point": {field: value}, "dir": "points/000"}, ...]}
    DIR/results.json       [{"point": {...}, **result.json of that point}, ...]
    DIR/results.csv        one row per point, in grid order: "point.FIELD" columns (the
                           swept fields, in --param order), then every scalar (number,
                           string, bool) of the result dict, nested mappings flattened
                           with dots (pipe_busy_frac.aic.m), lists left out; columns in
                           order of first appearance, a cell empty if that point lacks it
    DIR/points/NNN/        result.json, config.json (sets = common + the point's) and
                           network_util.json, as for run; NNN = the point's index,
                           zero-padded to 3 digits (more when there are > 1000 points)

Time series: details keys ending in ``SERIES_SUFFIX`` (``dispatch_link_util``) hold
per-link busy fractions over time, ~300 kB at EP128, so ``split_series`` moves them
out of the printed table, ``--json`` and result.json into network_util.json.

DIR may be new (its parent must exist), empty, or a folder simnode wrote before
(holding result.json or sweep.json), whose files are replaced; ``check_out_dir``
says so before anything runs.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Mapping

from simnode.errors import ConfigError
from simnode.config.overrides import assignment_text

SERIES_SUFFIX = "_link_util"
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


def split_series(result):
    """(result without its time-series details, {kernel: series}) for a ``Result``."""
    series = {k[:-len(SERIES_SUFFIX)]: v for k, v in result.details.items()
              if k.endswith(SERIES_SUFFIX)}
    if not series:
        return result, {}
    details = {k: v for k, v in result.details.items() if not k.endswith(SERIES_SUFFIX)}
    return dataclasses.replace(result, details=details), series


def run_config(topology: str, workload: str, sets: list[str]) -> dict:
    """config.json: the input paths, the --set values and what they resolve to."""
    from simnode.config.overrides import apply_overrides
    from simnode.config.topology import load_topology_raw, optional_keys
    from simnode.workloads.loader import load_inputs, split_sets
    inputs = load_inputs(topology, workload, sets)
    topo_raw = load_topology_raw(topology)
    _, topo_sets = split_sets(list(sets))
    if topo_sets:
        topo_raw = apply_overrides(topo_raw, topo_sets, "--set topology.*", extra_keys=optional_keys())
    return {"topology": str(topology), "workload": str(workload), "sets": list(sets),
            "params": dict(inputs.params), "topology_resolved": topo_raw}


def write_run(out_dir: str, result, topology: str, workload: str, sets: list[str]) -> Path:
    """Write one run's folder (see the module docstring); returns it."""
    path = check_out_dir(out_dir, "run")
    path.mkdir(exist_ok=True)
    _write_point(path, result, run_config(topology, workload, sets))
    return path


def write_sweep(out_dir: str, rows: list, params: dict, topology: str, workload: str,
                sets: list[str]) -> Path:
    """Write a sweep's folder from ``run_sweep``'s ``[(point, Result)]``; returns it."""
    path = check_out_dir(out_dir, "sweep")
    path.mkdir(exist_ok=True)
    if (path / "points").is_dir() and (path / "sweep.json").exists():
        shutil.rmtree(path / "points")          # an earlier sweep's points, not this grid's
    width = max(3, len(str(len(rows) - 1)))
    index, dicts = [], []
    for i, (point, result) in enumerate(rows):
        rel = f"points/{i:0{width}d}"
        (path / rel).mkdir(parents=True, exist_ok=True)
        point_sets = list(sets) + [assignment_text(k, v) for k, v in point.items()]
        d = _write_point(path / rel, result, run_config(topology, workload, point_sets))
        index.append({"point": dict(point), "dir": rel})
        dicts.append({"point": dict(point), **d})
    _write_json(path / "sweep.json", {"topology": str(topology), "workload": str(workload),
                                      "sets": list(sets), "params": params, "points": index})
    _write_json(path / "results.json", dicts)
    write_csv(path / "results.csv", list(params), dicts)
    return path


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
    """result.json, config.json and (if any) network_util.json; returns result.json's dict."""
    lean, series = split_series(result)
    d = lean.to_dict()
    _write_json(path / "result.json", d)
    _write_json(path / "config.json", config)
    if series:
        _write_json(path / "network_util.json", series)
    elif (path / "network_util.json").exists():
        (path / "network_util.json").unlink()   # left by an earlier run of another kind
    return d


def _write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
