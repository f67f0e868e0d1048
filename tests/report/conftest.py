"""Fixtures that write result folders in the layout of ``simnode run/sweep --out``
(simnode/outdir.py documents it), from small real runs, so the report tests do not
depend on how long a full-size run takes.

- ``run_result(topology, workload, **sets)``: the typed record (``Result.to_record()``)
  and series records of one small run (cached), as a fresh (record, series) pair.
- ``write_run_dir(path, record, series=None)``: a run folder.
- ``write_sweep_dir(path, params, rows)``: a sweep folder from [(point, record, series)].
- ``gemm_result``: result.json of a small GEMM run (a fresh dict).
- ``gemm_run_dir``, ``deepep_run_dir``, ``deepep_sweep_dir``, ``layer_sweep_dir``: ready-made
  folders.
- ``nonblank``: checks PNG bytes are an image of some size with ink on it.
- ``browser``: a headless Chromium to open the report in (``find_browser``): found on the
  machine, or the test is skipped with what to install, or fails when
  ``SIMNODE_REQUIRE_BROWSER=1`` (CI, where the test command installs one as root).
"""

from __future__ import annotations

import functools
import glob
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from simnode.report.result import from_record
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
    result = inputs.run(RunOptions())
    return json.dumps([result.to_record(), [s.to_record() for s in result.series]])


def run_result(topology: Path, workload: Path, **sets) -> tuple[dict, list]:
    record, series = json.loads(_run(topology, workload, tuple(sorted(sets.items()))))
    return record, series


def flat(record: dict) -> dict:
    """The flat view of a typed record (what --json prints)."""
    return from_record(record).to_dict()


def write_run_dir(path: Path, record: dict, series: list | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "result.json").write_text(json.dumps(record, indent=2))
    (path / "config.json").write_text(json.dumps({"workload": {"kind": record["kind"]}}, indent=2))
    if series:
        (path / "series.json").write_text(json.dumps(series))
    return path


def write_sweep_dir(path: Path, params: dict, rows: list) -> Path:
    """``rows``: [(point, record, series or None)] in grid order."""
    path.mkdir(parents=True, exist_ok=True)
    index = []
    for i, (point, record, series) in enumerate(rows):
        write_run_dir(path / "points" / f"{i:03d}", record, series)
        index.append({"point": point, "dir": f"points/{i:03d}"})
    (path / "sweep.json").write_text(json.dumps({"params": params, "points": index}, indent=2))
    (path / "results.json").write_text(json.dumps([{"point": p, **flat(r)} for p, r, _ in rows], indent=2))
    return path


@pytest.fixture
def gemm_result() -> dict:
    """result.json of a small GEMM run (a fresh copy)."""
    return run_result(CHIP, GEMM, **SMALL_GEMM)[0]


@pytest.fixture
def gemm_run_dir(tmp_path) -> Path:
    return write_run_dir(tmp_path / "gemm", *run_result(CHIP, GEMM, **SMALL_GEMM))


@pytest.fixture
def deepep_run_dir(tmp_path) -> Path:
    return write_run_dir(tmp_path / "deepep", *run_result(SUPERNODE, DEEPEP, num_ranks=8, **SMALL_DEEPEP))


@pytest.fixture
def deepep_sweep_dir(tmp_path) -> Path:
    rows = [({"num_ranks": n}, *run_result(SUPERNODE, DEEPEP, num_ranks=n, **SMALL_DEEPEP)) for n in (8, 16)]
    return write_sweep_dir(tmp_path / "sweep", {"num_ranks": [8, 16]}, rows)


@pytest.fixture
def layer_sweep_dir(tmp_path) -> Path:
    """A small MoE layer sweep: EP4 x (sequential, fused), 256 tokens per rank."""
    rows = [({"overlap": o}, *run_result(SUPERNODE, LAYER, num_ranks=4, tokens_per_rank=256, overlap=o))
            for o in ("sequential", "fused")]
    return write_sweep_dir(tmp_path / "layer", {"overlap": ["sequential", "fused"]}, rows)


def assert_nonblank_png(png: bytes) -> None:
    from matplotlib import image as mpimg
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = mpimg.imread(io.BytesIO(png), format="png")[..., :3]
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    nonwhite = (pixels < 0.94).any(axis=-1).mean()
    assert nonwhite > 0.02, f"only {nonwhite:.3%} of the pixels are not white"
    assert float(pixels.std()) > 0.05


@pytest.fixture
def nonblank():
    """``assert_nonblank_png``: PNG bytes, more than 100 x 100 pixels, 2% of them not white."""
    return assert_nonblank_png


#: where a headless Chromium may be: $SIMNODE_BROWSER, then these names on PATH, then a
#: user-level install by Playwright (``python -m playwright install chromium``, no root)
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
PLAYWRIGHT_GLOBS = ("~/.cache/ms-playwright/chromium-*/chrome-linux*/chrome",
                    "~/.cache/ms-playwright/chromium_headless_shell-*/chrome-linux*/headless_shell")
HOW_TO_GET_ONE = ("the report test opens the page in a headless Chromium and found none (looked for "
                  "$SIMNODE_BROWSER, " + ", ".join(BROWSER_NAMES) + " on PATH, and Playwright's in "
                  "~/.cache/ms-playwright). Install one: as root `apt-get install chromium`; without root "
                  "`pip install playwright && python -m playwright install chromium`; or point "
                  "SIMNODE_BROWSER at a Chrome or Chromium binary")


def find_browser() -> str | None:
    """The path of a headless-capable Chromium on this machine, or None."""
    named = os.environ.get("SIMNODE_BROWSER")
    if named:
        return named if os.access(named, os.X_OK) else None
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    for pattern in PLAYWRIGHT_GLOBS:
        found = sorted(glob.glob(os.path.expanduser(pattern)))
        if found:
            return found[-1]
    return None


@pytest.fixture
def browser_search():
    """``find_browser`` and the message a missing browser gives, for tests of the search."""
    return find_browser, HOW_TO_GET_ONE


@pytest.fixture(scope="session")
def browser() -> str:
    path = find_browser()
    if path is None:
        if os.environ.get("SIMNODE_REQUIRE_BROWSER") == "1":
            pytest.fail(HOW_TO_GET_ONE)
        pytest.skip(HOW_TO_GET_ONE)
    return path
