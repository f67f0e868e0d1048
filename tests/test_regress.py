"""``simnode regress``: golden baselines recomputed and diffed.

Most tests use a temporary baselines folder with one small GEMM scenario (fast). Two use
the shipped baselines: the issue's acceptance (halving the supernode port bandwidth moves
the EP8 DeepEP figures: exit 1, the diff names them) and the CI regression run (all
shipped scenarios unchanged: exit 0).
"""

from __future__ import annotations

import json
import textwrap

import pytest

from simnode.runs.baselines import FigureRow, figure_value

SCENARIOS = """\
    version: 1
    root: .
    figures:
      gemm:
        makespan_ns: 0.01
        tflops: 0.01
        bottleneck: exact
    scenarios:
      - id: small-gemm
        checks: "a small bf16 GEMM"
        topology: {topology}
        workload: gemm.yaml
        set: {{k: 512}}
    """


@pytest.fixture
def folder(tmp_path, topology_path):
    """A baselines folder with one small-GEMM scenario (no baseline recorded yet)."""
    (tmp_path / "gemm.yaml").write_text("kind: gemm\nm: 256\nn: 256\nk: 1024\n")
    (tmp_path / "scenarios.yaml").write_text(textwrap.dedent(SCENARIOS.format(topology=topology_path)))
    return tmp_path


def _recorded(cli, folder):
    res = cli("regress", "--baselines", folder, "--update")
    assert res.code == 0, res.err
    return res


def test_update_records_then_unchanged_baselines_exit_0(cli, folder, topology_path):
    res = _recorded(cli, folder)
    assert "NEW" in res.out and "recorded 1 baselines" in res.out
    data = json.loads((folder / "small-gemm.json").read_text())
    assert data["inputs"] == {"topology": str(topology_path), "workload": "gemm.yaml", "set": {"k": 512}}
    assert set(data["figures"]) == {"makespan_ns", "tflops", "bottleneck"}
    assert data["figures"]["bottleneck"]["tolerance"] == 0
    res = cli("regress", "--baselines", folder)
    assert res.code == 0, res.err
    assert "1 scenario, 3 figures: 3 same" in res.out
    for col in ("scenario", "figure", "baseline", "now", "change %", "tolerance", "status"):
        assert col in res.out.splitlines()[0]


def test_a_perturbed_topology_parameter_exits_1_naming_the_moved_figures(cli, folder):
    _recorded(cli, folder)
    res = cli("regress", "--baselines", folder, "--set", "topology.chip.aic_freq_GHz=0.825")
    assert res.code == 1
    assert "small-gemm/makespan_ns" in res.out and "small-gemm/tflops" in res.out
    lines = {line.split()[1]: line for line in res.out.splitlines() if line.startswith("small-gemm")}
    assert lines["makespan_ns"].endswith("DRIFT") and lines["tflops"].endswith("DRIFT")


