"""A calibration overlay in use: ``--topology-overlay`` on run, sweep, describe; ``sweep
--band`` (every point under each overlay, the band's columns, the report's shading); and
every mistake of ``--band`` or of an overlay for another topology is one paragraph, exit 2."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

TOPO = "topologies/atlas950-supernode.yaml"
WORK = "workloads/deepep-normal.yaml"
PER_PEER = "topologies/calibrated/deepep-peer-cost.yaml"
SMALL = ("--set", "tokens_per_rank=256", "--set", "batch_window_ns=0")


def _overlay(tmp_path, name, values, topology=TOPO):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"overlay": 1, "topology": topology, "values": values},
                                   sort_keys=False))
    return path


def test_run_with_an_overlay_is_the_run_with_its_values_set(cli, repo_root, tmp_path):
    ov = _overlay(tmp_path, "a.yaml", {"topology.supernode.urma_wqe_ns_per_peer": 0.5},
                  str(repo_root / TOPO))
    with_overlay = cli("run", repo_root / TOPO, repo_root / WORK, *SMALL, "--topology-overlay", ov, "--json")
    with_set = cli("run", repo_root / TOPO, repo_root / WORK, *SMALL, "--set",
                   "topology.supernode.urma_wqe_ns_per_peer=0.5", "--json")
    plain = cli("run", repo_root / TOPO, repo_root / WORK, *SMALL, "--json")
    assert with_overlay.code == with_set.code == plain.code == 0, with_overlay.err
    a, b, c = (json.loads(r.out) for r in (with_overlay, with_set, plain))
    assert a["dispatch_GBps"] == b["dispatch_GBps"] != c["dispatch_GBps"]
    # a --set of the same key wins over the overlay
    over = cli("run", repo_root / TOPO, repo_root / WORK, *SMALL, "--topology-overlay", ov, "--set",
               "topology.supernode.urma_wqe_ns_per_peer=0", "--json")
    assert json.loads(over.out)["dispatch_GBps"] == c["dispatch_GBps"]


def test_describe_says_an_overlay_value_is_calibrated_and_on_which_cases(cli, repo_root):
    res = cli("describe", repo_root / TOPO, "--topology-overlay", repo_root / PER_PEER, "--json")
    assert res.code == 0, res.err
    rows = {r["parameter"]: r for r in json.loads(res.out)["parameters"]}
    row = rows["supernode.urma_wqe_ns_per_peer"]
    assert row["set_in"].startswith("overlay ") and row["set_in"].endswith("deepep-peer-cost.yaml")
    assert row["origin"].startswith("calibrated on deepep-ep8-dispatch")
    assert "deepep-ep128-combine" in row["origin"]
    # a value the overlay leaves alone keeps its file's origin
    assert not rows["supernode.doorbell_ns"]["set_in"].startswith("overlay")


def test_sweep_band_runs_every_point_under_each_overlay(cli, repo_root, tmp_path):
    a = _overlay(tmp_path, "lo.yaml", {"topology.supernode.urma_wqe_ns_per_peer": 0.0}, str(repo_root / TOPO))
    b = _overlay(tmp_path, "hi.yaml", {"topology.supernode.urma_wqe_ns_per_peer": 2.0}, str(repo_root / TOPO))
    out = tmp_path / "sweep"
    res = cli("sweep", repo_root / TOPO, repo_root / WORK, "--param", "num_ranks=8,16", *SMALL,
              "--band", f"{a},{b}", "--jobs", "1", "--out", out)
    assert res.code == 0, res.err
    header = res.out.splitlines()[0].split()
    assert header == ["num_ranks", "figure", "lo", "hi", "lo", "hi"]     # the overlays' labels: lo, hi
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["point.num_ranks"], r["point.overlay"]) for r in rows] == [
        ("8", "lo"), ("8", "hi"), ("16", "lo"), ("16", "hi")]
    for n in ("8", "16"):
        pair = [r for r in rows if r["point.num_ranks"] == n]
        values = sorted(float(r["combine_GBps"]) for r in pair)
        for r in pair:
            assert float(r["combine_GBps_lo"]) == values[0] and float(r["combine_GBps_hi"]) == values[1]
        assert values[0] < values[1]          # 2 ns per peer per WQE costs combine
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["band"] == {"field": "overlay", "overlays": {"lo": str(a), "hi": str(b)}}
    rep = cli("report", out)
    assert rep.code == 0, rep.err
    assert "the shaded band spans" in (out / "report.html").read_text()


@pytest.mark.parametrize("band, needles", [
    ("ONE", ("--band", "two or more", "a band needs two ends")),
    ("ONE,,TWO", ("--band", "without empty items (item 2 of 3 is empty)")),
    ("ONE,ONE", ("--band", "each file once")),
    ("ONE,MISSING", ("--band", "MISSING", "an existing overlay file")),
])
def test_a_bad_band_list_is_one_paragraph(cli, user_error, repo_root, tmp_path, band, needles):
    one = str(repo_root / PER_PEER)
    missing = str(tmp_path / "none.yaml")
    text = band.replace("ONE", one).replace("MISSING", missing)
    needles = tuple(n.replace("MISSING", missing) for n in needles)
    user_error(cli("sweep", repo_root / TOPO, repo_root / WORK, "--param", "num_ranks=8", "--band", text),
               *needles, nothing_ran=True)


def test_a_band_beside_a_swept_field_named_overlay(cli, user_error, repo_root):
    user_error(cli("sweep", repo_root / TOPO, repo_root / WORK, "--param", "overlay=1,2", "--band",
                   f"{repo_root / PER_PEER},{repo_root / PER_PEER}x"), "--param", "overlay",
               nothing_ran=True)


def test_an_overlay_for_another_topology_is_one_paragraph(cli, user_error, repo_root, tmp_path):
    ov = repo_root / PER_PEER
    other = _overlay(tmp_path, "other.yaml", {"topology.supernode.urma_wqe_ns_per_peer": 0.1},
                     str(repo_root / TOPO))
    user_error(cli("run", repo_root / "topologies/ascend950dt.yaml", repo_root / "workloads/gemm.yaml",
                   "--topology-overlay", ov), str(ov), "topology = 'topologies/atlas950-supernode.yaml'",
               "the topology this run uses", nothing_ran=True)
    user_error(cli("sweep", repo_root / "topologies/ascend950dt.yaml", repo_root / "workloads/gemm.yaml",
                   "--param", "m=128,256", "--band", f"{ov},{other}"), str(ov),
               "the topology this run uses", nothing_ran=True)
    user_error(cli("validate", "--only", "gemm-*", "--topology-overlay", ov), str(ov),
               "the topology of at least one chosen case", nothing_ran=True)


def test_an_overlay_key_no_run_has_names_the_overlay(cli, user_error, repo_root, tmp_path):
    ov = _overlay(tmp_path, "bad.yaml", {"tokens_per_rnk": 128}, str(repo_root / TOPO))
    user_error(cli("run", repo_root / TOPO, repo_root / WORK, "--topology-overlay", ov), str(ov),
               "values.tokens_per_rnk", nothing_ran=True)
    ov = _overlay(tmp_path, "bad2.yaml", {"topology.supernode.wqe_ns": 1.0}, str(repo_root / TOPO))
    user_error(cli("run", repo_root / TOPO, repo_root / WORK, "--topology-overlay", ov), str(ov),
               "values.topology.supernode.wqe_ns", "a declared topology parameter", nothing_ran=True)


def test_a_validation_of_fits_alone_says_it_has_no_checks():
    from simnode.commands.validate import format_cases
    from simnode.runs.cases import Case, CaseResult
    case = Case("x", "a source", TOPO, WORK, (), "dispatch_GBps", 100.0, 0.05)
    text = format_cases([CaseResult(case, 101.0, "overlay o.yaml", ("o.yaml",))])
    assert "no checks: every case shown is a fit" in text and "within tolerance" not in text
    assert "fit cases, not checks: x (overlay o.yaml)" in text
