"""Every input bounded: values far outside a parameter's range are one-paragraph errors
(exit 2, no traceback, no library warnings) within seconds, whichever command reads them
(run, sweep, validate, calibrate, describe), and extreme but legal values run cleanly.

The ranges come from the declarations (``simnode.config.params``: a declared min/max, else
the unit's ``UNIT_RANGES`` or ``INT_MAX``); sizes beyond them from each kind's size check.
"""

from __future__ import annotations

import time

import pytest

from simnode.config import params
from simnode.config.chip import ChipSpec
from simnode.config.supernode import SupernodeSpec
from simnode.workloads import registry

#: a refusal comes before any work: well within this on any machine
REFUSAL_S = 5.0

SN = "topologies/atlas950-supernode.yaml"
CHIP = "topologies/ascend950dt.yaml"


@pytest.fixture
def refused(cli, user_error, repo_root, monkeypatch):
    """Run the CLI from the repository root and check a quick one-paragraph refusal."""
    monkeypatch.chdir(repo_root)

    def check(*argv, needles=()):
        t0 = time.monotonic()
        res = cli(*argv)
        took = time.monotonic() - t0
        user_error(res, *needles)
        assert "Traceback" not in res.err and "Warning" not in res.err, res.err
        assert took < REFUSAL_S, (argv, took)
        return res
    return check


# -- the cases of a new user's trial ----------------------------------------------------------
@pytest.mark.parametrize("argv, needles", [
    (["run", SN, "workloads/moe-layer.yaml", "--set", "hidden=1e12", "--progress"],
     ["moe-layer.yaml", "hidden = 1000000000000", "<= 65536"]),
    (["run", SN, "workloads/moe-layer.yaml", "--set", "hidden=1e30"], ["hidden = 1e+30"]),
    (["run", SN, "workloads/deepep-normal.yaml", "--set", "hidden=1e30"], ["hidden = 1e+30"]),
    (["run", SN, "workloads/deepep-normal.yaml", "--set", "hidden=1e12"], ["hidden = 1000000000000"]),
    (["run", CHIP, "workloads/sparse-mla-prefill.yaml", "--set", "kv_len=1000000000000"],
     ["kv_len = 1000000000000", "2,147,483,647"]),
    (["run", SN, "workloads/transport-alltoall.yaml", "--set", "bytes_per_peer=1e30"],
     ["bytes_per_peer = 1e+30"]),
    (["run", SN, "workloads/deepep-normal.yaml", "--set", "topology.supernode.port_bandwidth_GBps=1e-9"],
     ["supernode.port_bandwidth_GBps = 1e-09", ">= 0.001"]),
    (["run", CHIP, "workloads/gemm-bf16-4096x7168x16384.yaml", "--set",
      "topology.chip.memory.hbm_bandwidth_GBps=1e308"], ["chip.memory.hbm_bandwidth_GBps = 1e+308", "<= 1e+06"]),
    # legal for DeepEP, too wide for the layer's expert-GEMM profiles: refused before any work
    (["run", SN, "workloads/moe-layer.yaml", "--set", "hidden=65536", "--set", "num_ranks=8"],
     ["hidden = 65536", "GEMM n of less than"]),
])
def test_out_of_range_inputs_are_refused_at_once(refused, argv, needles):
    refused(*argv, needles=needles)


@pytest.mark.parametrize("argv", [
    ["sweep", SN, "workloads/deepep-normal.yaml", "--set", "hidden=1e30", "--param", "num_ranks=8,16"],
    ["sweep", SN, "workloads/deepep-normal.yaml", "--set", "num_ranks=4", "--param", "hidden=7168,1e30"],
    ["validate", "--set", "hidden=1e30", "--only", "deepep-*"],
    ["regress", "--set", "hidden=1e30", "--only", "deepep-*"],
    ["describe", SN, "workloads/deepep-normal.yaml", "--set", "hidden=1e30"],
    ["calibrate", SN, "validation/published.yaml", "--only", "deepep-ep8-dispatch",
     "--fit", "topology.supernode.port_bandwidth_GBps=40:60", "--set", "hidden=1e30"],
])
def test_every_command_reads_through_the_same_check(refused, argv):
    refused(*argv, needles=["hidden = 1e+30", "<= 65536"])


def test_an_extreme_but_legal_value_runs_cleanly(cli, repo_root, monkeypatch):
    # a billion messages per peer is within the declared range: the run is a clean one
    monkeypatch.chdir(repo_root)
    res = cli("run", SN, "workloads/transport-alltoall.yaml", "--set", "messages_per_peer=1e9", "--json")
    assert res.code == 0, res.err
    assert "Warning" not in res.err and "Traceback" not in res.err


# -- the declarations ---------------------------------------------------------------------------
def _numeric():
    for cls, prefix in ((ChipSpec, "chip."), (SupernodeSpec, "supernode.")):
        for key, p in params.walk(cls, prefix):
            yield "topology." + key, p
    for name in registry.names():
        for f in registry.get_kind(name).fields:
            yield f"{name}.{f.name}", f


def test_every_numeric_parameter_has_a_finite_range():
    for key, p in _numeric():
        if p.type not in ("int", "number", "ints"):
            continue
        lo, hi = p.bounds
        assert hi is not None and hi < float("inf"), key
        if p.type in ("int", "ints"):
            assert hi <= params.INT_MAX, key
        if p.positive:
            assert lo is not None and lo > 0, key
        if p.default is not params.REQUIRED and p.type in ("int", "number") and not p.omitted:
            assert (lo is None or p.default >= lo or p.default == 0) and p.default <= hi, (key, p.default)


def test_describe_prints_the_range_a_value_is_held_to(cli, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    res = cli("describe", SN, "workloads/deepep-normal.yaml")
    assert res.code == 0, res.err
    row = next(line for line in res.out.splitlines() if line.lstrip().startswith("hidden "))
    assert "128..65536" in row, row
