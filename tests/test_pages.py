"""Pages generated from runs (docs/pagegen.py): each generated block of a page is its
generator's rendering of the generator's JSON, and that JSON is what the runs print today
(floats within 1%). One test per generator for the pages, one per run for the figures."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: the generators (docs/gen_validation.py prints a table to paste instead; tests/test_docs.py
#: holds that table to `simnode validate`)
NAMES = ("gen_decode_step", "gen_moe_decode", "gen_low_latency")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.GENERATOR


GENERATORS = {name: _load(name) for name in NAMES}
sys.path.insert(0, str(DOCS))
import pagegen  # noqa: E402


@pytest.mark.parametrize("name", NAMES)
def test_every_generated_block_of_the_pages_is_rendered_from_the_json(name):
    gen = GENERATORS[name]
    data = gen.load()
    assert set(data) == set(gen.runs), f"{gen.data.name} does not hold every run"
    made = gen.blocks(data)
    names = [b for page in gen.pages for b in pagegen.block_names(page.read_text()) if b in made]
    assert sorted(names) == sorted(made), "a block is missing from the pages or there twice"
    for page in gen.pages:
        text = page.read_text()
        assert pagegen.render(text, made) == text, \
            f"run python docs/{name}.py --render ({page.relative_to(ROOT)} is stale)"


def test_every_generated_block_has_one_generator():
    owners: dict[str, list[str]] = {}
    for name, gen in GENERATORS.items():
        for block in gen.blocks(gen.load()):
            owners.setdefault(block, []).append(name)
    on_pages = {b for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
                for b in pagegen.block_names(page.read_text())}
    assert {b: o for b, o in owners.items() if len(o) > 1} == {}
    assert sorted(on_pages - set(owners)) == [], "a block no generator renders"


RUNS = [(name, key) for name, gen in GENERATORS.items() for key in gen.runs]


@pytest.mark.parametrize("name,key", RUNS, ids=[f"{n}:{k}" for n, k in RUNS])
def test_each_quoted_run_prints_what_the_json_holds(name, key):
    gen = GENERATORS[name]
    if key in gen.heavy and os.environ.get("SIMNODE_PAGES") != "all":
        pytest.skip(f"{key} is a heavy run: SIMNODE_PAGES=all reruns it (docs/testing.md)")
    pagegen.close(gen.measure(key), gen.load()[key], key)