def test_json_lists_every_figure_and_names_the_drifted_ones(cli, folder):
    _recorded(cli, folder)
    res = cli("regress", "--baselines", folder, "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["scenarios"] == 1 and out["drifted"] == []
    assert {r["figure"]: r["status"] for r in out["figures"]} == {
        "makespan_ns": "same", "tflops": "same", "bottleneck": "same"}
    res = cli("regress", "--baselines", folder, "--json", "--set", "topology.chip.aic_freq_GHz=0.825")
    assert res.code == 1                                   # the same exit code as the table
    out = json.loads(res.out)                              # and nothing but the JSON on stdout
    assert {"small-gemm/makespan_ns", "small-gemm/tflops"} <= set(out["drifted"])
    row = next(r for r in out["figures"] if r["figure"] == "makespan_ns")
    assert row["status"] == "DRIFT" and row["change_frac"] > 0.5 and row["tolerance_frac"] == 0.01


def test_update_rewrites_a_moved_baseline(cli, folder):
    _recorded(cli, folder)
    before = json.loads((folder / "small-gemm.json").read_text())["figures"]["makespan_ns"]["value"]
    (folder / "gemm.yaml").write_text("kind: gemm\nm: 512\nn: 256\nk: 1024\n")   # the model input moved
    assert cli("regress", "--baselines", folder).code == 1
    res = cli("regress", "--baselines", folder, "--update")
    assert res.code == 0 and "DRIFT" in res.out           # the diff is shown before rewriting
    after = json.loads((folder / "small-gemm.json").read_text())["figures"]["makespan_ns"]["value"]
    assert after > before
    assert cli("regress", "--baselines", folder).code == 0


def test_two_runs_are_identical(cli, folder):
    _recorded(cli, folder)
    first = (folder / "small-gemm.json").read_bytes()
    _recorded(cli, folder)
    assert (folder / "small-gemm.json").read_bytes() == first
    assert cli("regress", "--baselines", folder).out == cli("regress", "--baselines", folder).out


def test_only_pattern_matching_nothing_is_a_clear_error(cli, folder):
    res = cli("regress", "--baselines", folder, "--only", "deepep-*")
    assert res.code == 2
    assert "--only: only = 'deepep-*': expected an id or glob pattern matching one of: small-gemm" in res.err
    assert "Traceback" not in res.err


def test_missing_baseline_file_is_a_clear_error(cli, folder):
    res = cli("regress", "--baselines", folder)
    assert res.code == 2
    assert "small-gemm.json" in res.err and "a baseline file for scenario 'small-gemm'" in res.err
    assert "simnode regress --update --only small-gemm" in res.err


def test_malformed_scenarios_file_is_a_clear_error(cli, folder):
    path = folder / "scenarios.yaml"
    path.write_text(path.read_text().replace("tflops: 0.01", "tflops: -1"))
    res = cli("regress", "--baselines", folder)
    assert res.code == 2 and "figures.gemm.tflops = -1: expected a number >= 0" in res.err
    path.write_text("version: 1\nfigures: {gemm: {tflops: 0.01}}\nscenarios: []\n")
    res = cli("regress", "--baselines", folder)
    assert res.code == 2 and "scenarios = []: expected a non-empty list of scenarios" in res.err


def test_missing_scenarios_file_is_a_clear_error(cli, tmp_path):
    res = cli("regress", "--baselines", tmp_path / "nowhere")
    assert res.code == 2 and "scenarios.yaml" in res.err and "an existing YAML file" in res.err


def test_a_scenario_edited_after_recording_is_stale(cli, folder):
    _recorded(cli, folder)
    path = folder / "scenarios.yaml"
    path.write_text(path.read_text().replace("{k: 512}", "{k: 256}"))
    res = cli("regress", "--baselines", folder)
    assert res.code == 2 and "inputs = " in res.err and "changed since its baseline was recorded" in res.err


def test_a_figure_the_result_lacks_cannot_be_recorded(cli, folder):
    path = folder / "scenarios.yaml"
    path.write_text(path.read_text().replace("bottleneck: exact", "dispatch_GBps: 0.01"))
    res = cli("regress", "--baselines", folder, "--update")
    assert res.code == 2 and "figures.gemm.dispatch_GBps = '<not in the result>'" in res.err
    assert "scenarios.yaml, scenario 'small-gemm'" in res.err and "makespan_ns" in res.err


def test_update_with_set_is_refused(cli, folder):
    res = cli("regress", "--baselines", folder, "--update", "--set", "m=512")
    assert res.code == 2 and "no --set together with --update" in res.err


def test_figure_paths_reach_nested_records():
    result = {"pipe_busy_frac": {"aic.m": 0.9}, "links": [{"link": "a->b"}], "x": [1]}
    assert figure_value(result, "pipe_busy_frac.aic.m") == 0.9
    assert figure_value(result, "links.0.link") == "a->b"
    assert figure_value(result, "x") is not figure_value(result, "links.0.link")   # a list is no figure
    assert figure_value(result, "links.1.link") is figure_value(result, "nope")


def test_json_rows_stay_strict_json_when_a_zero_baseline_moves():
    from simnode.commands.regress import rows_json
    out = rows_json([FigureRow("s", "x", 0.0, 1.0, 0.01), FigureRow("s", "b", "cube", "cube", 0.0)])
    json.dumps(out, allow_nan=False)                       # no Infinity in the output
    assert [r["change_frac"] for r in out["figures"]] == [None, None]
    assert out["drifted"] == ["s/x"]


def test_row_status():
    assert FigureRow("s", "f", 100.0, 100.5, 0.01).status == "ok"
    assert FigureRow("s", "f", 100.0, 102.0, 0.01).status == "DRIFT"
    assert FigureRow("s", "f", "cube", "cube", 0.0).status == "same"
    assert FigureRow("s", "f", "cube", "HBM", 0.5).status == "DRIFT"
    assert FigureRow("s", "f", 1.0, None, 0.5).drifted
    assert FigureRow("s", "f", None, 1.0, 0.5).status == "NEW"
    assert FigureRow("s", "f", 0.0, 1.0, 0.5).status == "DRIFT"


def test_halving_the_port_bandwidth_moves_the_ep8_deepep_figures(cli):
    """Issue acceptance: halving a link bandwidth exits 1 with a diff naming the moved figures."""
    res = cli("regress", "--only", "deepep-ep8", "--set", "topology.supernode.port_bandwidth_GBps=25.71")
    assert res.code == 1, res.err
    moved = res.out.split("drifted beyond tolerance: ")[1].splitlines()[0].split(", ")
    assert {"deepep-ep8/dispatch_GBps", "deepep-ep8/combine_GBps", "deepep-ep8/dispatch_ns",
            "deepep-ep8/combine_ns"} <= set(moved)


def test_shipped_baselines_are_current(cli):
    """The CI regression run: every shipped scenario recomputes to its recorded figures."""
    res = cli("regress")
    assert res.code == 0, res.out + res.err
    assert "DRIFT" not in res.out and "MISSING" not in res.out
