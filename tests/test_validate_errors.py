"""``simnode validate``: a bad cases file or option is a user error (exit 2, one line naming
the cases file, the case id, the key and the value; no traceback).

Cases run the shipped GEMM workload file at a small shape (fast); its paths are written
relative to the repository root, as validation/published.yaml writes them.
"""

from __future__ import annotations

import pytest
import yaml

from simnode.commands.options import cases_path
from simnode.config.overrides import parse_assignment
from simnode.errors import ConfigError
from simnode.runs.cases import REPO_ROOT, load_cases

SMALL = {"m": 256, "n": 512, "k": 1024}


def _case(**over) -> dict:
    case = {"id": "g1", "source": "test", "topology": "topologies/ascend950dt.yaml",
            "workload": "workloads/gemm-bf16-4096x7168x16384.yaml", "set": dict(SMALL),
            "metric": "tflops", "published": 100.0, "tolerance": 0.5}
    case.update(over)
    return case


@pytest.fixture
def cases_file(tmp_path):
    """cases_file(case, ...) writes a cases file in tmp_path and returns its path."""
    def write(*cases, version=1, name="cases.yaml"):
        path = tmp_path / name
        path.write_text(yaml.safe_dump({"version": version, "cases": list(cases) or [_case()]},
                                       sort_keys=False))
        return path
    return write


@pytest.mark.parametrize("metric, kind", [("bottleneck", "str"), ("pipe_busy_frac", "dict")])
def test_a_metric_that_is_not_a_number_names_the_case(cli, user_error, cases_file, metric, kind):
    path = cases_file(_case(metric=metric))
    res = cli("validate", "--cases", path, "--jobs", "1")
    user_error(res, f"{path}, case 'g1'", f"cases[0].metric = '{metric}'",
               f"'{metric}' is {kind}, not a number", "makespan_ns, bottleneck_util_frac, roofline_ns, flops, tflops", nothing_ran=True)


def test_an_unknown_metric_names_the_cases_file_and_case(cli, user_error, cases_file):
    path = cases_file(_case(metric="tflopz"))
    user_error(cli("validate", "--cases", path, "--jobs", "1"), f"{path}, case 'g1'",
               "cases[0].metric = 'tflopz'", "numeric field", "Did you mean 'tflops'?", nothing_ran=True)


def test_an_unknown_set_key_names_the_cases_file_and_case(cli, user_error, cases_file):
    path = cases_file(_case(set={**SMALL, "mm": 1}))
    user_error(cli("validate", "--cases", path), f"{path}, case 'g1'", "cases[0].set.mm = 1",
               "an existing key", "Did you mean 'm'?", nothing_ran=True)


def test_a_set_value_of_the_wrong_type_names_the_cases_file_and_case(cli, user_error, cases_file):
    path = cases_file(_case(set={**SMALL, "m": "abc"}))
    user_error(cli("validate", "--cases", path), f"{path}, case 'g1'", "cases[0].set.m = 'abc'",
               "expected an integer", nothing_ran=True)


def test_a_bad_topology_set_value_names_the_cases_file_and_case(cli, user_error, cases_file):
    path = cases_file(_case(set={**SMALL, "topology.chip.aic_freq_GHz": "fast"}))
    user_error(cli("validate", "--cases", path), f"{path}, case 'g1'",
               "cases[0].set.topology.chip.aic_freq_GHz = 'fast'", "expected a number", nothing_ran=True)


def test_a_bad_command_line_set_is_named_as_such_with_the_case(cli, user_error, cases_file):
    path = cases_file()
    user_error(cli("validate", "--cases", path, "--set", "mm=3"), f"{path}, case 'g1'", "--set: mm = 3",
               nothing_ran=True)


def test_an_error_in_the_workload_file_names_the_case_and_the_workload(cli, user_error, cases_file, tmp_path):
    work = tmp_path / "gemm.yaml"
    work.write_text("kind: gemm\nm: 256\nn: 512\nk: 1024\ndtype: fp7\n")
    path = cases_file(_case(workload=str(work), set={}))
    user_error(cli("validate", "--cases", path), f"{path}, case 'g1': {work}: dtype = 'fp7'", nothing_ran=True)


def test_duplicate_case_ids_are_an_error(cli, user_error, cases_file):
    path = cases_file(_case(), _case(metric="makespan_ns"))
    user_error(cli("validate", "--cases", path), str(path), "cases[1].id = 'g1'", "an id used once",
               "cases[0]", nothing_ran=True)


@pytest.mark.parametrize("version", [99, 0, "1", None])
def test_an_unsupported_version_is_an_error(cli, user_error, cases_file, version):
    path = cases_file(version=version)
    user_error(cli("validate", "--cases", path), str(path), f"version = {version!r}",
               "a cases file version this simnode reads: 1", nothing_ran=True)


def test_the_shipped_file_has_a_supported_version():
    assert yaml.safe_load((REPO_ROOT / "validation" / "published.yaml").read_text())["version"] == 1


