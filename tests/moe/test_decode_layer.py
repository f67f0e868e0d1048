"""The decode MoE layer (moe_layer with comm = low_latency, issue 33 point 3): its breakdown
adds up, the shared experts' stream overlaps dispatch and the main stream, its core split is
a what-if, W4A8 and W8A8 experts run, hash routing feeds it, and bad inputs are errors.

Its dispatch and combine are the EP family's low-latency member; until that member is in the
tree, ``tests.moe.ll_standin`` stands in for it with the same public surface."""

from __future__ import annotations

import json

import pytest

from simnode.errors import ConfigError
from simnode.report.result import to_json
from simnode.workloads.loader import load_inputs
from simnode.workloads.registry import RunOptions
from tests.conftest import REPO_ROOT
from tests.moe import ll_standin

TOPOLOGY = REPO_ROOT / "topologies" / "atlas950-supernode.yaml"
FLASH = REPO_ROOT / "workloads" / "moe-layer-decode-v4-flash.yaml"
SMALL = {"num_ranks": 8}            # V4-Flash at EP8: 32 experts per rank, 24 rows each
_CACHE: dict = {}


@pytest.fixture(autouse=True, scope="module")
def member():
    """The low-latency member, or its stand-in for this module's tests only."""
    if ll_standin.install():
        yield
        ll_standin.uninstall()
    else:
        yield


def decode(**sets):
    key = tuple(sorted(sets.items()))
    if key not in _CACHE:
        inp = load_inputs(TOPOLOGY, FLASH, [f"{k}={v}" for k, v in {**SMALL, **sets}.items()])
        _CACHE[key] = inp.run().to_dict()
    return _CACHE[key]


def test_the_breakdown_adds_up():
    d = decode()
    b = d["breakdown_us"]
    main = b["dispatch"] + b["gemm1"] + b["swiglu"] + b["gemm2"] + b["combine"]
    assert main <= b["layer"] * (1 + 1e-6)
    assert b["shared_stream"] > 0 and b["shared_stream"] <= b["layer"]
    # the shared stream runs beside dispatch: only the communication it did not cover shows
    assert b["exposed_comm"] < b["dispatch"] + b["combine"]
    assert b["exposed_comm"] >= b["combine"] * (1 - 1e-6)        # nothing runs beside combine
    assert d["layer_us"] == pytest.approx(b["layer"], rel=1e-3)
    assert d["expert_gemm_us"] == pytest.approx(b["gemm1"] + b["gemm2"], rel=1e-3)
    assert set(d["dispatch_steps_us"]) >= {"launch", "write", "wait", "copy"}


def test_without_its_own_stream_the_shared_expert_follows_combine():
    split, one = decode(), decode(shared_aic=0, shared_aiv=0)
    assert one["breakdown_us"]["exposed_comm"] == pytest.approx(
        one["breakdown_us"]["dispatch"] + one["breakdown_us"]["combine"], rel=1e-3)
    assert one["layer_us"] > split["breakdown_us"]["layer"] - split["breakdown_us"]["shared_stream"]
    # the split is a what-if: more cores for the shared stream, a shorter shared stream
    wide = decode(shared_aic=8, shared_aiv=16)
    assert wide["breakdown_us"]["shared_stream"] < split["breakdown_us"]["shared_stream"]


def test_w8a8_experts_read_twice_the_weights_of_w4a8():
    """At 24 rows per expert both read weights: MXFP8 twice the bytes of MXFP4 (which the
    AIVs decode), so W8A8's GEMMs take longer; the FLOPs are the same."""
    w4, w8 = decode(), decode(weight_dtype="fp8")
    assert w8["flops"] == w4["flops"]
    assert w8["expert_gemm_us"] > w4["expert_gemm_us"]


def test_hash_routing_feeds_the_decode_layer():
    h = decode(routing="hash")
    assert h["layer_us"] > 0 and h["load_imbalance"] >= 1.0


def test_the_trace_has_the_shared_stream(tmp_path):
    inp = load_inputs(TOPOLOGY, FLASH, ["num_ranks=4", "tokens_per_rank=16"])
    path = tmp_path / "trace.json"
    inp.run(RunOptions(trace_path=str(path)))
    names = {e["args"]["name"] for e in json.loads(path.read_text())["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert "rank000.shared" in names and "rank000.comm" in names


def test_json_carries_the_breakdown():
    d = json.loads(to_json(load_inputs(TOPOLOGY, FLASH, ["num_ranks=4", "tokens_per_rank=8"]).run()))
    assert set(d["breakdown_us"]) == {"dispatch", "gemm1", "swiglu", "gemm2", "combine",
                                      "shared_stream", "exposed_comm", "layer"}


@pytest.mark.parametrize("sets, key, message", [
    ({"tokens_per_rank": 513}, "tokens_per_rank", "0..512 tokens per rank"),
    ({"top_k": 17}, "top_k", "experts per token"),
    ({"overlap": "fused"}, "overlap", "sequential with comm = low_latency"),
    ({"shared_aiv": 7}, "shared_aiv", "a multiple of 2"),
    ({"shared_aic": 32}, "shared_aic", "1..31 AICs"),
    ({"shared_aic": 0}, "shared_aiv", "0 unless shared_aic"),
    ({"comm": "normal"}, "shared_aic", "0 unless comm = low_latency"),
])
def test_bad_decode_layers_are_errors(sets, key, message):
    with pytest.raises(ConfigError) as info:
        load_inputs(TOPOLOGY, FLASH, [f"{k}={v}" for k, v in {**SMALL, **sets}.items()]).run()
    assert info.value.key_path == key and message in str(info.value)
