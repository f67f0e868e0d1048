"""Fixtures that write result folders in the layout of ``simnode run/sweep --out``
(simnode/report/folder.py documents it), from small real runs, so the report tests
do not depend on how long a full-size run takes.

- ``run_result(topology, workload, **sets)``: Result.to_dict() of one small run (cached).
- ``write_run_dir(path, result, network_util=None)``: a run folder.
- ``write_sweep_dir(path, params, rows)``: a sweep folder from [(point, result, util)].
- ``gemm_result``: result.json of a small GEMM run (a fresh dict).
- ``gemm_run_dir``, ``deepep_run_dir``, ``deepep_sweep_dir``, ``layer_sweep_dir``: ready-made
  folders.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from simnode.workloads.loader import load_inputs
from simnode.workloads.registry import RunOptions

REPO_ROOT = Path(__file__).resolve().parents[2]
CHIP = REPO_ROOT / "topologies" / "ascend950dt.yaml"
SUPERNODE = REPO_ROOT / "topologies" / "atlas950-supernode.yaml"
GEMM = REPO_ROOT / "workloads" / "gemm-bf16-4096x7168x16384.yaml"
DEEPEP = REPO_ROOT / "workloads" / "deepep-normal.yaml"
LAYER = REPO_ROOT / "workloads" / "moe-layer.yaml"
SMALL_GEMM = {"m": 256, "n": 512, "k": 1024}
SMALL_DEEPEP = {"tokens_per_rank": 512}


@functools.lru_cache(maxsize=None)
def _run(topology: Path, workload: Path, sets: tuple) -> str:
    inputs = load_inputs(str(topology), str(workload), [f"{k}={v}" for k, v in sets])
    result = inputs.kind.run(inputs.topology, inputs.params, RunOptions(), name=workload.stem)
    return json.dumps(result.to_dict())


def run_result(topology: Path, workload: Path, **sets) -> dict:
    return json.loads(_run(topology, workload, tuple(sorted(sets.items()))))


def fake_network_util(result: dict, num_bins: int = 12) -> dict:
    """A network_util.json body for a DeepEP result: its hottest links, busy over the kernel."""
    out = {}
    for kernel in ("dispatch", "combine"):
        if f"{kernel}_ns" not in result:
            continue
        edges = np.linspace(0.0, result[f"{kernel}_ns"], num_bins + 1)
        ramp = np.minimum(1.0, np.linspace(0.2, 3.0, num_bins))
        links = {h["link"]: list(np.round(ramp * h["util_frac"] * (1 - 0.05 * i), 4))
                 for i, h in enumerate(result[f"{kernel}_hottest_links"])}
        out[kernel] = {"bin_edges_ns": list(edges), "links": links}
    return out


def write_run_dir(path: Path, result: dict, network_util: dict | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "result.json").write_text(json.dumps(result, indent=2))
    (path / "config.json").write_text(json.dumps({"workload": {"kind": result["kind"]}}, indent=2))
    if network_util is not None:
        (path / "network_util.json").write_text(json.dumps(network_util))
    return path


def write_sweep_dir(path: Path, params: dict, rows: list) -> Path:
    """``rows``: [(point, result, network_util or None)] in grid order."""
    path.mkdir(parents=True, exist_ok=True)
    index = []
    for i, (point, result, util) in enumerate(rows):
        write_run_dir(path / "points" / f"{i:03d}", result, util)
        index.append({"point": point, "dir": f"points/{i:03d}"})
    (path / "sweep.json").write_text(json.dumps({"params": params, "points": index}, indent=2))
    (path / "results.json").write_text(json.dumps([{"point": p, **r} for p, r, _ in rows], indent=2))
    return path


@pytest.fixture
def gemm_result() -> dict:
    """result.json of a small GEMM run (a fresh copy)."""
    return run_result(CHIP, GEMM, **SMALL_GEMM)


@pytest.fixture
def gemm_run_dir(tmp_path) -> Path:
    return write_run_dir(tmp_path / "gemm", run_result(CHIP, GEMM, **SMALL_GEMM))


@pytest.fixture
def deepep_run_dir(tmp_path) -> Path:
    result = run_result(SUPERNODE, DEEPEP, num_ranks=8, **SMALL_DEEPEP)
    return write_run_dir(tmp_path / "deepep", result, fake_network_util(result))


@pytest.fixture
def deepep_sweep_dir(tmp_path) -> Path:
    rows = []
    for n in (8, 16):
        result = run_result(SUPERNODE, DEEPEP, num_ranks=n, **SMALL_DEEPEP)
        rows.append(({"num_ranks": n}, result, fake_network_util(result)))
    return write_sweep_dir(tmp_path / "sweep", {"num_ranks": [8, 16]}, rows)


@pytest.fixture
def layer_sweep_dir(tmp_path) -> Path:
    """A small MoE layer sweep: EP4 x (sequential, fused), 256 tokens per rank."""
    rows = []
    for overlap in ("sequential", "fused"):
        result = run_result(SUPERNODE, LAYER, num_ranks=4, tokens_per_rank=256, overlap=overlap)
        rows.append(({"overlap": overlap}, result, None))
    return write_sweep_dir(tmp_path / "layer", {"overlap": ["sequential", "fused"]}, rows)
