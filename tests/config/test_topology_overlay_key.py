"""A topology file that names its overlays (``base:`` + ``overlay:``): the loader applies
them by the path ``--topology-overlay`` takes (same results, describe shows them as
calibrated on their cases, validate shows those cases as fit), relative paths are read from
the file that names them, and every mistake (a missing file, an overlay fitted on another
topology, a cycle of bases, an overlay given as a topology) is one paragraph, exit 2."""

from __future__ import annotations

import json
import os

import yaml

TOPO = "topologies/atlas950-supernode.yaml"
WORK = "workloads/deepep-normal.yaml"
PER_PEER = "topologies/calibrated/deepep-peer-cost.yaml"
SMALL = ("--set", "num_ranks=8", "--set", "tokens_per_rank=256", "--set", "batch_window_ns=0")


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _overlay(path, values, topology, cases=()):
    body = {"overlay": 1, "topology": str(topology), "values": values}
    if cases:
        body["fit"] = {"cases": list(cases)}
    return _write(path, body)


def _figures(res) -> tuple:
    assert res.code == 0, res.err
    out = json.loads(res.out)
    return out["dispatch_GBps"], out["combine_GBps"]


def test_the_shipped_calibrated_topology_is_the_topology_with_its_overlay(cli, repo_root):
    keyed = cli("run", repo_root / "topologies/calibrated/atlas950-supernode-peer-cost.yaml",
                repo_root / WORK, *SMALL, "--json")
    flag = cli("run", repo_root / TOPO, repo_root / WORK, *SMALL, "--topology-overlay",
               repo_root / PER_PEER, "--json")
    plain = cli("run", repo_root / TOPO, repo_root / WORK, *SMALL, "--json")
    assert _figures(keyed) == _figures(flag) != _figures(plain)
    # the same overlay named by the file and by the flag applies once, to the same result
    both = cli("run", repo_root / "topologies/calibrated/atlas950-supernode-peer-cost.yaml",
               repo_root / WORK, *SMALL, "--topology-overlay", repo_root / PER_PEER, "--json")
    assert _figures(both) == _figures(flag)


def test_describe_shows_a_named_overlay_as_calibrated_on_its_cases(cli, repo_root):
    for args in ((), (repo_root / WORK,)):
        res = cli("describe", repo_root / "topologies/calibrated/atlas950-supernode-peer-cost.yaml",
                  *args, "--json")
        assert res.code == 0, res.err
        rows = {r["parameter"]: r for r in json.loads(res.out)["parameters"]}
        row = rows["supernode.urma_wqe_ns_per_peer"]
        assert row["set_in"] == f"overlay {repo_root / PER_PEER}", row["set_in"]
        assert row["origin"].startswith("calibrated on deepep-ep8-dispatch") and \
            "deepep-ep128-combine" in row["origin"]
        assert row["value"] == 0.0844331
        assert rows["supernode.doorbell_ns"]["set_in"].startswith(str(repo_root / TOPO))


def test_relative_paths_are_read_from_the_file_that_names_them(cli, repo_root, tmp_path, monkeypatch):
    # a user's folder: mine/calibrated.yaml -> its own overlay beside it, and the repo's topology
    ov = _overlay(tmp_path / "mine" / "ov" / "wqe.yaml", {"topology.supernode.wqe_processing_ns": 40.0},
                  repo_root / TOPO)
    keyed = _write(tmp_path / "mine" / "calibrated.yaml", {
        "base": os.path.relpath(repo_root / TOPO, tmp_path / "mine"), "overlay": ["ov/wqe.yaml"]})
    monkeypatch.chdir(tmp_path)                  # neither the repository nor the file's folder
    a = cli("run", keyed, repo_root / WORK, *SMALL, "--json")
    b = cli("run", repo_root / TOPO, repo_root / WORK, *SMALL, "--set",
            "topology.supernode.wqe_processing_ns=40", "--json")
    assert _figures(a) == _figures(b)
    assert json.loads(a.out)["combine_GBps"] is not None and ov.is_file()


def test_a_base_that_names_overlays_applies_its_own_first(cli, repo_root, tmp_path):
    low = _overlay(tmp_path / "low.yaml", {"topology.supernode.wqe_processing_ns": 20.0,
                                           "topology.supernode.doorbell_ns": 100.0}, repo_root / TOPO)
    high = _overlay(tmp_path / "high.yaml", {"topology.supernode.wqe_processing_ns": 40.0}, repo_root / TOPO)
    inner = _write(tmp_path / "inner.yaml", {"base": str(repo_root / TOPO), "overlay": "low.yaml"})
    outer = _write(tmp_path / "outer.yaml", {"base": "inner.yaml", "overlay": ["high.yaml"]})
    res = cli("describe", outer, "--json")
    assert res.code == 0, res.err
    rows = {r["parameter"]: r for r in json.loads(res.out)["parameters"]}
    assert rows["supernode.wqe_processing_ns"]["value"] == 40.0          # the outer file's wins
    assert rows["supernode.wqe_processing_ns"]["set_in"] == f"overlay {high}"
    assert rows["supernode.doorbell_ns"]["value"] == 100.0               # the inner one's stays
    assert rows["supernode.doorbell_ns"]["set_in"] == f"overlay {low}"


