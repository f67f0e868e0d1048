"""The README and docs/ are a map that stays true: every figure they quote from a command is
checked here against a fresh run, and every page, link, path and table they promise exists.

- A fenced block whose first line starts with ``$ simnode`` is a quoted run: each ``$`` command
  is run (in the repository root, or beside the files its page defines in blocks headed
  ``# NAME.py`` / ``# NAME.yaml``), and each quoted output line must appear in its output, in
  order (``...`` skips lines), numbers within 1% and the words exact.
- The validation tables (docs/validation.md: every case of validation/published.yaml; the
  README's ten lines) are held to one ``simnode validate --json`` run: published value,
  tolerance, status and source exact, model within 1%, each error consistent with its row.
- docs/architecture.md's layer table names the layers of tests/test_layers.py's ``LAYERS``,
  in order, with the same packages; docs/benchmarks.md's table the rows of
  benchmarks/process.py; docs/calibration.md every fitted value of topologies/calibrated/.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README] + sorted(DOCS.glob("*.md"))
REL = 0.01                          #: a quoted figure may differ from the run by 1%

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- reading the pages ----------------------------------------------------------------------

@dataclass
class Block:
    page: Path
    line: int                       #: 1-based line of the opening fence
    lang: str
    lines: list[str]


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a page (indented ones too, as in a list item)."""
    out, current = [], None
    for n, line in enumerate(page.read_text().splitlines(), 1):
        stripped = line.strip()
        if current is None:
            if stripped.startswith("```"):
                current = Block(page, n, stripped[3:].strip(), [])
                indent = len(line) - len(line.lstrip())
        elif stripped.startswith("```"):
            out.append(current)
            current = None
        else:
            current.lines.append(line[indent:] if line[:indent].strip() == "" else line)
    return out


def page_files(page: Path) -> dict[str, str]:
    """Files a page defines: a block whose first line is ``# NAME.py`` or ``# NAME.yaml``."""
    files = {}
    for b in blocks(page):
        m = re.fullmatch(r"# ([\w.-]+\.(?:py|yaml))", b.lines[0].strip()) if b.lines else None
        if m:
            files[m.group(1)] = "\n".join(b.lines) + "\n"
    return files


@dataclass
class Quoted:
    page: Path
    line: int
    command: str
    expected: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{rel(self.page)}:{self.line}"


def quoted_runs(page: Path) -> list[Quoted]:
    """Every ``$ simnode ...`` command of the page's quoted-run blocks, with its quoted output."""
    out = []
    for b in blocks(page):
        if not b.lines or not b.lines[0].startswith("$ simnode"):
            continue
        current, continued = None, False
        for i, line in enumerate(b.lines):
            if line.startswith("$ "):
                current = Quoted(page, b.line + 1 + i, line[2:].rstrip("\\").strip())
                continued = line.rstrip().endswith("\\")
                out.append(current)
            elif continued:
                current.command += " " + line.rstrip("\\").strip()
                continued = line.rstrip().endswith("\\")
            elif line.strip() and line.strip() != "...":
                current.expected.append(line.rstrip())
    return out


def skeleton(line: str) -> tuple[str, list[str]]:
    """A line's words (runs of spaces as one) and its numbers, apart."""
    return " ".join(NUMBER.sub("#", line).split()), NUMBER.findall(line)


def close(quoted: str, now: str) -> bool:
    """A quoted number against the run's: equal, or within 1% (or one unit of its last digit)."""
    if quoted == now:
        return True
    q, n = float(quoted), float(now)
    ulp = 10.0 ** -len(quoted.split(".")[1]) if "." in quoted and "e" not in quoted.lower() else 0.0
    return abs(q - n) <= max(REL * abs(n), ulp)


def line_matches(quoted: str, now: str) -> bool:
    (qs, qn), (ns, nn) = skeleton(quoted), skeleton(now)
    return qs == ns and len(qn) == len(nn) and all(close(a, b) for a, b in zip(qn, nn))


def missing_lines(expected: list[str], output: list[str]) -> list[str]:
    """The quoted lines not found in the output, in order."""
    missing, at = [], 0
    for want in expected:
        for j in range(at, len(output)):
            if line_matches(want, output[j]):
                at = j + 1
                break
        else:
            missing.append(want)
    return missing


def links(page: Path) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", page.read_text())


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The cells of each row of the first markdown table whose header starts ``header_start``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def backticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


# -- the front door -------------------------------------------------------------------------

DEMO = ("python3 -m venv .venv && . .venv/bin/activate && pip install -q -e . && simnode run "
        "topologies/ascend950dt.yaml workloads/gemm-bf16-4096x7168x16384.yaml")


def test_readme_is_a_front_door_under_300_lines_with_both_quick_start_commands():
    text = README.read_text()
    assert len(text.splitlines()) < 300
    assert f"```\n{DEMO}\n```" in text
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert f"```\n{ci}\n```" in text           # the test command: exactly what CI runs


