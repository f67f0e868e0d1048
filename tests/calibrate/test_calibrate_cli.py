"""``simnode calibrate`` on model-made cases: recovery of a known value, a value the cases do
not pin, the overlay it writes (byte-identical on a rerun), and validate with the overlay."""

from __future__ import annotations

import json

import pytest

from simnode.config.overlay import load_overlay

URMA = "topology.supernode.urma_payload_GBps"


def test_recovers_a_known_value_within_one_percent(cli, synthetic_cases, tmp_path, repo_root):
    # the cases are the model's own figures with the URMA ceiling at 300 GB/s; the topology
    # says 351.7, the start of the fit
    cases = synthetic_cases(**{URMA: 300})
    out = tmp_path / "overlay.yaml"
    res = cli("calibrate", repo_root / "topologies/atlas950-supernode.yaml", cases,
              "--fit", f"{URMA}=200:400", "-o", out, "--jobs", "1", "--date", "2026-01-01")
    assert res.code == 0, res.err
    ov = load_overlay(out)
    assert ov.values[URMA] == pytest.approx(300, rel=0.01)
    assert ov.record["start"][URMA] == 351.7
    assert {c.id for c in ov.cases} == {"ep8-dispatch", "ep8-combine"}
    assert ov.date == "2026-01-01" and ov.simnode_version
    lo, hi = ov.record["intervals"][URMA]
    assert lo < 300 < hi and hi - lo < 100       # pinned: well inside the bounds
    assert "300" in res.out and "ep8-dispatch" in res.out and "wrote" in res.out


def test_start_moves_where_the_fit_begins_and_is_recorded(cli, synthetic_cases, tmp_path, repo_root):
    cases = synthetic_cases(**{URMA: 300})
    out = tmp_path / "overlay.yaml"
    res = cli("calibrate", repo_root / "topologies/atlas950-supernode.yaml", cases,
              "--fit", f"{URMA}=200:400", "--start", f"{URMA}=220", "--no-profile", "-o", out,
              "--jobs", "1", "--date", "2026-01-01")
    assert res.code == 0, res.err
    ov = load_overlay(out)
    assert ov.record["start"][URMA] == 220
    assert ov.values[URMA] == pytest.approx(300, rel=0.01)


MISS = "topology.supernode.urma_context_miss_ns"
BIG_CACHE = "topology.supernode.urma_context_cache_entries=64"


def test_a_value_that_changes_no_figure_is_reported_as_not_pinned(cli, synthetic_cases, repo_root):
    # a peer-context cache of 64 entries holds all 7 peers of EP8: no WQE misses, so no
    # figure depends on the miss cost, and the EP8 cases cannot pin it
    cases = synthetic_cases()
    args = ("calibrate", repo_root / "topologies/atlas950-supernode.yaml", cases,
            "--fit", f"{MISS}=0:50", "--set", BIG_CACHE, "--jobs", "1")
    res = cli(*args, "--json")
    assert res.code == 0, res.err
    got = json.loads(res.out)
    assert got["fit"]["intervals"][MISS] == [0.0, 50.0]
    assert got["fit"]["sets"] == [BIG_CACHE]
    res = cli(*args)
    assert "not pinned by these cases" in res.out


def test_the_overlay_is_byte_identical_for_the_same_inputs(cli, synthetic_cases, tmp_path, repo_root):
    cases = synthetic_cases(**{URMA: 320})
    texts = []
    for name in ("a.yaml", "b.yaml"):
        res = cli("calibrate", repo_root / "topologies/atlas950-supernode.yaml", cases, "--fit",
                  f"{URMA}=200:400", "--no-profile", "-o", tmp_path / name, "--jobs", "2",
                  "--date", "2026-01-02")
        assert res.code == 0, res.err
        texts.append((tmp_path / name).read_text())
    assert texts[0] == texts[1]


def test_validate_shows_the_fitted_cases_as_fit_and_counts_only_checks(cli, synthetic_cases, tmp_path,
                                                                     repo_root):
    cases = synthetic_cases(**{URMA: 300})
    out = tmp_path / "overlay.yaml"
    assert cli("calibrate", repo_root / "topologies/atlas950-supernode.yaml", cases, "--fit",
               f"{URMA}=200:400", "--no-profile", "-o", out, "--jobs", "1").code == 0
    # a further case, at EP16, that the overlay was not fitted to: a check
    import yaml
    data = yaml.safe_load(cases.read_text())
    check = dict(data["cases"][0], id="ep16-dispatch", set={**data["cases"][0]["set"], "num_ranks": 16})
    from tests.calibrate.conftest import model
    check["published"] = model(repo_root, num_ranks=16, **{URMA: 300})["dispatch_GBps"]
    data["cases"].append(check)
    cases.write_text(yaml.safe_dump(data, sort_keys=False))
    res = cli("validate", "--cases", cases, "--topology-overlay", out, "--jobs", "1")
    assert res.code == 0, res.err
    lines = {line.split()[0]: line for line in res.out.splitlines() if line.startswith("ep")}
    assert " fit " in lines["ep8-dispatch"] and " fit " in lines["ep8-combine"]
    assert " yes " in lines["ep16-dispatch"]
    assert "1 of 1 within tolerance" in res.out and "fit cases, not checks" in res.out
    # without the overlay the model (at 351.7 GB/s) misses the cases made at 300: all checks
    res = cli("validate", "--cases", cases, "--jobs", "1")
    assert res.code == 1 and "0 of 3 within tolerance" in res.out


def test_a_topology_that_names_overlays_is_fitted_on_its_base_with_them_beneath(
        cli, synthetic_cases, tmp_path, repo_root):
    # the cases are the model's figures at a 300 GB/s ceiling with the engine at 40 ns per WQE;
    # the 40 ns come from an overlay the topology file names, and the fit must run on top of it
    import yaml
    cases = synthetic_cases(**{URMA: 300, "topology.supernode.wqe_processing_ns": 40.0})
    (tmp_path / "wqe.yaml").write_text(yaml.safe_dump({
        "overlay": 1, "topology": str(repo_root / "topologies/atlas950-supernode.yaml"),
        "values": {"topology.supernode.wqe_processing_ns": 40.0}}))
    keyed = tmp_path / "cal.yaml"
    keyed.write_text(yaml.safe_dump({"base": str(repo_root / "topologies/atlas950-supernode.yaml"),
                                     "overlay": "wqe.yaml"}))
    out = tmp_path / "fit.yaml"
    res = cli("calibrate", keyed, cases, "--fit", f"{URMA}=200:400", "--no-profile", "-o", out,
              "--jobs", "1", "--date", "2026-01-03")
    assert res.code == 0, res.err
    ov = load_overlay(out)
    assert ov.values[URMA] == pytest.approx(300, rel=0.01)
    assert ov.topology == "topologies/atlas950-supernode.yaml"          # the base, as written
    assert ov.record["overlays"] == [str(tmp_path / "wqe.yaml")]
