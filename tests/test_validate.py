"""``simnode validate``: case file loading, the table, and exit 1 on a perturbed parameter."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from simnode.cli import main
from simnode.errors import ConfigError
from simnode.runs.cases import load_cases

ROOT = Path(__file__).resolve().parent.parent


def _cases(tmp_path, published: float, tolerance: float = 0.05) -> Path:
    """A one-case file for a small GEMM (fast), its paths relative to the repository."""
    wl = tmp_path / "gemm.yaml"
    wl.write_text("kind: gemm\nm: 256\nn: 512\nk: 1024\n")
    path = tmp_path / "cases.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        cases:
          - id: small-gemm
            source: test
            topology: {ROOT / 'topologies' / 'ascend950dt.yaml'}
            workload: {wl}
            metric: makespan_ns
            published: {published}
            tolerance: {tolerance}
        """))
    return path


def _model_makespan(tmp_path, capsys) -> float:
    main(["run", str(ROOT / "topologies" / "ascend950dt.yaml"), str(tmp_path / "gemm.yaml"), "--json"])
    import json
    return json.loads(capsys.readouterr().out)["makespan_ns"]


def test_within_tolerance_exits_0_and_prints_the_table(tmp_path, capsys):
    _cases(tmp_path, 1.0)
    model = _model_makespan(tmp_path, capsys)
    path = _cases(tmp_path, model)
    assert main(["validate", "--cases", str(path), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "small-gemm" in out and "yes" in out and "1 of 1 within tolerance" in out


def test_a_perturbed_hardware_parameter_exits_1(tmp_path, capsys):
    _cases(tmp_path, 1.0)
    model = _model_makespan(tmp_path, capsys)
    path = _cases(tmp_path, model)
    code = main(["validate", "--cases", str(path), "--jobs", "1",
                 "--set", "topology.chip.aic_freq_GHz=0.825"])
    assert code == 1
    assert "NO" in capsys.readouterr().out


def test_json_has_a_row_per_case_and_the_summary(tmp_path, capsys):
    _cases(tmp_path, 1.0)
    model = _model_makespan(tmp_path, capsys)
    path = _cases(tmp_path, model * 1.1)            # the model is 9.1% below: outside 5%
    assert main(["validate", "--cases", str(path), "--jobs", "1", "--json"]) == 1
    import json
    out = json.loads(capsys.readouterr().out)
    (row,) = out["cases"]
    assert row["id"] == "small-gemm" and row["metric"] == "makespan_ns" and row["model"] == model
    assert row["error_frac"] == pytest.approx(1 / 1.1 - 1) and row["within"] is False
    assert row["tolerance_frac"] == 0.05 and row["set"] == []
    assert out["within"] == 0 and out["total"] == 1
    assert out["max_abs_error_frac"] == out["mean_abs_error_frac"] == pytest.approx(1 - 1 / 1.1)


def test_a_fit_case_is_shown_but_never_fails_or_counts(tmp_path, capsys):
    _cases(tmp_path, 1.0)
    model = _model_makespan(tmp_path, capsys)
    path = _cases(tmp_path, model * 1.5)            # far outside 5%: would fail as a check
    path.write_text(path.read_text() + "    fit:\n      values: {topology.chip.aic_freq_GHz: 1.65}\n"
                    "      why: a test constant\n")
    assert main(["validate", "--cases", str(path), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert " fit " in out and "within tolerance" not in out
    assert ("fit cases, not checks: small-gemm (sets topology.chip.aic_freq_GHz = 1.65 "
            "(a test constant))") in out
    assert main(["validate", "--cases", str(path), "--jobs", "1", "--json"]) == 0
    import json
    got = json.loads(capsys.readouterr().out)
    assert got["cases"][0]["within"] is None and "a test constant" in got["cases"][0]["fit"]
    assert got["total"] == 0 and got["fit_cases"] == 1


def test_a_fit_case_is_a_check_again_when_the_run_changes_the_fitted_value(tmp_path, capsys):
    # the fit records the value set on the case; a what-if that runs another value makes the
    # case a check of that value
    _cases(tmp_path, 1.0)
    model = _model_makespan(tmp_path, capsys)
    path = _cases(tmp_path, model * 1.5)
    path.write_text(path.read_text() + "    fit:\n      values: {topology.chip.aic_freq_GHz: 1.65}\n"
                    "      why: a test constant\n")
    code = main(["validate", "--cases", str(path), "--jobs", "1", "--set", "topology.chip.aic_freq_GHz=1.6"])
    assert code == 1
    out = capsys.readouterr().out
    assert "NO" in out and "0 of 1 within tolerance" in out and "fit cases" not in out


def test_shipped_case_file_loads():
    cases = load_cases(ROOT / "validation" / "published.yaml")
    assert {c.metric for c in cases} >= {"tflops", "dispatch_GBps", "combine_GBps"}
    assert all(c.tolerance > 0 and c.published > 0 for c in cases)


def test_bad_case_file_names_the_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\ncases:\n  - id: x\n    source: s\n    topology: t\n    workload: w\n"
                    "    metric: m\n    published: -3\n    tolerance: 0.1\n")
    with pytest.raises(ConfigError, match=r"cases\[0\]\.published = -3"):
        load_cases(path)


def test_only_runs_the_matching_shipped_cases(cli):
    # the published BF16 GEMM lands within its tolerance on main (2 s)
    res = cli("validate", "--only", "gemm-*", "--jobs", "1")
    assert res.code == 0, res.out + res.err
    assert "gemm-bf16-4096x7168x16384" in res.out and "deepep" not in res.out
    assert "1 of 1 within tolerance" in res.out


def test_only_with_no_match_is_a_user_error(cli, user_error):
    user_error(cli("validate", "--only", "nope"), "--only: only = 'nope'", "deepep-ep8-dispatch")