def test_every_docs_page_is_linked_from_the_readme():
    linked = {link.split("#")[0] for link in links(README)}
    assert {f"docs/{p.name}" for p in DOCS.glob("*.md")} <= linked


def test_every_relative_link_resolves():
    broken = [f"{rel(p)}: {link}" for p in PAGES for link in links(p)
              if not re.match(r"[a-z]+://", link) and not link.startswith("#")
              and not (p.parent / link.split("#")[0]).exists()]
    assert broken == []


def test_every_picture_in_docs_is_shown_on_a_page():
    shown = {(p.parent / link).resolve() for p in PAGES for link in links(p)}
    assert [rel(png) for png in sorted(DOCS.glob("*.png")) if png.resolve() not in shown] == []


REPO_PATH = re.compile(r"(?<![\w/.-])((?:simnode|tests|topologies|workloads|validation|traces|benchmarks|docs)"
                       r"/[\w./-]*[\w/])")


#: pages about outside sources: their `docs/...` and `tests/...` may be other repositories'
CITING = {"sources.md", "sparse-mla-vf.md"}


def test_every_repository_path_the_pages_name_exists():
    named = {(rel(p), m.group(1)) for p in PAGES for m in REPO_PATH.finditer(p.read_text())
             if p.name not in CITING or not m.group(1).startswith(("docs/", "tests/"))}
    assert sorted(f"{page}: {path}" for page, path in named if not (ROOT / path).exists()) == []


# -- quoted runs ----------------------------------------------------------------------------

QUOTED = [q for p in PAGES for q in quoted_runs(p)]


def test_the_pages_quote_runs():
    assert len(QUOTED) >= 10 and all(q.expected for q in QUOTED)


