"""``--set KEY=VALUE``: parsing, application to raw mappings, and every bad override
rejected with a message naming the source, the key, the value and what was expected
(in-process and through the CLI: exit 2, one ``simnode: error:`` line, no traceback)."""

from __future__ import annotations

import pytest

from simnode.config.overrides import apply_overrides, parse_assignment
from simnode.errors import ConfigError
from simnode.workloads.loader import load_inputs, split_sets


# -- parse_assignment ---------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("m=128", ("m", 128)),
    ("dtype=fp8", ("dtype", "fp8")),
    ("topology.chip.memory.hbm_bandwidth_GBps=5000.5", ("topology.chip.memory.hbm_bandwidth_GBps", 5000.5)),
    (" m =64", ("m", 64)),
    ("flag=true", ("flag", True)),
    ("name=a=b", ("name", "a=b")),
    ("empty=", ("empty", "")),
])
def test_parse_assignment_yaml_scalars(text, expected):
    assert parse_assignment(text) == expected


def test_parse_assignment_without_equals():
    with pytest.raises(ConfigError) as info:
        parse_assignment("foo")
    msg = str(info.value)
    assert msg == "--set: foo = 'foo': expected KEY=VALUE (for example m=128)."


def test_parse_assignment_empty_key():
    with pytest.raises(ConfigError, match="a non-empty KEY before '='"):
        parse_assignment("=3")


def test_split_sets_routes_topology_keys():
    work, topo = split_sets(["m=1", "topology.chip.num_ai_cores=4", "dtype=fp8"])
    assert work == {"m": 1, "dtype": "fp8"}
    assert topo == {"chip.num_ai_cores": 4}


# -- apply_overrides ----------------------------------------------------------------------

def test_apply_overrides_copies_and_sets_nested():
    data = {"a": 1, "b": {"c": 2, "d": {"e": 3}}}
    out = apply_overrides(data, {"a": 10, "b.d.e": 30}, "--set")
    assert out == {"a": 10, "b": {"c": 2, "d": {"e": 30}}}
    assert data == {"a": 1, "b": {"c": 2, "d": {"e": 3}}}      # input untouched


def test_apply_overrides_extra_keys_allow_optional_fields():
    out = apply_overrides({"m": 1}, {"block_m": 64}, "--set", extra_keys=("block_m",))
    assert out == {"m": 1, "block_m": 64}


def test_apply_overrides_unknown_key_did_you_mean():
    with pytest.raises(ConfigError) as info:
        apply_overrides({"b": {"bandwidth_GBps": 1}}, {"b.bandwidth_GBs": 2}, "--set")
    msg = str(info.value)
    assert msg.startswith("--set: b.bandwidth_GBs = 2: expected an existing key")
    assert "valid keys here: bandwidth_GBps" in msg
    assert "Did you mean 'bandwidth_GBps'?" in msg


def test_apply_overrides_through_a_scalar():
    with pytest.raises(ConfigError, match=r"m\.x = 1: expected 'm' to be a mapping"):
        apply_overrides({"m": 4}, {"m.x": 1}, "--set")


# -- load_inputs: types and ranges checked as for files -----------------------------------

def test_load_inputs_applies_both_kinds_of_override(topology_path, gemm_workload_path):
    inputs = load_inputs(topology_path, gemm_workload_path,
                         ["m=256", "dtype=fp8", "block_m=64",
                          "topology.chip.memory.hbm_bandwidth_GBps=5000"])
    assert inputs.params["m"] == 256 and inputs.params["dtype"] == "fp8"
    assert inputs.params["block_m"] == 64
    assert inputs.params["n"] == 7168                       # untouched
    assert inputs.topology.chip.memory.hbm_bandwidth_GBps == 5000.0
    assert "with --set overrides" in inputs.topology.source


# -- bad --set through the CLI ------------------------------------------------------------

BAD_SETS = {
    "unknown workload key": (["dtyp=fp8"],
                             ["--set: dtyp = 'fp8'", "expected an existing key", "Did you mean 'dtype'?"]),
    "unknown topology key": (["topology.chip.memory.hbm_bandwidth_GBs=5000"],
                             ["--set topology.*: chip.memory.hbm_bandwidth_GBs = 5000",
                              "expected an existing key", "Did you mean 'hbm_bandwidth_GBps'?"]),
    "unknown topology section": (["topology.chipp.num_ai_cores=4"],
                                 ["chipp = 4", "valid keys here: chip", "Did you mean 'chip'?"]),
    "wrong type": (["m=abc"], ["(with --set overrides): m = 'abc': expected an integer."]),
    "out of range": (["m=0"], ["(with --set overrides): m = 0: expected an integer >= 1."]),
    "bad choice": (["dtype=fp9"], ["dtype = 'fp9'", "one of 'bf16', 'fp16', 'fp8', 'fp4'",
                                   "Did you mean 'fp8'?"]),
    "topology out of range": (["topology.chip.num_ai_cores=0"],
                              ["ascend950dt.yaml (with --set overrides): chip.num_ai_cores = 0: "
                               "expected an integer >= 1."]),
    "topology wrong type": (["topology.chip.memory.hbm_bandwidth_GBps=fast"],
                            ["chip.memory.hbm_bandwidth_GBps = 'fast': expected a number."]),
    "malformed": (["foo"], ["--set: foo = 'foo': expected KEY=VALUE (for example m=128)."]),
}


@pytest.mark.parametrize("case", sorted(BAD_SETS))
def test_cli_bad_set(case, cli, topology_path, gemm_workload_path):
    sets, fragments = BAD_SETS[case]
    argv = ["run", topology_path, gemm_workload_path]
    for s in sets:
        argv += ["--set", s]
    res = cli(*argv)
    assert res.code == 2
    assert res.out == ""
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simnode: error: "), res.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in res.err


def test_cli_unknown_workload_kind(cli, topology_path, write_yaml):
    path = write_yaml({"kind": "gemmm", "m": 64, "n": 64, "k": 64}, "work.yaml")
    res = cli("run", topology_path, path)
    assert res.code == 2
    msg = res.err.strip()
    assert msg.startswith(f"simnode: error: {path}: kind = 'gemmm': expected one of ")
    assert "gemm" in msg.split("expected one of ")[1].split(".")[0].split(", ")
    assert msg.endswith("Did you mean 'gemm'?") and len(msg.splitlines()) == 1


def test_cli_unknown_workload_field_in_file(cli, topology_path, small_gemm):
    path = small_gemm(blockm=64)
    res = cli("run", topology_path, path)
    assert res.code == 2
    assert f"{path}: blockm = 64: expected no such key" in res.err
    assert "Did you mean 'block_m'?" in res.err


def test_cli_missing_required_workload_field(cli, topology_path, write_yaml):
    path = write_yaml({"kind": "gemm", "m": 64, "n": 64}, "work.yaml")
    res = cli("run", topology_path, path)
    assert res.code == 2
    assert f"{path}: k = '<missing>': expected this key to be present." in res.err


def test_cli_kind_override_is_not_silently_ignored(cli, topology_path, small_gemm):
    res = cli("run", topology_path, small_gemm(m=16, n=16, k=64), "--set", "kind=gemmm")
    assert res.code == 2 and res.out == ""
    assert res.err.startswith("simnode: error: --set: kind = 'gemmm': expected one of ")
    assert "Did you mean 'gemm'?" in res.err
