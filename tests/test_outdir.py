"""``simnode run/sweep --out DIR``: the folder layout of ``simnode.commands.outdir`` (which the HTML
report reads: the typed result, its series apart, the resolved configuration), the CSV
columns of the flat view, DeepEP's link time series kept out of the printed result, the
downsampling of that series, the TTY-only progress bar, and --out errors."""

from __future__ import annotations

import csv
import io
import json
from types import SimpleNamespace

import numpy as np
import pytest

from simnode.commands.outdir import flatten
from simnode.progress import Progress
from simnode.report.result import from_record
from simnode.workloads.supernode import link_util

SMALL = ["--set", "m=256", "--set", "n=512", "--set", "k=1024"]
SUPERNODE = "topologies/atlas950-supernode.yaml"
DEEPEP = "workloads/deepep-normal.yaml"


def _load(path):
    return json.loads(path.read_text())


def test_run_out_writes_result_and_config(cli, repo_root, topology_path, gemm_workload_path, tmp_path):
    out = tmp_path / "run"
    res = cli("run", topology_path, gemm_workload_path, *SMALL, "--json",
              "--set", "topology.chip.memory.hbm_bandwidth_GBps=5000", "--out", out)
    assert res.code == 0 and res.err == ""
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "result.json"]
    assert from_record(_load(out / "result.json")).to_dict() == json.loads(res.out)
    config = _load(out / "config.json")
    assert set(config) == {"topology", "workload", "sets", "params", "topology_resolved", "origins"}
    assert config["origins"]["chip.memory.hbm_bandwidth_GBps"] == "--set"
    assert config["origins"]["workload.swizzle_rows"] == "default"
    assert config["topology"] == str(topology_path) and config["workload"] == str(gemm_workload_path)
    assert config["sets"] == ["m=256", "n=512", "k=1024", "topology.chip.memory.hbm_bandwidth_GBps=5000"]
    assert (config["params"]["m"], config["params"]["n"], config["params"]["k"]) == (256, 512, 1024)
    assert config["params"]["dtype"] == "bf16"                       # defaults resolved
    assert config["topology_resolved"]["chip"]["memory"]["hbm_bandwidth_GBps"] == 5000


def test_sweep_out_layout_and_csv(cli, topology_path, gemm_workload_path, tmp_path):
    out = tmp_path / "sweep"
    res = cli("sweep", topology_path, gemm_workload_path, "--set", "n=512", "--set", "k=1024",
              "--param", "m=256,512", "--param", "dtype=bf16,fp8", "--jobs", "1", "--out", out)
    assert res.code == 0 and res.err == ""                          # no progress bar off a TTY
    index = _load(out / "sweep.json")
    assert index["params"] == {"m": [256, 512], "dtype": ["bf16", "fp8"]}
    assert index["sets"] == ["n=512", "k=1024"]
    assert [p["point"] for p in index["points"]] == [
        {"m": 256, "dtype": "bf16"}, {"m": 256, "dtype": "fp8"},
        {"m": 512, "dtype": "bf16"}, {"m": 512, "dtype": "fp8"}]
    assert [p["dir"] for p in index["points"]] == [f"points/00{i}" for i in range(4)]
    results = _load(out / "results.json")
    for entry, row in zip(index["points"], results):
        folder = out / entry["dir"]
        assert sorted(p.name for p in folder.iterdir()) == ["config.json", "result.json"]
        assert {"point": entry["point"], **from_record(_load(folder / "result.json")).to_dict()} == row
        config = _load(folder / "config.json")
        assert config["sets"] == ["n=512", "k=1024", f"m={entry['point']['m']}",
                                  f"dtype={entry['point']['dtype']}"]
        assert (config["params"]["m"], config["params"]["dtype"]) == (row["m"], row["dtype"])

    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    header = list(rows[0])
    assert header[:5] == ["point.m", "point.dtype", "workload", "kind", "makespan_ns"]
    assert "pipe_busy_frac.aic.m" in header                          # nested mappings flattened
    assert len(header) == len(set(header))
    assert len(rows) == 4
    for row, full in zip(rows, results):
        assert (row["point.m"], row["point.dtype"]) == (str(full["point"]["m"]), full["point"]["dtype"])
        assert float(row["makespan_ns"]) == full["makespan_ns"]
        assert float(row["pipe_busy_frac.aic.m"]) == full["pipe_busy_frac"]["aic.m"]


def test_deepep_link_series_go_to_series_json(cli, repo_root, tmp_path):
    out = tmp_path / "ep"
    args = ("run", repo_root / SUPERNODE, repo_root / DEEPEP, "--set", "num_ranks=4",
            "--set", "tokens_per_rank=512")
    table = cli(*args, "--out", out)
    assert table.code == 0 and "link_util" not in table.out and "bin_edges" not in table.out
    result = _load(out / "result.json")
    assert [k["name"] for k in result["kernels"]] == ["dispatch", "combine"]
    series = _load(out / "series.json")
    assert [(s["name"], s["kernel"]) for s in series] == [
        ("link_util", "dispatch"), ("chip_util", "dispatch"), ("link_util", "combine"), ("chip_util", "combine")]
    for s in series:
        edges = s["bin_edges_ns"]
        assert s["unit"] == "fraction"
        assert 2 <= len(edges) <= 65 and edges == sorted(edges) and edges[0] == 0.0
        if s["name"] == "link_util":
            assert s["rows"] and all("->" in name and "." not in name for name in s["rows"])
        for fracs in s["rows"].values():
            assert len(fracs) == len(edges) - 1 and all(0 <= x <= 1.0001 for x in fracs)
    assert max(max(v) for v in series[0]["rows"].values()) > 0.5
    js = cli(*args, "--json")
    assert not any("link_util" in k or "bin_edges" in k for k in json.loads(js.out))