@pytest.mark.parametrize("quoted", QUOTED, ids=[q.id for q in QUOTED])
def test_a_quoted_run_prints_what_the_page_says(quoted, tmp_path):
    argv = shlex.split(quoted.command)
    assert argv[0] == "simnode"
    files, cwd = page_files(quoted.page), ROOT
    if files:                       # the page's own files, beside the repository's folders
        cwd = tmp_path
        for name in ("topologies", "workloads", "validation", "traces", "tests"):
            (tmp_path / name).symlink_to(ROOT / name)
        for name, text in files.items():
            (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMNODE_")}
    run = subprocess.run([sys.executable, "-m", "simnode", *argv[1:]], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode in (0, 1), run.stderr          # validate: 1 when a check fails
    assert "Traceback" not in run.stderr, run.stderr
    assert missing_lines(quoted.expected, run.stdout.splitlines()) == [], run.stdout


#: pages whose prose states no run time: how long a run takes is the run's own estimate (a
#: long run announces it), not a guess that goes stale with the machine and the code
NO_RUN_TIMES = [README, DOCS / "model.md", DOCS / "moe-layer.md", DOCS / "calibration.md",
                DOCS / "architecture.md", DOCS / "testing.md", DOCS / "chakra.md", DOCS / "low-latency.md",
                DOCS / "moe-layer-decode.md"]
RUN_TIME = re.compile(r"(?:~|about |takes |\d\s*(?:-\s*\d+\s*)?)(?:\d+(?:\.\d+)?\s*)?"
                      r"(?:s|seconds?|minutes?|hours?)\b(?! of (?:CPU|one core))|a few (?:seconds|minutes)|"
                      r"tens of (?:seconds|minutes)")


def prose(page: Path) -> list[tuple[int, str]]:
    """(line number, text) of a page's prose: outside fenced blocks and tables."""
    out, fenced = [], False
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if line.strip().startswith("```"):
            fenced = not fenced
        elif not fenced and not line.lstrip().startswith("|"):
            out.append((n, line))
    return out


@pytest.mark.parametrize("page", NO_RUN_TIMES, ids=[rel(p) for p in NO_RUN_TIMES])
def test_the_page_states_no_run_time(page):
    assert [f"{n}: {line}" for n, line in prose(page) if RUN_TIME.search(line)] == []


# -- validation tables ----------------------------------------------------------------------

CASES = {c["id"]: c for c in yaml.safe_load((ROOT / "validation" / "published.yaml").read_text())["cases"]}


@pytest.fixture(scope="module")
def validate() -> dict:
    """One `simnode validate --json` run of every case (a minute or two on two cores)."""
    run = subprocess.run([sys.executable, "-m", "simnode", "validate", "--json", "--jobs", "2"],
                         cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert run.returncode in (0, 1), run.stderr
    return {row["id"]: row for row in json.loads(run.stdout)["cases"]} | {"": json.loads(run.stdout)}


def percent(cell: str) -> float:
    return float(cell.rstrip("%"))


def check_row(case_id: str, published: str, model: str, error: str, validate: dict) -> None:
    run, case = validate[case_id], CASES[case_id]
    assert float(published) == case["published"], case_id
    assert float(model) == pytest.approx(run["model"], rel=REL, abs=0.05), case_id
    # the error is the row's own: model against published, to the printed digit
    assert percent(error) == pytest.approx(100 * (float(model) / case["published"] - 1), abs=0.15), case_id


def test_the_validation_page_lists_every_case_as_validate_runs_it(validate):
    rows = table_rows((DOCS / "validation.md").read_text(), "| case | metric |")
    ids = [backticked(r[0])[0] for r in rows]
    assert ids == list(CASES)
    for (cid, metric, published, model, error, tolerance, within, source) in (
            [backticked(r[0])[0]] + r[1:] for r in rows):
        check_row(cid, published, model, error, validate)
        run = validate[cid]
        assert metric == run["metric"] and percent(tolerance) == pytest.approx(100 * CASES[cid]["tolerance"])
        assert within == ("fit" if run["within"] is None else "yes" if run["within"] else "NO"), cid
        assert source == CASES[cid]["source"]
    summary = validate[""]
    line = (f"mean |error| {100 * summary['mean_abs_error_frac']:.1f}%, max |error| "
            f"{100 * summary['max_abs_error_frac']:.1f}%, {summary['within']} of {summary['total']} "
            "within tolerance")
    assert missing_lines([line], (DOCS / "validation.md").read_text().splitlines()) == []


def test_the_readme_validation_table_is_ten_lines_of_validate(validate):
    text = README.read_text()
    rows = table_rows(text, "| case | published | model | error |")
    assert len(rows) + 2 == 10
    for cells in rows:
        check_row(backticked(cells[0])[0], *cells[1:4], validate)


def test_the_sparse_mla_summary_is_validate_s(validate):
    checks = [r for cid, r in validate.items() if cid.startswith("sparse-mla-") and r["within"] is not None]
    errors = [abs(r["error_frac"]) for r in checks]
    line = (f"mean |error| {100 * sum(errors) / len(errors):.1f}%, max |error| {100 * max(errors):.1f}%, "
            f"{sum(r['within'] for r in checks)} of {len(checks)} within tolerance")
    text = (DOCS / "sparse-mla-vf.md").read_text()
    quoted = re.search(r"mean \|error\| [^\"]*within tolerance", text).group(0)
    assert line_matches(quoted, line), (quoted, line)


# -- tables that mirror code ----------------------------------------------------------------

def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)       # (dataclasses look their module up)
    spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def test_the_layer_table_is_test_layers_s():
    layers = _module("layers_under_docs", ROOT / "tests" / "test_layers.py").LAYERS
    rows = table_rows((DOCS / "architecture.md").read_text(), "| layer | packages |")
    assert [r[0] for r in rows] == [layer[0] for layer in layers]        # (name, prefixes, ...)
    for layer, row in zip(layers, rows):
        assert set(backticked(row[1])) == set(layer[1]), layer[0]


def test_the_benchmarks_table_is_process_rows():
    rows_ = _module("bench_process", ROOT / "benchmarks" / "process.py").ROWS
    rows = table_rows((DOCS / "benchmarks.md").read_text(), "| row | command")
    assert [backticked(r[0])[0] for r in rows] == list(rows_)
    for cells in rows:
        row = rows_[backticked(cells[0])[0]]
        assert ("(on demand)" in cells[0]) == row.on_demand, row.name
        target = ("time stated" if math.isinf(row.target_s) else f"{row.target_s:g} s") + (
            f", {row.target_MiB:g} MiB" if row.target_MiB else "")
        assert cells[2] == target, row.name
        command, argv = backticked(cells[1])[0], " ".join(row.argv[2:])
        assert (argv.endswith(command[4:]) if command.startswith("... ") else argv == command), row.name


def test_every_fitted_value_is_on_the_calibration_page():
    rows = table_rows((DOCS / "calibration.md").read_text(), "| overlay | fitted on |")
    by_file = {backticked(r[0])[0]: r[2] for r in rows}
    overlays = [p for p in sorted((ROOT / "topologies" / "calibrated").glob("*.yaml"))
                if "values" in yaml.safe_load(p.read_text())]
    assert sorted(by_file) == [p.name for p in overlays]
    for path in overlays:
        data, cell = yaml.safe_load(path.read_text()), by_file[path.name]
        intervals = data["fit"].get("intervals") or {}
        for key, value in data["values"].items():
            assert f"`{key.split('.')[-1]}` {value:g}" in cell, (path.name, key)
            if intervals.get(key):
                lo, hi = intervals[key]
                assert f"{value:g} ({lo:g} .. {hi:g})" in cell, (path.name, key)


def test_the_fuzz_profiles_table_is_test_fuzz_s():
    import ast
    tree = ast.parse((ROOT / "tests" / "test_fuzz.py").read_text())
    profiles = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                    and getattr(node.targets[0], "id", "") == "PROFILES")
    rows = table_rows((DOCS / "testing.md").read_text(), "| profile | draws per kind |")
    assert [backticked(r[0])[0] for r in rows] == list(profiles)
    for cells in rows:
        draws, limit_s = profiles[backticked(cells[0])[0]]
        assert (NUMBER.findall(cells[1])[0], cells[2]) == (str(draws), f"{limit_s} s"), cells[0]
