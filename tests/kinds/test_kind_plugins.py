"""Kinds are plug-ins: one module each, found by name (``simnode.workloads.registry``).

The toy supernode kind (``toy_ring.py`` beside this file) is plugged in through
``SIMNODE_KINDS`` and nothing else: it runs through the CLI, its --out folder reports, a
fresh process finds it by the variable alone. Names stay unique, an unknown name lists the
valid ones, and a run imports only its own kind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simnode.workloads import registry

HERE = Path(__file__).resolve().parent
TOY = HERE / "toy_ring.py"
REPO = HERE.parents[1]
SUPERNODE = REPO / "topologies" / "atlas950-supernode.yaml"
CHIP = REPO / "topologies" / "ascend950dt.yaml"


@pytest.fixture
def plug(monkeypatch):
    """plug(*modules): name kind modules in SIMNODE_KINDS for this test; the kinds it
    registers and the modules it imports from files are forgotten after it."""
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    before = set(sys.modules)

    def plug(*modules):
        monkeypatch.setenv(registry.PLUGINS_VARIABLE, ",".join(str(m) for m in modules))
    yield plug
    for name in set(sys.modules) - before:
        if name.startswith("simnode_kind_"):
            del sys.modules[name]


@pytest.fixture
def toy_workload(write_yaml):
    return write_yaml({"kind": "toy_ring", "num_ranks": 8, "messages": 3}, "toy.yaml")


def test_a_plugged_in_kind_runs_and_its_out_folder_reports(plug, cli, toy_workload, tmp_path):
    plug(TOY)
    res = cli("run", SUPERNODE, toy_workload, "--json")
    assert res.code == 0, res.err
    r = json.loads(res.out)
    assert (r["kind"], r["num_ranks"], r["ring_messages_sent"]) == ("toy_ring", 8, 24)
    assert r["roofline_ns"] <= r["makespan_ns"] and r["bottleneck"].startswith("link ")
    out = tmp_path / "out"
    assert cli("run", SUPERNODE, toy_workload, "--set", "num_ranks=16", "--out", out).code == 0
    series = json.loads((out / "series.json").read_text())
    assert [s["name"] for s in series] == ["link_util"] and series[0]["kernel"] == "ring"
    res = cli("report", out)
    assert res.code == 0, res.err
    page = (out / "report.html").read_text()
    assert "toy_ring" in page and "<img" in page


def test_a_fresh_process_finds_a_kind_by_the_variable_alone(toy_workload):
    """A dotted module name importable from sys.path: the toy's folder on PYTHONPATH."""
    env = {**os.environ, registry.PLUGINS_VARIABLE: "toy_ring",
           "PYTHONPATH": os.pathsep.join(filter(None, (str(HERE), os.environ.get("PYTHONPATH"))))}
    proc = subprocess.run([sys.executable, "-m", "simnode", "run", str(SUPERNODE), str(toy_workload),
                           "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["kind"] == "toy_ring"


def test_a_run_imports_only_its_own_kind(small_gemm):
    code = ("import sys; from simnode.workloads.loader import load_inputs; "
            f"load_inputs({str(CHIP)!r}, {str(small_gemm())!r}); "
            "print(sorted(m for m in sys.modules if m.startswith('simnode.workloads.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != registry.PLUGINS_VARIABLE})
    assert proc.returncode == 0, proc.stderr
    loaded = eval(proc.stdout)
    assert [m for m in loaded if m.startswith("simnode.workloads.kinds.")] == ["simnode.workloads.kinds.gemm"]


def test_names_lists_every_kind_without_importing_one(plug, tmp_path):
    unseen = tmp_path / "unseen_kind.py"
    unseen.write_text("raise RuntimeError('imported')\n")
    plug(unseen)
    names = registry.names()
    assert {"gemm", "sparse_mla", "tile", "deepep", "transport", "unseen_kind"} <= set(names)
    assert names == sorted(names) and "simnode_kind_unseen_kind" not in sys.modules


def test_an_unknown_kind_lists_the_valid_ones_plug_ins_too(plug, cli, user_error, write_yaml):
    plug(TOY)
    res = cli("run", SUPERNODE, write_yaml({"kind": "toy_rng"}, "w.yaml"))
    user_error(res, "kind = 'toy_rng': expected one of chakra, decode_step, deepep, ", "toy_ring", "Did you mean 'toy_ring'?",
               nothing_ran=True)


def _toy_as(path: Path, kind_name: str = "toy_ring") -> Path:
    """The toy's module at ``path``, its KIND named ``kind_name``."""
    path.write_text(TOY.read_text().replace('WorkloadKind("toy_ring"', f'WorkloadKind("{kind_name}"'))
    return path


@pytest.mark.parametrize("case, kind, expected", [
    ("named like simnode's", "gemm",
     "SIMNODE_KINDS environment variable: gemm = '{tmp}/gemm.py': expected a kind name simnode "
     "does not have already (simnode.workloads.kinds.gemm is the kind 'gemm')"),
    ("two of one name", "toy_ring",
     "SIMNODE_KINDS environment variable: toy_ring = '{tmp}/toy_ring.py': expected one module per "
     "kind name ({toy} is a kind 'toy_ring' too)"),
    ("KIND named otherwise", "toy_ring",
     "{tmp}/toy_ring.py: KIND = \"a kind named 'ring'\": expected a WorkloadKind named 'toy_ring' "
     "(a kind's name is its module's name)"),
    ("no such module", "module",
     "SIMNODE_KINDS environment variable: (top level) = 'no_such.module': expected a module "
     "importable from sys.path"),
    ("no such file", "missing",
     "SIMNODE_KINDS environment variable: (top level) = 'missing.py': expected an existing Python "
     "file (.py)"),
])
def test_a_plug_in_that_cannot_be_a_kind_is_refused(plug, cli, user_error, write_yaml, tmp_path,
                                                    case, kind, expected):
    plug(*{"named like simnode's": lambda: [_toy_as(tmp_path / "gemm.py", "gemm")],
           "two of one name": lambda: [TOY, _toy_as(tmp_path / "toy_ring.py")],
           "KIND named otherwise": lambda: [_toy_as(tmp_path / "toy_ring.py", "ring")],
           "no such module": lambda: ["no_such.module"],
           "no such file": lambda: ["missing.py"]}[case]())
    res = cli("run", SUPERNODE, write_yaml({"kind": kind}, "w.yaml"))
    user_error(res, expected.format(tmp=tmp_path, toy=TOY), nothing_ran=True)


def test_a_second_kind_of_one_name_is_refused():
    gemm = registry.get_kind("gemm")
    with pytest.raises(ValueError, match="workload kind 'gemm' registered twice"):
        registry.register(registry.WorkloadKind("gemm", (), gemm.run))
