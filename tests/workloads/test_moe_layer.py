"""The moe_layer kind: the acceptance of issue 18 at small sizes (EP8, EP16, 2048 tokens per
rank): the layer's DeepEP kernels match the deepep kind, the overlap modes order as they
must, a hot expert makes its rank the straggler, every routed row is computed once, and
runs are deterministic."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simnode.report.result import to_json
from simnode.workloads.loader import load_inputs
from tests.conftest import REPO_ROOT

TOPOLOGY = REPO_ROOT / "topologies" / "atlas950-supernode.yaml"
LAYER = REPO_ROOT / "workloads" / "moe-layer.yaml"
DEEPEP = REPO_ROOT / "workloads" / "deepep-normal.yaml"
SMALL = {"tokens_per_rank": 2048}


def layer(**sets):
    inp = load_inputs(TOPOLOGY, LAYER, [f"{k}={v}" for k, v in {**SMALL, **sets}.items()])
    return inp.run().to_dict()


_CACHE: dict = {}


def cached(**sets):
    key = tuple(sorted(sets.items()))
    if key not in _CACHE:
        _CACHE[key] = layer(**sets)
    return _CACHE[key]


def test_sequential_dispatch_and_combine_match_the_deepep_kind():
    d = cached(overlap="sequential")
    inp = load_inputs(TOPOLOGY, DEEPEP, [f"tokens_per_rank={SMALL['tokens_per_rank']}"])
    ref = inp.run().to_dict()
    assert d["dispatch_GBps"] == pytest.approx(ref["dispatch_GBps"], rel=0.01)
    assert d["combine_GBps"] == pytest.approx(ref["combine_GBps"], rel=0.01)
    # nothing overlaps: the straggler's compute and communication come one after the other
    assert d["compute_ns"] + d["comm_ns"] <= d["layer_ns"] * (1 + 1e-9)
    assert d["exposed_comm_ns"] == pytest.approx(d["comm_ns"], rel=0.01)
    assert d["overlap_frac"] < 0.01


@pytest.mark.parametrize("num_ranks", [8, 16])
def test_overlap_modes_order_as_they_must(num_ranks):
    seq = cached(overlap="sequential", num_ranks=num_ranks)
    two = cached(overlap="two_micro_batch", num_ranks=num_ranks)
    fused = cached(overlap="fused", num_ranks=num_ranks)
    assert two["layer_ns"] <= seq["layer_ns"]
    assert two["layer_ns"] >= max(two["compute_ns"], two["comm_ns"])
    assert fused["layer_ns"] <= two["layer_ns"]
    assert 0 < two["overlap_frac"] <= 1 and 0 < fused["overlap_frac"] <= 1
    for d in (seq, two, fused):
        # the breakdown adds up: compute + exposed communication + imbalance wait = layer
        assert d["compute_ns"] + d["exposed_comm_ns"] + d["imbalance_wait_ns"] == pytest.approx(
            d["layer_ns"], rel=1e-6)


def test_a_hot_expert_makes_its_rank_the_straggler():
    uniform = cached(overlap="sequential")
    hot = cached(overlap="sequential", routing="hot", hot_experts=2, hot_share=0.3)
    assert hot["layer_ns"] > uniform["layer_ns"]
    assert hot["load_imbalance"] > uniform["load_imbalance"]
    # hot experts 0 and 1 sit on rank 0 (32 experts per rank at EP8)
    assert hot["straggler_rank"] == 0
    assert "rank 0" in hot["straggler_reason"]


def test_fewer_communication_aivs_is_a_what_if():
    all_aivs = cached(overlap="two_micro_batch")
    some = cached(overlap="two_micro_batch", comm_aivs=16)
    # fewer AIVs move the same bytes slower, and SwiGLU no longer waits for communication
    assert some["dispatch_GBps"] < all_aivs["dispatch_GBps"]
    assert some["layer_ns"] != all_aivs["layer_ns"]


def test_same_seed_same_bytes():
    a = layer(overlap="fused", seed=3)
    b = layer(overlap="fused", seed=3)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([1, 2, 4]), st.sampled_from([64, 96, 256]),
       st.sampled_from(["sequential", "fused"]))
def test_every_routed_row_is_computed_once(seed, top_k, tokens, overlap):
    """Over random routings: the grouped GEMMs' valid rows are every routed (token, expert)
    pair once, and their FLOPs are 2 m_e H 2I + 2 m_e I H summed over experts."""
    from simnode.moe.layer import LayerParams, MoELayerSim
    from simnode.ep.deepep import DeepEPCosts
    from simnode.ep.fields import costs_from
    from simnode.workloads.kinds import moe_layer
    inp = load_inputs(TOPOLOGY, LAYER, [f"num_ranks=4", f"tokens_per_rank={tokens}",
                                         f"top_k={top_k}", "num_experts=16", f"seed={seed}",
                                         f"overlap={overlap}", "hidden=1024",
                                         "intermediate=256", "shared_intermediate=256"])
    prm = inp.params
    topo = moe_layer.check(inp.topology, prm)
    lp = LayerParams(4, tokens, 1024, 256, 16, top_k, 1, 256, "fp8", overlap, 64, 2, 2000.0,
                     "normal", "", 0, 0, 0.0)
    costs = costs_from(DeepEPCosts, prm)
    lr = MoELayerSim(topo, lp, costs, moe_layer.routes_fn(prm, 4)).run()
    picks = 4 * tokens * top_k
    assert int(lr.experts.sum()) == picks
    valid = sum(r.valid_rows for r in lr.ranks)
    assert valid == 2 * picks                      # GEMM 1 and GEMM 2 each compute each row once
    flops = sum(r.flops for r in lr.ranks)
    m = lr.experts.sum()
    assert flops == pytest.approx(2 * m * 1024 * 2 * 256 + 2 * m * 256 * 1024, rel=1e-12)


def test_json_result_carries_the_layer_figures():
    d = cached(overlap="two_micro_batch")
    for key in ("layer_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "overlap_frac",
                "straggler_rank", "straggler_reason", "load_imbalance", "grouped_gemm_tflops",
                "padding_frac", "dispatch_GBps", "combine_GBps", "phase_us"):
        assert key in d
    assert set(d["phase_us"]["mb0.gemm1"]) == {"mean", "max"}


def test_fused_trace_has_rank_tracks_hbm_split_and_arrival_arrows(tmp_path):
    """One process per rank (cube, vector, comm threads), HBM split into kernels and
    communication, the network's links, and arrows that end no earlier than they start."""
    from simnode.workloads.registry import RunOptions
    path = tmp_path / "layer.json"
    inp = load_inputs(TOPOLOGY, LAYER, ["tokens_per_rank=512", "num_ranks=4", "overlap=fused"])
    inp.kind.run(inp.topology, inp.params, RunOptions(trace_path=str(path)), name="layer")
    events = json.loads(path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and "name" in e.get("args", {})}
    for r in range(4):
        assert {f"rank{r:03d}", f"rank{r:03d}.cube", f"rank{r:03d}.vector",
                f"rank{r:03d}.comm"} <= names
    assert "network" in names
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"util hbm kernels", "util hbm comm"} <= counters
    spans = [e for e in events if e["ph"] == "X"]
    assert any("gemm1" in e["name"] for e in spans) and any("swiglu" in e["name"] for e in spans)
    starts = {e["id"]: e["ts"] for e in events if e["ph"] == "s"}
    ends = {e["id"]: e["ts"] for e in events if e["ph"] == "f"}
    assert starts and starts.keys() == ends.keys()
    assert all(ends[i] >= starts[i] for i in starts)
