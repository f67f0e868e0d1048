"""Shared fixtures for the single-chip tests.

- ``repo_root``: the repository root (topologies/, workloads/ live there).
- ``topology_path`` / ``gemm_workload_path``: the shipped 950DT chip and the published
  BF16 GEMM workload.
- ``chip_mapping``: a fresh deep copy of the raw YAML mapping of the 950DT file, to
  mutate into bad inputs; ``write_yaml(data, name)`` dumps a mapping into tmp_path.
- ``chip``: the validated ``ChipSpec`` (session-wide; it is frozen).
- ``cli(*argv)``: runs ``simnode.cli.main`` in-process and returns (code, out, err).
- ``small_gemm``: writes a small-shape GEMM workload file so CLI runs stay fast.
"""

from __future__ import annotations

import contextlib
import copy
import io
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from simnode.config.chip import load_chip

REPO_ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = REPO_ROOT / "topologies" / "ascend950dt.yaml"
GEMM_WORKLOAD = REPO_ROOT / "workloads" / "gemm-bf16-4096x7168x16384.yaml"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def topology_path() -> Path:
    return TOPOLOGY


@pytest.fixture(scope="session")
def gemm_workload_path() -> Path:
    return GEMM_WORKLOAD


@pytest.fixture(scope="session")
def _chip_mapping_pristine() -> dict:
    return yaml.safe_load(TOPOLOGY.read_text())


@pytest.fixture
def chip_mapping(_chip_mapping_pristine) -> dict:
    """The whole topology file as a mapping (``{"chip": {...}}``), safe to mutate."""
    return copy.deepcopy(_chip_mapping_pristine)


@pytest.fixture(scope="session")
def chip():
    return load_chip(TOPOLOGY)


@pytest.fixture
def write_yaml(tmp_path):
    def write(data, name: str = "topology.yaml") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        return path
    return write


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli():
    """Run the CLI in-process: ``cli("run", topo, work, "--json")`` -> CliResult."""
    from simnode.cli import main

    def run(*argv) -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in argv])
            except SystemExit as exc:           # argparse usage errors
                code = exc.code if isinstance(exc.code, int) else 1
        return CliResult(code, out.getvalue(), err.getvalue())
    return run


@pytest.fixture
def small_gemm(write_yaml):
    """A GEMM workload file of a small shape (fast to simulate): small_gemm(m=..., ...)."""
    def make(m: int = 256, n: int = 256, k: int = 512, dtype: str = "bf16",
             name: str = "gemm-small.yaml", **extra) -> Path:
        return write_yaml({"kind": "gemm", "m": m, "n": n, "k": k, "dtype": dtype, **extra}, name)
    return make


@pytest.fixture
def user_error():
    """Check a CLI result is a user mistake: exit 2, one ``simnode: error:`` line holding
    every needle, no traceback; ``nothing_ran`` also asserts nothing reached stdout."""
    def check(res: CliResult, *needles: str, nothing_ran: bool = False) -> None:
        assert res.code == 2, (res.code, res.out, res.err)
        lines = res.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("simnode: error:"), res.err
        for n in needles:
            assert n in lines[0], (n, lines[0])
        if nothing_ran:
            assert res.out == ""
    return check
