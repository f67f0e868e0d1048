"""Pages whose figures are generated from runs: the skeleton every ``docs/gen_*.py`` shares.

A generator declares a ``Page``: its runs (id -> the ``simnode`` arguments of a ``run`` or
``sweep`` with ``--json``), ``figures(id, result)`` (what the pages quote of one run's JSON),
``blocks(data)`` (each generated block's text, by name, from every run's figures), the JSON
the figures are kept in and the pages that carry the blocks. On a page, a block is the text
between ``<!-- generated: NAME -->`` and ``<!-- end -->``.

``python docs/gen_X.py [RUN ...]`` reruns all runs (or those named) in this process (runs
that share kernel profiles share them, as a sweep does), writes the JSON and re-renders the
pages; ``--render`` only re-renders the pages from the JSON. tests/test_pages.py holds every
page to its JSON (``render`` leaves it unchanged) and the JSON to fresh runs (``close``).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- generated: ([\w-]+) -->\n)(.*?)(<!-- end -->)", re.S)
REL = 0.01                                  #: a figure may differ from a fresh run by 1%


@dataclass(frozen=True)
class Page:
    """A generator: the runs, what the pages quote of them, and how the blocks read."""
    script: Path                            #: the generator's file (docs/gen_*.py)
    data: Path                              #: the JSON of every run's figures
    pages: tuple[Path, ...]                 #: the pages with generated blocks
    runs: dict[str, list[str]]              #: run id -> simnode arguments (with --json)
    figures: Callable[[str, object], dict]  #: (run id, its --json result) -> quoted figures
    blocks: Callable[[dict], dict[str, str]]  #: every run's figures -> block name -> text
    #: runs too long for every test run (tens of seconds of CPU): tests/test_pages.py reruns
    #: them only with SIMNODE_PAGES=all (docs/testing.md)
    heavy: frozenset = frozenset()

    def load(self) -> dict:
        return json.loads(self.data.read_text()) if self.data.exists() else {}

    def measure(self, key: str) -> dict:
        return self.figures(key, run(self.runs[key]))


def command(verb: str, topology: str, workload: str, sets: dict, *extra: str) -> list[str]:
    """``simnode VERB TOPOLOGY WORKLOAD --json --set k=v ... EXTRA``."""
    args = [verb, topology, workload, "--json"]
    for k, v in sets.items():
        args += ["--set", f"{k}={v}"]
    return args + list(extra)


def run(args: list[str]):
    """The --json result of ``simnode ARGS``, run in this process."""
    from simnode.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    if code:
        raise SystemExit(f"simnode {' '.join(map(str, args))} exited {code}: {err.getvalue()}")
    return json.loads(out.getvalue())


def render(text: str, made: dict[str, str]) -> str:
    """``text`` with every generated block named in ``made`` replaced by its text there (a page
    may carry blocks of several generators)."""
    return BLOCK.sub(lambda m: m.group(1) + made[m.group(2)] + "\n" + m.group(4)
                     if m.group(2) in made else m.group(0), text)


def block_names(text: str) -> list[str]:
    return [m.group(2) for m in BLOCK.finditer(text)]


def close(got, want, path: str = "") -> None:
    """Assert ``got`` has ``want``'s shape, its floats within 1%, everything else equal."""
    if isinstance(want, dict):
        assert set(got) == set(want), path
        for k in want:
            close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            close(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=REL, abs_tol=1e-3), f"{path}: {got} vs {want}"
    else:
        assert got == want, path


def main(page: Page, argv: list[str]) -> int:
    only = set(argv) - {"--render"}
    data = page.load()
    if "--render" not in argv:
        for key, args in page.runs.items():
            if not only or key in only:
                print(f"{key}: simnode {' '.join(map(str, args))}", file=sys.stderr)
                data[key] = page.measure(key)
        page.data.write_text(json.dumps({k: data[k] for k in page.runs}, indent=1) + "\n")
    made = page.blocks(data)
    for path in page.pages:
        path.write_text(render(path.read_text(), made))
    return 0
