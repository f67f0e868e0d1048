"""``simnode describe``: every parameter a run reads, with value, unit, range, where it was
set, its source comment and doc; and the file comments it reads (simnode.config.comments)."""

from __future__ import annotations

import json
from pathlib import Path

from simnode.config import comments, params
from simnode.config.chip import ChipSpec
from simnode.config.supernode import SupernodeSpec
from simnode.workloads.registry import get_kind


def test_describe_lists_every_parameter_a_deepep_run_reads(cli, repo_root):
    topo = repo_root / "topologies" / "atlas950-supernode.yaml"
    work = repo_root / "workloads" / "deepep-normal.yaml"
    res = cli("describe", topo, work, "--set", "num_ranks=16", "--json")
    assert res.code == 0, res.err
    rows = {r["parameter"]: r for r in json.loads(res.out)["parameters"]}
    expected = ([k for k, _ in params.walk(ChipSpec, "chip.")] + [k for k, _ in params.walk(SupernodeSpec, "supernode.")]
                + [f.name for f in get_kind("deepep").fields])
    assert list(rows) == expected
    for key, r in rows.items():
        assert r["doc"], key
        if r["type"] in ("int", "number"):
            assert r["unit"], key
    bw = rows["supernode.port_bandwidth_GBps"]
    assert (bw["value"], bw["unit"], bw["range"]) == (51.42, "GB/s", "0.001..1e+06")
    assert bw["set_in"] == f"{topo}:32" and "S5" in bw["cites"] and "405 GB/s" in bw["comment"]
    hbm = rows["chip.memory.hbm_bandwidth_GBps"]        # read from the chip file the topology names
    chip_file = Path(topo).parent / "ascend950dt.yaml"
    line = 1 + next(i for i, text in enumerate(chip_file.read_text().splitlines())
                    if text.strip().startswith("hbm_bandwidth_GBps:"))
    assert hbm["set_in"].endswith(f"ascend950dt.yaml:{line}") and hbm["origin"] == "sourced"
    assert rows["num_ranks"]["set_in"] == "--set" and rows["num_ranks"]["value"] == 16
    assert rows["zipf_exponent"]["set_in"] == "default" and rows["zipf_exponent"]["origin"] == "setting"
    assert rows["barrier_ns"]["origin"] == "sourced" and "S6" in rows["barrier_ns"]["cites"]
    assert rows["batch_window_ns"]["range"] == "0..100000"


def test_describe_prints_a_table_with_units_and_docs(cli, repo_root):
    res = cli("describe", repo_root / "topologies" / "atlas950-supernode.yaml",
              repo_root / "workloads" / "deepep-normal.yaml")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].split() == ["parameter", "value", "unit", "range", "set", "in", "source", "doc"]
    row = next(line for line in lines if line.startswith("supernode.urma_payload_GBps "))
    assert "351.7" in row and "GB/s" in row and "most payload one rank's URMA engine" in row
    assert any(line.startswith("kernel_launch_ns ") and "ns" in line for line in lines)


def test_describe_of_a_topology_alone_and_its_comments(cli, repo_root):
    res = cli("describe", repo_root / "topologies" / "npu8p-box-mesh.yaml", "--comments")
    assert res.code == 0, res.err
    assert "supernode.port_bandwidth_GBps" in res.out and "calibrated: S13, X1" in res.out
    assert "    # Link rate, wire bytes per direction." in res.out


def test_describe_errors_name_the_flag(cli, repo_root, user_error):
    topo = repo_root / "topologies" / "ascend950dt.yaml"
    user_error(cli("describe", topo, "--set", "m=1"), "--set: m = 1", "a topology.* key", nothing_ran=True)
    user_error(cli("describe", topo, repo_root / "workloads" / "deepep-normal.yaml", "--set", "nosuch=1"),
               "nosuch", "valid keys here", nothing_ran=True)


def test_comments_attach_to_keys_runs_and_parents(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("# about the file\nchip:\n  # a run of two keys\n  a: 1\n  b: 2   # b's own (S3)\n\n"
                 "  c: 3\n  d:\n    e: 4  # origin: calibrated on nothing\n")
    n = comments.annotate(f)
    assert n.lines == {"chip": 2, "chip.a": 4, "chip.b": 5, "chip.c": 7, "chip.d": 8, "chip.d.e": 9}
    assert n.comment("chip") == ""
    assert n.comment("chip.a") == "a run of two keys"
    assert n.comment("chip.b") == "a run of two keys b's own (S3)"
    assert n.comment("chip.c") == ""
    assert comments.cites(n.comment("chip.b")) == ["S3"]
    assert comments.origin_of(n.comment("chip.d.e")) == "calibrated"
    assert comments.origin_of("Unknown: 100 ns (facts 5.5)") == "reasoned"
    assert comments.origin_of("facts 1.4, S8") == "sourced"
    assert n.where("chip.b") == f"{f}:5"
