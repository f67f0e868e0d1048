"""The ``tile`` workload kind from the command line: a user's program from a file outside
the package runs with ``simnode run``, sweeps with ``simnode sweep``, and its ``--out``
folder makes a ``simnode report`` page like any kind's; the program's parameters are
fields (``--set`` reaches them, a typo lists them); every mistake is one line naming the
file (and the program line), exit 2. (The example of docs/tile-programs.md runs as printed:
tests/test_docs.py.)"""

from __future__ import annotations

import json

import pytest

USER_PROGRAM = '''
import simnode.tile.lang as T


@T.program
def double(n: int = 2097152, block: int = 4096, stages: int = T.param(2, "UB stages", min=1)):
    x = T.tensor("x", (n,), "fp32")
    y = T.tensor("y", (n,), "fp32")
    cores = T.num_vector_cores()
    for core in T.Kernel(cores, vector=True):
        a = T.alloc_ub((block,), "fp32")
        b = T.alloc_ub((block,), "fp32", versions=stages)
        for t in T.Persistent(T.ceildiv(n, block), cores, core, num_stages=stages):
            T.copy(x[t * block:(t + 1) * block], a)
            T.mul(b, a, 2.0)
            T.copy(b, y[t * block:(t + 1) * block])
'''


@pytest.fixture
def user_workload(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "double.py").write_text(USER_PROGRAM.lstrip())
    work = folder / "double.yaml"
    work.write_text("kind: tile\nprogram: double.py\nn: 2097152\n")
    return work


def test_a_users_program_runs_sweeps_and_reports(cli, topology_path, user_workload, tmp_path):
    res = cli("run", topology_path, user_workload, "--json")
    assert res.code == 0, res.err
    r = json.loads(res.out)
    assert (r["kind"], r["workload"], r["program"]) == ("tile", "double", "double")
    assert r["hbm_unique_bytes"] == 2 * 2097152 * 4
    assert r["makespan_ns"] >= r["roofline_ns"] > 0
    sweep = cli("sweep", topology_path, user_workload, "--param", "stages=1,2", "--jobs", "1")
    assert sweep.code == 0, sweep.err
    lines = sweep.out.strip().splitlines()
    assert lines[0].split()[:2] == ["stages", "makespan_us"] and "achieved_GBps" in lines[0]
    assert float(lines[2].split()[1]) < float(lines[1].split()[1])    # two stages overlap
    out = tmp_path / "run"
    assert cli("run", topology_path, user_workload, "--out", out).code == 0
    rep = cli("report", out)
    assert rep.code == 0, rep.err
    page = (out / "report.html").read_text()
    assert "double" in page and "tile" in page and r["bottleneck"] in page


def test_the_program_path_is_relative_to_the_workload_file(cli, topology_path, user_workload,
                                                          tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)            # the workload's folder is not the current one
    assert cli("run", topology_path, user_workload).code == 0
    # with --set, a relative path is the current folder's, as every command-line path
    res = cli("run", topology_path, user_workload, "--set", "program=mine/double.py", "--json")
    assert res.code == 0, res.err


def test_program_parameters_are_fields(cli, user_error, topology_path, user_workload):
    user_error(cli("run", topology_path, user_workload, "--set", "stage=3"),
               "--set: stage = 3: expected an existing key; valid keys here:", "stages",
               "Did you mean 'stages'?", nothing_ran=True)
    user_error(cli("run", topology_path, user_workload, "--set", "stages=0"),
               "stages = 0: expected an integer >= 1", nothing_ran=True)
    user_error(cli("run", topology_path, user_workload, "--set", "block=3000"),
               "double.py:13: x[... 2097000:2100000 ...] on dimension 0 lies outside its shape [2097152]: a shape that does not tile", nothing_ran=True)


@pytest.mark.parametrize("program,needles", [
    ("missing.py", ["program = ", "missing.py", "expected an existing Python file (.py)"]),
    ("bad.py", ["bad.py:3: invalid syntax"]),
])
def test_a_program_that_cannot_load_is_named(cli, user_error, topology_path, tmp_path, program, needles):
    (tmp_path / "bad.py").write_text("import simnode.tile.lang as T\n\ndef k(:\n")
    work = tmp_path / "w.yaml"
    work.write_text(f"kind: tile\nprogram: {program}\n")
    user_error(cli("run", topology_path, work), *needles, nothing_ran=True)


def test_a_program_error_names_its_line_through_the_cli(cli, user_error, topology_path, tmp_path):
    (tmp_path / "over.py").write_text(
        "import simnode.tile.lang as T\n\n\n@T.program\ndef k():\n"
        "    for c in T.Kernel(1, vector=True):\n        u = T.alloc_ub((128, 1024), 'fp32')\n")
    work = tmp_path / "w.yaml"
    work.write_text("kind: tile\nprogram: over.py\n")
    user_error(cli("run", topology_path, work), "over.py:7: UB of aiv0 overflows", nothing_ran=True)
    user_error(cli("schedule", topology_path, work), "over.py:7: UB of aiv0 overflows")
