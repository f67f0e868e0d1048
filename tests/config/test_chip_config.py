"""Chip and topology files: the shipped 950DT loads with its sourced numbers, and every
kind of bad file is rejected with a message naming the file, the key path, the value
and what was expected -- from the loaders and from the CLI (exit 2, one line, no
traceback)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from simnode.config.chip import PATH_NAMES, load_chip
from simnode.config.topology import load_topology
from simnode.errors import ConfigError


# -- the shipped file --------------------------------------------------------------------

def test_shipped_chip_loads_with_its_numbers(chip, topology_path):
    assert chip.name == "ascend950dt"
    assert chip.source == str(topology_path)
    assert chip.num_ai_cores == 32 and chip.aiv_per_core == 2
    assert chip.aic_freq_GHz == 1.65
    assert dict(chip.cube.macs_per_cycle) == {"bf16": 4096, "fp16": 4096, "fp8": 8192, "fp4": 16384,
                                              "fp32": 256, "hf32": 512}
    assert chip.cube.fractal_k("bf16") == 16 and chip.cube.fractal_k("fp4") == 64
    assert set(chip.paths) == set(PATH_NAMES)
    assert chip.path("gm_to_l1").min_issue_interval_cycles == 64
    assert chip.path("gm_to_ub").min_issue_interval_cycles == 10    # descriptor-limited below 512 B
    assert chip.path("ub_to_l1").min_issue_interval_cycles == 0     # default when absent
    assert chip.buffers.capacity_bytes("l1") == 512 * 1024
    assert chip.memory.l2_capacity_bytes == 128 * 1024 * 1024
    assert chip.sync.mte2_outstanding_per_aiv == 16


def test_peak_tflops_by_dtype(chip):
    # 2 FLOP/MAC x MACs/cycle x 1.65 GHz x 32 cores (facts 1.2)
    assert chip.peak_tflops("bf16") == pytest.approx(2 * 4096 * 1.65 * 32 / 1000)
    assert chip.peak_tflops("bf16") == pytest.approx(432.5376)
    assert chip.peak_tflops("fp8") == pytest.approx(865.0752)
    assert chip.peak_tflops("fp4") == pytest.approx(1730.1504)


def test_spec_is_frozen(chip):
    with pytest.raises(Exception):
        chip.num_ai_cores = 64
    with pytest.raises(TypeError):
        chip.cube.macs_per_cycle["bf16"] = 1


def test_topology_with_chip_reference_resolves(tmp_path, topology_path):
    (tmp_path / "ascend950dt.yaml").write_text(topology_path.read_text())
    ref = tmp_path / "node.yaml"
    ref.write_text("chip: ascend950dt\n")
    topo = load_topology(ref)
    assert topo.chip.name == "ascend950dt"
    assert topo.num_ranks == 1 and topo.supernode is None


# -- bad files: each error names file, key path, value and expectation ------------------

def _set(path, value):
    def mutate(data):
        node = data
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
    return mutate


def _delete(path):
    def mutate(data):
        node = data
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]
    return mutate


BAD_CHIPS = {
    "unknown key": (_set(("chip", "cube", "mmad_latency_cyles"), 8),
                    ["chip.cube.mmad_latency_cyles", "= 8", "no such key",
                     "Did you mean 'mmad_latency_cycles'?"]),
    "unknown top-level key": (_set(("chips",), {}),
                              ["chips", "no such key", "valid keys here: chip", "Did you mean 'chip'?"]),
    "missing key": (_delete(("chip", "memory", "hbm_bandwidth_GBps")),
                    ["chip.memory.hbm_bandwidth_GBps", "'<missing>'", "expected this key to be present"]),
    "missing path": (_delete(("chip", "paths", "l1_to_l0")),
                     ["chip.paths.l1_to_l0", "'<missing>'", "expected this key to be present"]),
    "wrong type": (_set(("chip", "num_ai_cores"), "many"),
                   ["chip.num_ai_cores", "'many'", "expected an integer"]),
    "wrong type, number": (_set(("chip", "memory", "l2_bandwidth_GBps"), "fast"),
                           ["chip.memory.l2_bandwidth_GBps", "'fast'", "expected a number"]),
    "bool is not a number": (_set(("chip", "aic_freq_GHz"), True),
                             ["chip.aic_freq_GHz", "True", "expected a number"]),
    "negative bandwidth": (_set(("chip", "memory", "hbm_bandwidth_GBps"), -3500),
                           ["chip.memory.hbm_bandwidth_GBps", "= -3500", "a number greater than 0"]),
    "negative path bandwidth": (_set(("chip", "paths", "gm_to_l1", "bandwidth_B_per_cycle"), -1),
                                ["chip.paths.gm_to_l1.bandwidth_B_per_cycle", "= -1",
                                 "a number greater than 0"]),
    "unknown HBM arbitration": (_set(("chip", "memory", "hbm_arbitration"), "priority"),
                                ["chip.memory.hbm_arbitration", "'priority'", "'fcfs'", "'fair'"]),
    "zero cores": (_set(("chip", "num_ai_cores"), 0),
                   ["chip.num_ai_cores", "= 0", "an integer >= 1"]),
    "three AIVs": (_set(("chip", "aiv_per_core"), 3),
                   ["chip.aiv_per_core", "= 3", "an integer <= 2"]),
    "negative latency": (_set(("chip", "paths", "l0c_to_gm", "base_latency_cycles"), -5),
                         ["chip.paths.l0c_to_gm.base_latency_cycles", "= -5", "a number >= 0"]),
    "NaN latency": (_set(("chip", "paths", "gm_to_l1", "base_latency_cycles"), float("nan")),
                    ["chip.paths.gm_to_l1.base_latency_cycles", "= nan", "expected a finite number"]),
    "infinite clock": (_set(("chip", "aic_freq_GHz"), float("inf")),
                       ["chip.aic_freq_GHz", "= inf", "expected a finite number"]),
    "section not a mapping": (_set(("chip", "cube"), 7),
                              ["chip.cube", "= 7", "a mapping of keys to values"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CHIPS))
@pytest.mark.parametrize("loader", [load_chip, load_topology], ids=["load_chip", "load_topology"])
def test_bad_chip_file_message(case, loader, chip_mapping, write_yaml):
    mutate, fragments = BAD_CHIPS[case]
    mutate(chip_mapping)
    path = write_yaml(chip_mapping)
    with pytest.raises(ConfigError) as info:
        loader(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ")
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)


def test_error_carries_structured_fields(chip_mapping, write_yaml):
    chip_mapping["chip"]["num_ai_cores"] = 0
    path = write_yaml(chip_mapping)
    with pytest.raises(ConfigError) as info:
        load_chip(path)
    err = info.value
    assert (err.source, err.key_path, err.value) == (str(path), "chip.num_ai_cores", 0)
    assert err.expected == "an integer >= 1"


def test_invalid_yaml_names_file_and_line(write_yaml):
    path = write_yaml("chip:\n  name: [unclosed\n  num_ai_cores: 32\n")
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ")
    assert "line 3" in msg and "expected valid YAML" in msg


def test_yaml_that_is_not_a_mapping(write_yaml):
    path = write_yaml("- just\n- a list\n")
    with pytest.raises(ConfigError, match="a mapping of keys to values at the top level"):
        load_chip(path)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    msg = str(info.value)
    assert str(path) in msg and "expected an existing YAML file" in msg


def test_chip_reference_to_missing_file(write_yaml, tmp_path):
    path = write_yaml("chip: nosuchchip\n", "node.yaml")
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: chip = 'nosuchchip': ")
    assert str(tmp_path / "nosuchchip.yaml") in msg and "does not exist" in msg


def test_chip_reference_to_file_without_chip_section(write_yaml, tmp_path):
    write_yaml("name: not-a-chip\n", "other.yaml")
    path = write_yaml("chip: other\n", "node.yaml")
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    msg = str(info.value)
    assert str(tmp_path / "other.yaml") in msg and "a 'chip:' section" in msg


# -- the same errors through the CLI ------------------------------------------------------

@pytest.mark.parametrize("case", ["unknown key", "missing key", "wrong type", "negative bandwidth",
                                  "zero cores"])
def test_cli_bad_topology_exits_2_with_one_line(case, cli, chip_mapping, write_yaml, small_gemm):
    mutate, fragments = BAD_CHIPS[case]
    mutate(chip_mapping)
    path = write_yaml(chip_mapping)
    res = cli("run", path, small_gemm())
    assert res.code == 2
    assert res.out == ""
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert lines[0].startswith(f"simnode: error: {path}: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in res.err


@pytest.mark.parametrize("content,fragment", [
    ("chip:\n  name: [unclosed\n  x: 1\n", "expected valid YAML"),
    ("chip: nosuchchip\n", "does not exist"),
])
def test_cli_unreadable_topology(content, fragment, cli, write_yaml, gemm_workload_path):
    path = write_yaml(content)
    res = cli("run", path, gemm_workload_path)
    assert res.code == 2
    assert res.err.startswith(f"simnode: error: {path}: ") and fragment in res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err


def test_cli_missing_topology_file(cli, tmp_path, gemm_workload_path):
    res = cli("run", tmp_path / "nope.yaml", gemm_workload_path)
    assert res.code == 2
    assert "expected an existing YAML file" in res.err and "Traceback" not in res.err


def test_cli_subprocess_has_no_traceback(chip_mapping, write_yaml, gemm_workload_path):
    """The real entry point (``python -m simnode``), not only main(): exit 2, one line."""
    chip_mapping["chip"]["memory"]["l2_bandwidth_GBps"] = -1
    path = write_yaml(chip_mapping)
    proc = subprocess.run([sys.executable, "-m", "simnode", "run", str(path), str(gemm_workload_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"simnode: error: {path}: chip.memory.l2_bandwidth_GBps = -1: expected a number greater than 0."]
