"""``simnode regress``: bad scenario files, baseline files and options are user errors
(exit 2, one line naming the file, the scenario and the value; no traceback), and
``--update`` writes nothing unless every selected scenario checks out.

Each test builds a baselines folder in tmp_path with small GEMM scenarios (fast).
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from simnode.config.overrides import parse_assignment
from simnode.errors import ConfigError
from simnode.runs.scenarios import Scenario, load_scenarios


def _scenario(sid: str, **over) -> dict:
    sc = {"id": sid, "checks": "a small bf16 GEMM", "topology": "topology.yaml",
          "workload": "gemm.yaml"}
    sc.update(over)
    return sc


@pytest.fixture
def folder(tmp_path, topology_path):
    """A baselines folder: write(scenarios..., figures=...) (re)writes its scenarios.yaml."""
    shutil.copy(topology_path, tmp_path / "topology.yaml")
    (tmp_path / "gemm.yaml").write_text("kind: gemm\nm: 256\nn: 256\nk: 512\n")

    def write(*scenarios, figures=None):
        data = {"version": 1, "root": ".",
                "figures": figures or {"gemm": {"makespan_ns": 0.01, "bottleneck": "exact"}},
                "scenarios": list(scenarios) or [_scenario("small-gemm")]}
        (tmp_path / "scenarios.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        return tmp_path
    write.path = tmp_path
    return write


def _record(cli, folder):
    res = cli("regress", "--baselines", folder, "--update", "--jobs", "1")
    assert res.code == 0, res.err
    return res


# -- unreadable files ----------------------------------------------------------------------

def test_a_baseline_that_is_not_utf8_names_the_file(cli, user_error, folder):
    f = folder()
    (f / "small-gemm.json").write_bytes(b'{"scenario": "small-gemm\xff"}')
    user_error(cli("regress", "--baselines", f), "small-gemm.json", "a UTF-8 JSON file",
               "simnode regress --update --only small-gemm", nothing_ran=True)


def test_a_baseline_that_is_not_json_names_the_file(cli, user_error, folder):
    f = folder()
    (f / "small-gemm.json").write_text("{scenario: small-gemm")
    user_error(cli("regress", "--baselines", f), "small-gemm.json", "'<unparsable>'", "valid JSON",
               nothing_ran=True)


def test_a_baseline_path_that_is_a_folder_names_it(cli, user_error, folder):
    f = folder()
    (f / "small-gemm.json").mkdir()
    user_error(cli("regress", "--baselines", f), "small-gemm.json", "not a folder", nothing_ran=True)
    user_error(cli("regress", "--baselines", f, "--update"), "small-gemm.json", "not a folder",
               nothing_ran=True)


def test_a_scenario_file_that_is_not_utf8_names_the_file(cli, user_error, folder):
    f = folder()
    (f / "scenarios.yaml").write_bytes(b"version: 1\nroot: \xff\n")
    user_error(cli("regress", "--baselines", f), "scenarios.yaml", "UTF-8", nothing_ran=True)


def test_a_scenario_file_that_is_not_yaml_names_the_file(cli, user_error, folder):
    f = folder()
    (f / "scenarios.yaml").write_text("version: 1\nscenarios: [\n")
    user_error(cli("regress", "--baselines", f), "scenarios.yaml", "valid YAML", nothing_ran=True)


# -- --update writes all or nothing ----------------------------------------------------------

def test_update_writes_nothing_when_a_later_scenario_fails(cli, user_error, folder):
    f = folder(_scenario("a-good"), _scenario("b-bad", set={"k": 1024}, tolerance={"makespan_nz": 0.1}))
    res = cli("regress", "--baselines", f, "--update", "--jobs", "1")
    user_error(res, f"{f / 'scenarios.yaml'}, scenario 'b-bad'",
               "scenarios[1].tolerance.makespan_nz = '<not in the result>'", "makespan_ns, bottleneck, bottleneck_util_frac, roofline_ns, flops",
               "Did you mean 'makespan_ns'?", nothing_ran=True)
    assert list(f.glob("*.json")) == [] and list(f.glob("*.tmp")) == []


def test_an_unknown_figure_is_a_scenario_file_error_not_a_stale_baseline(cli, user_error, folder):
    f = folder()
    _record(cli, f)
    before = (f / "small-gemm.json").read_bytes()
    folder(figures={"gemm": {"makespan_ns": 0.01, "bottleneck": "exact", "makespan_nz": 0.01}})
    res = cli("regress", "--baselines", f, "--jobs", "1")
    user_error(res, f"{f / 'scenarios.yaml'}, scenario 'small-gemm'",
               "figures.gemm.makespan_nz = '<not in the result>'", "makespan_ns", nothing_ran=True)
    assert "--update" not in res.err and "changed since" not in res.err
    assert (f / "small-gemm.json").read_bytes() == before


def test_a_new_figure_the_result_has_is_still_a_stale_baseline(cli, user_error, folder):
    f = folder()
    _record(cli, f)
    folder(figures={"gemm": {"makespan_ns": 0.01, "bottleneck": "exact", "tflops": 0.01}})
    user_error(cli("regress", "--baselines", f, "--jobs", "1"), "small-gemm.json",
               "changed since its baseline was recorded", "simnode regress --update --only small-gemm",
               nothing_ran=True)
    assert "tflops" in json.loads(_record(cli, f) and (f / "small-gemm.json").read_text())["figures"]


# -- options and scenario entries ----------------------------------------------------------

def test_an_empty_baselines_option_is_an_error_and_writes_nothing(cli, user_error, folder, monkeypatch):
    import simnode.commands.regress as command
    f = folder()
    monkeypatch.setattr(command, "DEFAULT_BASELINES", f)      # were '' taken as absent, it would land here
    for extra in ([], ["--update"]):
        user_error(cli("regress", "--baselines", "", *extra), "--baselines: baselines = ''",
                   "a baselines folder path", nothing_ran=True)
    assert list(f.glob("*.json")) == []


def test_figures_for_an_unknown_kind_are_an_error(cli, user_error, folder):
    f = folder(figures={"gemm": {"makespan_ns": 0.01}, "gemmz": {"tflops": 0.01}})
    user_error(cli("regress", "--baselines", f), "scenarios.yaml", "figures.gemmz = 'gemmz'",
               "workload kind: one of chakra, decode_step, deepep, deepep_hccs, deepep_ll, deepep_ll_hccs, gemm", "Did you mean 'gemm'?", nothing_ran=True)


def test_a_bad_set_entry_names_the_scenario(cli, user_error, folder):
    f = folder(_scenario("small-gemm", set={"mm": 1}))
    user_error(cli("regress", "--baselines", f, "--update"), "scenarios.yaml, scenario 'small-gemm'",
               "scenarios[0].set.mm = 1", "Did you mean 'm'?", nothing_ran=True)
    f = folder(_scenario("small-gemm", set={"m": "abc"}))
    user_error(cli("regress", "--baselines", f, "--update"), "scenarios.yaml, scenario 'small-gemm'",
               "scenarios[0].set.m = 'abc'", "an integer", nothing_ran=True)


def test_a_missing_workload_names_the_scenario(cli, user_error, folder):
    f = folder(_scenario("small-gemm", workload="nope.yaml"))
    user_error(cli("regress", "--baselines", f, "--update"), "scenarios.yaml, scenario 'small-gemm'",
               "nope.yaml", "an existing YAML file", nothing_ran=True)


@pytest.mark.parametrize("bad_set", [{"a=b": 1}, {1: 2}, {"": 2}])
def test_set_keys_must_be_field_names(folder, bad_set):
    f = folder(_scenario("small-gemm", set=bad_set))
    with pytest.raises(ConfigError, match=r"scenario 'small-gemm': scenarios\[0\]\.set\..* a field name"):
        load_scenarios(f / "scenarios.yaml")


def test_set_values_json_cannot_record_are_an_error(folder):
    f = folder()
    text = (f / "scenarios.yaml").read_text().replace("  workload: gemm.yaml",
                                                      "  workload: gemm.yaml\n  set: {m: 2020-01-01}")
    (f / "scenarios.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"scenario 'small-gemm': scenarios\[0\]\.set = .*JSON"):
        load_scenarios(f / "scenarios.yaml")


# -- typed set values --------------------------------------------------------------------------

def test_a_small_float_in_set_is_recorded_and_rerun_as_a_number(cli, folder):
    # 0.00001 is written "1e-05"; a 1 MHz clock (the slowest the range takes) makes it slow
    sets = {"topology.chip.aic_freq_GHz": 0.001, "topology.chip.cube.mmad_latency_cycles": 0.00001}
    f = folder(_scenario("slow-clock", set=sets))
    _record(cli, f)
    recorded = json.loads((f / "slow-clock.json").read_text())
    assert recorded["inputs"]["set"] == sets
    assert recorded["figures"]["makespan_ns"]["value"] > 1e6       # a 1 MHz cube: slow
    res = cli("regress", "--baselines", f, "--jobs", "1")
    assert res.code == 0 and "2 same" in res.out, res.out + res.err


def test_scenario_sets_read_back_as_the_same_values():
    values = {"a": 0.00001, "b": None, "c": "yes", "d": "1e5", "e": [1, 2], "f": True, "g": "12"}
    sc = Scenario("s", "", "t.yaml", "w.yaml", values, {})
    assert dict(parse_assignment(s) for s in sc.sets()) == values


def test_a_failed_write_leaves_every_old_baseline_as_it_was(tmp_path, monkeypatch):
    from pathlib import Path

    from simnode.runs.baselines import write_baselines
    (tmp_path / "a.json").write_text("old a\n")
    real, calls = Path.write_text, []

    def flaky(self, *args, **kw):
        calls.append(self.name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device", str(self))
        return real(self, *args, **kw)
    monkeypatch.setattr(Path, "write_text", flaky)
    records = [{"scenario": s, "figures": {}} for s in ("a", "b")]
    with pytest.raises(ConfigError, match=r"b\.json\.tmp.*No space left on device.*no baseline was changed"):
        write_baselines(tmp_path, records)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]
    assert (tmp_path / "a.json").read_text() == "old a\n"
    assert [p.name for p in write_baselines(tmp_path, records)] == ["a.json", "b.json"]
    assert json.loads((tmp_path / "a.json").read_text()) == records[0]
