"""Fixtures for the tile-program tests.

- ``build(path_or_source, keep_meta=False, **params)``: a program file (a path, or program
  source text written to a temporary file) built on the 950DT chip; returns the Builder.
- ``lower(builder)``: its KernelSchedule (manual programs verified first).
- ``program_file(source, name)``: writes program source into tmp_path, returns its path.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from simnode.tile import lower as _lower
from simnode.tile import program

@pytest.fixture
def program_file(tmp_path):
    def write(source: str, name: str = "prog.py") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source).lstrip())
        return path
    return write


@pytest.fixture
def build(chip, program_file):
    def run(path_or_source, keep_meta=False, chip_spec=None, **params):
        path = Path(path_or_source) if isinstance(path_or_source, Path) else program_file(path_or_source)
        spec = program.load(path, "test")
        return program.build(spec, chip_spec or chip, params, keep_meta)
    return run


@pytest.fixture
def lower():
    return lambda b, name="test": _lower.to_schedule(b, name)