def test_validate_shows_the_cases_of_a_named_overlay_as_fit(cli, repo_root, tmp_path):
    case = {"id": "ep8-combine", "metric": "combine_GBps", "measured": 300.0, "tolerance": 0.5,
            "workload": WORK, "set": {"num_ranks": 8}}
    _overlay(tmp_path / "ov.yaml", {"topology.supernode.wqe_processing_ns": 40.0}, repo_root / TOPO,
             [case])
    keyed = _write(tmp_path / "cal.yaml", {"base": str(repo_root / TOPO), "overlay": "ov.yaml"})
    sets = {"num_ranks": 8, "tokens_per_rank": 256, "batch_window_ns": 0}
    cases = _write(tmp_path / "cases.yaml", {"version": 1, "cases": [
        {"id": "ep8-combine", "source": "a test", "topology": str(keyed), "workload": str(repo_root / WORK),
         "set": sets, "metric": "combine_GBps", "published": 300.0, "tolerance": 0.5},
        {"id": "ep8-dispatch", "source": "a test", "topology": str(keyed), "workload": str(repo_root / WORK),
         "set": sets, "metric": "dispatch_GBps", "published": 300.0, "tolerance": 0.5}]})
    res = cli("validate", "--cases", cases, "--jobs", "1")
    assert res.code == 0, res.err
    rows = {line.split()[0]: line.split() for line in res.out.splitlines() if line.startswith("ep8-")}
    assert rows["ep8-combine"][6] == "fit" and rows["ep8-dispatch"][6] == "yes"
    assert "fit cases, not checks: ep8-combine (overlay" in res.out


def test_a_missing_base_or_overlay_is_one_paragraph(cli, user_error, repo_root, tmp_path):
    keyed = _write(tmp_path / "a.yaml", {"base": "nowhere.yaml", "overlay": str(repo_root / PER_PEER)})
    user_error(cli("describe", keyed), str(keyed), "base = 'nowhere.yaml'", "an existing topology file",
               str(tmp_path / "nowhere.yaml"), nothing_ran=True)
    keyed = _write(tmp_path / "b.yaml", {"base": str(repo_root / TOPO), "overlay": ["gone.yaml"]})
    user_error(cli("run", keyed, repo_root / WORK, *SMALL), str(keyed), "overlay[0] = 'gone.yaml'",
               "an existing overlay file", str(tmp_path / "gone.yaml"), nothing_ran=True)
    keyed = _write(tmp_path / "c.yaml", {"base": str(repo_root / TOPO)})
    user_error(cli("describe", keyed), str(keyed), "overlay = []", "an overlay file or a list",
               nothing_ran=True)


def test_an_overlay_fitted_on_another_topology_is_one_paragraph(cli, user_error, repo_root, tmp_path):
    keyed = _write(tmp_path / "a.yaml", {"base": str(repo_root / "topologies/ascend950dt.yaml"),
                                         "overlay": str(repo_root / PER_PEER)})
    user_error(cli("describe", keyed), str(keyed), "overlay =", "an overlay fitted on this file's base",
               "was fitted on topologies/atlas950-supernode.yaml", nothing_ran=True)
    # an overlay on the command line checks against the base of a file that names overlays
    user_error(cli("run", repo_root / "topologies/calibrated/atlas950-supernode-peer-cost.yaml",
                   repo_root / WORK, "--topology-overlay",
                   _overlay(tmp_path / "other.yaml", {"topology.supernode.doorbell_ns": 1.0},
                            repo_root / "topologies/ascend950dt.yaml")),
               "other.yaml", "the topology this run uses", nothing_ran=True)


def test_a_cycle_of_bases_is_one_paragraph(cli, user_error, repo_root, tmp_path):
    a = _write(tmp_path / "a.yaml", {"base": "b.yaml", "overlay": str(repo_root / PER_PEER)})
    _write(tmp_path / "b.yaml", {"base": "a.yaml", "overlay": str(repo_root / PER_PEER)})
    user_error(cli("describe", a), str(tmp_path / "b.yaml"), "base = 'a.yaml'", "the bases go round",
               f"{a} -> {tmp_path / 'b.yaml'} -> {a}", nothing_ran=True)


def test_an_overlay_given_as_a_topology_or_beside_a_chip_is_one_paragraph(cli, user_error, repo_root,
                                                                          tmp_path):
    user_error(cli("describe", repo_root / PER_PEER), str(repo_root / PER_PEER), "overlay = 1",
               "this is a calibration overlay", "--topology-overlay", nothing_ran=True)
    data = yaml.safe_load((repo_root / TOPO).read_text())
    data["overlay"] = str(repo_root / PER_PEER)
    full = _write(tmp_path / "full.yaml", data)
    user_error(cli("describe", full), str(full), "base = None", "holds no chip of its own",
               nothing_ran=True)
    both = _write(tmp_path / "both.yaml", {"base": str(repo_root / TOPO), "overlay": str(repo_root / PER_PEER),
                                           "supernode": {"num_ranks": 8}})
    user_error(cli("describe", both), str(both), "supernode", "no such key", nothing_ran=True)