def test_link_util_averages_adjacent_bins_down_to_max_bins():
    frac = np.arange(130 * 3, dtype=float).reshape(130, 3) / 1000   # 2 links + 1 chip resource
    net = SimpleNamespace(ports=np.array([0, 1]),
                          share=SimpleNamespace(names=["a->b", "b->a", "rank0.hbm"]),
                          utilization_series=lambda: (np.arange(131) * 10.0, frac))
    u = link_util(net, max_bins=64)
    assert set(u["links"]) == {"a->b", "b->a"}
    assert u["bin_edges_ns"] == [30.0 * i for i in range(44)] + [1300.0]    # k = 3, last holds 1
    assert u["links"]["a->b"][0] == pytest.approx(frac[0:3, 0].mean(), abs=1e-4)
    assert u["links"]["b->a"][-1] == pytest.approx(frac[129, 1], abs=1e-4)
    small = link_util(net, max_bins=256)
    assert len(small["bin_edges_ns"]) == 131


def test_flatten_keeps_scalars_with_dotted_keys():
    d = {"a": 1, "b": {"c": 2.5, "d": {"e": "x"}}, "l": [1, 2], "n": None, "t": True}
    assert flatten(d) == {"a": 1, "b.c": 2.5, "b.d.e": "x", "t": True}


def test_rewriting_a_sweep_folder_drops_stale_points(cli, topology_path, gemm_workload_path, tmp_path):
    out = tmp_path / "sweep"
    base = ("sweep", topology_path, gemm_workload_path, *SMALL, "--jobs", "1", "--out", out)
    assert cli(*base, "--param", "m=256,512").code == 0
    assert cli(*base, "--param", "m=256").code == 0
    assert sorted(p.name for p in (out / "points").iterdir()) == ["000"]


@pytest.mark.parametrize("make, expected", [
    (lambda d: d / "missing" / "out", "a folder whose parent exists"),
    (lambda d: (d / "f.txt").write_text("x") and d / "f.txt", "a folder (this is a file)"),
    (lambda d: (d / "x").mkdir() or (d / "x" / "notes.txt").write_text("x") and d / "x",
     "a new or empty folder, or one simnode wrote before"),
])
def test_bad_out_folder_is_rejected_before_running(cli, topology_path, gemm_workload_path, tmp_path,
                                                   make, expected):
    out = make(tmp_path)
    for command in (("run",), ("sweep", "--param", "m=256")):
        res = cli(command[0], topology_path, gemm_workload_path, *SMALL, *command[1:], "--out", out)
        assert res.code == 2 and res.out == ""
        assert "--out" in res.err and expected in res.err


def test_progress_bar_draws_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    quiet = io.StringIO()
    with Progress(3, "sweep", stream=quiet) as bar:
        bar.advance()
    assert quiet.getvalue() == ""
    tty = Tty()
    with Progress(2, "sweep", stream=tty) as bar:
        bar.advance()
        bar.advance()
    text = tty.getvalue()
    assert "\rsweep [" in text and "2/2" in text and text.endswith("\n")


def test_progress_update_passes_the_total_and_draws_the_last_count_on_close():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    tty = Tty()
    bar = Progress(100, "EP8 dispatch, simulated/bound us", stream=tty)
    for done in range(0, 131):          # a run passes its bound; redraws are throttled
        bar.update(done)
    bar.close()
    text = tty.getvalue()
    assert text.count("\r") < 20 and "130/100" in text.rsplit("\r", 1)[-1]
    assert "[" + "#" * 30 + "]" in text and text.endswith("\n")


def test_a_run_on_a_terminal_shows_simulated_time_against_the_bound(monkeypatch, topology_path,
                                                                     gemm_workload_path, repo_root):
    from simnode.report.result import to_json
    from simnode.workloads.loader import load_inputs
    from simnode.workloads.registry import RunOptions

    class Tty(io.StringIO):
        def isatty(self):
            return True
    sets = [s for s in SMALL if s != "--set"]
    deepep = (repo_root / "topologies" / "atlas950-supernode.yaml",
              repo_root / "workloads" / "deepep-normal.yaml", ["tokens_per_rank=512"])
    for topo, work, extra, label in ((topology_path, gemm_workload_path, sets, "gemm, simulated/bound us"),
                                     (*deepep, "EP8 combine, simulated/bound us")):
        inputs = load_inputs(topo, work, extra)
        quiet = to_json(inputs.run(RunOptions(), name="gemm"))
        tty = Tty()
        monkeypatch.setattr("sys.stderr", tty)
        shown = to_json(inputs.run(RunOptions(progress=True), name="gemm"))
        monkeypatch.undo()
        assert shown == quiet                                   # the line changes no result
        assert label in tty.getvalue() and tty.getvalue().endswith("\n")
        # off a terminal, nothing is drawn
        monkeypatch.setattr("sys.stderr", io.StringIO())
        inputs.run(RunOptions(progress=True), name="x")
        import sys
        assert sys.stderr.getvalue() == ""
        monkeypatch.undo()
