"""Where a fitted value is recorded: the cases file's fit: records and overlays."""


def test_describe_provenance_names_the_cases_a_shipped_constant_was_fitted_on():
    from pathlib import Path

    from simnode.runs.cases import load_cases
    from simnode.runs.provenance import calibrated_by
    cases = load_cases(Path(__file__).resolve().parents[2] / "validation" / "published.yaml")
    key = "topology.chip.vector.vf_issue_per_cycle"
    text = calibrated_by(key, 1, cases)
    assert "calibrated on sparse-mla-decode-fp8-b1-sq4096" in text and "VF issue rate" in text
    assert calibrated_by(key, 2, cases) == ""
    # the per-launch cold start is fitted on the FP8 batch-64 row; 0 (warm caches) is no fit
    assert "sparse-mla-decode-fp8-b64" in calibrated_by("cold_start_ns", 10686, cases)
    assert calibrated_by("cold_start_ns", 0, cases) == ""
    # the VF rate is sourced now (topologies/ascend950dt.yaml), no case sets it
    assert calibrated_by("topology.chip.vector.ops_per_cycle.vf_alu", 64, cases) == ""


def test_describe_shows_a_value_fitted_on_a_case_as_calibrated_while_the_run_uses_it(cli, repo_root):
    import json
    args = ("describe", repo_root / "topologies/ascend950dt.yaml", repo_root / "workloads/sparse-mla-decode.yaml",
            "--json")
    rows = {r["parameter"]: r for r in json.loads(cli(*args).out)["parameters"]}
    assert rows["chip.vector.vf_issue_per_cycle"]["origin"].startswith(
        "calibrated on sparse-mla-decode-fp8-b1-sq4096 (validation/published.yaml, fit: the VF issue rate")
    assert rows["chip.vector.ops_per_cycle.vf_alu"]["origin"].startswith("sourced")
    assert rows["cold_start_ns"]["origin"].startswith(
        "calibrated on sparse-mla-decode-fp8-b64 (validation/published.yaml, fit: the per-launch time")
    # another value is no fit: its origin is what its file says
    res = cli(*args[:-1], "--set", "topology.chip.vector.vf_issue_per_cycle=2", "--json")
    rows = {r["parameter"]: r for r in json.loads(res.out)["parameters"]}
    assert not rows["chip.vector.vf_issue_per_cycle"]["origin"].startswith("calibrated on")