@pytest.mark.parametrize("key", ["topology", "workload"])
def test_a_missing_input_file_names_the_cases_file_and_case(cli, user_error, cases_file, key):
    path = cases_file(_case(**{key: "nowhere/nope.yaml"}))
    user_error(cli("validate", "--cases", path), f"{path}, case 'g1'", f"cases[0].{key} = 'nowhere/nope.yaml'",
               str(REPO_ROOT / "nowhere" / "nope.yaml"), "repository root", nothing_ran=True)


def test_relative_paths_are_read_from_the_repository_root_whatever_the_directory(cli, cases_file, tmp_path,
                                                                                 monkeypatch):
    # a copy of a published-style case (paths relative to the repository) run from elsewhere
    path = cases_file(_case(published=1e9, tolerance=0.01))
    monkeypatch.chdir(tmp_path)
    res = cli("validate", "--cases", path.name, "--jobs", "1")
    assert res.code == 1, res.err               # it ran: the model is nowhere near 1e9 TFLOPS
    assert "g1" in res.out and "0 of 1 within tolerance" in res.out


def test_set_values_reach_the_run_as_typed(cli, cases_file):
    """A float written back as '1e-05' or None as 'None' must read as the same value."""
    path = cases_file(_case(set={**SMALL, "topology.chip.aic_freq_GHz": 0.001,
                                 "topology.chip.cube.mmad_latency_cycles": 0.00001}),
                      _case(id="g2", set={**SMALL, "dtype": "fp8", "swizzle_rows": 2}))
    cases = load_cases(path)
    assert dict(parse_assignment(s) for s in cases[0].sets)["topology.chip.cube.mmad_latency_cycles"] == 0.00001
    res = cli("validate", "--cases", path, "--jobs", "1", "--only", "g1")
    assert res.code == 1, res.err               # a 0.001 GHz cube: ~0 TFLOPS, far below 100
    assert "g1    tflops  0.1" in res.out


def test_load_cases_keeps_every_set_value_type(cases_file):
    values = {"a": 0.00001, "b": None, "c": "yes", "d": "1e5", "e": [1, 2], "f": True, "g": "12"}
    sets = load_cases(cases_file(_case(set=values)))[0].sets
    assert dict(parse_assignment(s) for s in sets) == values


@pytest.mark.parametrize("bad_set", [{"": 1}, {"a=b": 1}, {3: 1}, [1, 2]])
def test_a_malformed_set_mapping_is_an_error(cases_file, bad_set):
    with pytest.raises(ConfigError, match=r"case 'g1': cases\[0\]\.set"):
        load_cases(cases_file(_case(set=bad_set)))


def test_an_empty_cases_path_is_an_error():
    with pytest.raises(ConfigError, match=r"--cases: cases = '': expected a cases file path"):
        cases_path("")
    assert cases_path(None) == REPO_ROOT / "validation" / "published.yaml"


def test_an_empty_cases_option_is_a_user_error(cli, user_error):
    # --only matches nothing, so a regression fails fast instead of running the whole suite
    user_error(cli("validate", "--cases", "", "--only", "no-such-case"), "--cases", "a cases file path",
               nothing_ran=True)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_impossible_schedule_at_run_time_names_the_case(cli, user_error, cases_file, jobs):
    # the schedule is rejected only when it is built, in a worker: the error still says
    # which case asked for it
    path = cases_file(_case(), _case(id="too-wide", set={**SMALL, "block_m": 2048}))
    user_error(cli("validate", "--cases", path, "--jobs", jobs), "case 'too-wide'", "no L0 k-step fits")


def test_a_cases_file_beside_its_own_inputs(cli, tmp_path, repo_root):
    # relative paths are read next to the cases file when they are there
    (tmp_path / "my-topo.yaml").write_text((repo_root / "topologies/ascend950dt.yaml").read_text())
    (tmp_path / "ascend950dt.yaml").write_text((repo_root / "topologies/ascend950dt.yaml").read_text())
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "cases": [_case(topology="my-topo.yaml")]}, sort_keys=False))
    res = cli("validate", "--cases", path, "--jobs", "1")
    assert res.code in (0, 1) and "g1" in res.out, res.err


def test_a_fit_why_that_is_not_text_names_the_case(cli, user_error, cases_file):
    path = cases_file(_case(fit={"values": {"m": 256}, "why": 3}))
    user_error(cli("validate", "--cases", path), f"{path}, case 'g1'",
               "cases[0].fit.why = 3", "expected a string")


def test_fit_values_that_are_not_a_mapping_name_the_case(cli, user_error, cases_file):
    path = cases_file(_case(fit={"values": [1, 2], "why": "x"}))
    user_error(cli("validate", "--cases", path), f"{path}, case 'g1'",
               "cases[0].fit.values = [1, 2]", "expected a non-empty mapping of --set keys")


def test_the_old_calibration_key_says_what_replaced_it(cli, user_error, cases_file):
    path = cases_file(_case(calibration="a constant"))
    user_error(cli("validate", "--cases", path), f"{path}, case 'g1'",
               "cases[0].calibration = 'a constant'", "fit: {values: {KEY: VALUE}, why: TEXT}")
