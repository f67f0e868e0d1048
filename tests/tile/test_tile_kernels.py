"""TileKernels as tile programs on their benchmark shapes: each reports its roofline,
achieved GB/s and bottleneck; the run stays within 1.3x of its bound and its bottleneck
is the one the bound's binding term (its arithmetic intensity) predicts. The attention
programs run on 1 AIC + 2 AIVs, bound by the softmax on the vector cores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORK = REPO / "workloads"


def _run(cli, topology_path, workload, *sets):
    res = cli("run", topology_path, workload, "--json", *[f"--set={s}" for s in sets])
    assert res.code == 0, res.err
    return json.loads(res.out)


@pytest.mark.parametrize("name,sets,bottleneck", [
    ("tk-per-token-cast", (), "HBM bandwidth"),
    ("tk-swiglu-cast", (), "vector (aiv.v)"),
    ("tk-rmsnorm-cast", (), "vector (aiv.v)"),
    ("tk-topk-gate", (), "vector (aiv.v)"),
    ("tk-topk-gate", ("num_topk=6",), "vector (aiv.v)"),
    ("tk-rope", (), "HBM bandwidth"),
    ("tk-sinkhorn", (), "vector (aiv.v)"),
])
def test_tilekernels_land_near_their_bound_on_the_predicted_bottleneck(cli, topology_path, name, sets,
                                                                       bottleneck):
    r = _run(cli, topology_path, WORK / f"{name}.yaml", *sets)
    for key in ("makespan_ns", "roofline_ns", "achieved_GBps", "bottleneck", "bound_hbm_ns",
                "tile_sim_over_bound", "predicted_bottleneck"):
        assert key in r, key
    assert r["roofline_ns"] <= r["makespan_ns"] <= 1.3 * r["roofline_ns"]
    assert r["bottleneck"] == r["predicted_bottleneck"] == bottleneck
    assert r["achieved_GBps"] == pytest.approx(r["hbm_unique_bytes"] / r["makespan_ns"], rel=1e-4)
    assert r["achieved_GBps"] <= 3500 * 1.0001          # never above the HBM bandwidth (facts 1.1)
    if bottleneck == "HBM bandwidth":
        assert r["intensity_vec_ops_per_B"] < r["balance_vec_ops_per_B"]


def test_8001_tokens_take_about_twice_4001(cli, topology_path):
    small = _run(cli, topology_path, WORK / "tk-per-token-cast.yaml")
    big = _run(cli, topology_path, WORK / "tk-per-token-cast.yaml", "num_tokens=8001")
    assert big["makespan_ns"] / small["makespan_ns"] == pytest.approx(2.0, rel=0.08)


def test_mha_forward_is_vector_bound_and_the_stages_pay(cli, topology_path):
    r = _run(cli, topology_path, WORK / "tile-mha-fwd.yaml")
    assert r["flops"] == 4.0 * 4096 * 4096 * 128
    assert r["bottleneck"] == "vector (aiv.v)" and r["makespan_ns"] <= 1.3 * r["roofline_ns"]
    assert r["busiest_pipe_by_unit"] == {"aic": "cube (aic.m)", "aiv": "vector (aiv.v)"}
    serial = _run(cli, topology_path, WORK / "tile-mha-fwd.yaml", "stages=none")
    assert serial["makespan_ns"] > 1.3 * r["makespan_ns"]
    # at the calibrated one VF instruction per cycle the AIVs pace it; with both issue
    # ports (the sourced what-if) the cube does
    fast = _run(cli, topology_path, WORK / "tile-mha-fwd.yaml",
                "topology.chip.vector.vf_issue_per_cycle=0")
    assert fast["bottleneck"] == "cube (aic.m)" and fast["makespan_ns"] < r["makespan_ns"]
    assert fast["pipe_busy_frac"]["aic.m"] > r["pipe_busy_frac"]["aic.m"]


def test_gqa_forward_keeps_the_per_tile_rate(cli, topology_path):
    """Two query tiles per core (seq_q 256 x 32 heads), the GQA layout at a small size: the
    same vector-bound rate as one tile (the full shape is a long run)."""
    r = _run(cli, topology_path, WORK / "tile-gqa-fwd.yaml", "seq_q=256")
    assert r["tiles_per_block"] == 2 and r["kv_blocks"] == 64
    assert r["bottleneck"] == "vector (aiv.v)" and r["makespan_ns"] <= 1.3 * r["roofline_ns"]
    assert 150 < r["tflops"] < 432.5
