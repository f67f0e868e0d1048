"""docs/decode-step.md quotes runs: its generated blocks are docs/gen_decode_step.py's rendering
of docs/decode-step.json, and that JSON is what the runs print today (within 1%)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

_spec = importlib.util.spec_from_file_location("gen_decode_step", REPO_ROOT / "docs" / "gen_decode_step.py")
GEN = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GEN)
DATA = json.loads(GEN.DATA.read_text())


def test_every_generated_block_of_the_pages_is_rendered_from_the_json():
    names = []
    for page in GEN.PAGES:
        text = page.read_text()
        names += [m.group(2) for m in GEN.BLOCK.finditer(text)]
        assert GEN.render(text, DATA) == text, f"run python docs/gen_decode_step.py --render ({page.name} is stale)"
    assert sorted(names) == sorted(GEN.blocks(DATA)), "a block is missing from the pages, twice, or unknown"
    assert set(DATA) == set(GEN.RUNS)


def _close(got, want, path=""):
    if isinstance(want, dict):
        assert set(got) == set(want), path
        for k in want:
            _close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=0.01, abs_tol=1e-3), f"{path}: {got} vs {want}"
    else:
        assert got == want, path


@pytest.mark.parametrize("key", list(GEN.RUNS))
def test_each_quoted_run_prints_what_the_json_holds(key):
    _close(GEN.figures(GEN.run(GEN.RUNS[key])), DATA[key], key)
