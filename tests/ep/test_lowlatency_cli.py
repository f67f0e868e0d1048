"""The low-latency kinds from the command line: the published API's limits are errors (one
paragraph, exit 2, nothing run), and a run reports its times, steps and layout."""

import json

import pytest

A3 = ("atlas900-a3-superpod.yaml", "deepep-ll-a3.yaml")
S950 = ("atlas950-supernode.yaml", "deepep-ll.yaml")


@pytest.mark.parametrize("files, sets, words", [
    (S950, ["tokens_per_rank=513", "max_tokens_per_rank=513"],
     ["tokens_per_rank = 513", "expected 0..512 tokens per rank", "LOW_LATENCY_API.md"]),
    (A3, ["tokens_per_rank=513", "max_tokens_per_rank=513"],
     ["tokens_per_rank = 513", "expected 0..512 tokens per rank", "MoeDistributeDispatchV2"]),
    (S950, ["top_k=17"], ["top_k = 17", "expected 1..16 experts per token"]),
    (A3, ["top_k=17"], ["top_k = 17", "expected 1..16 experts per token"]),
    (S950, ["num_experts=520"], ["num_experts = 520", "expected 1..512 experts"]),
    (A3, ["num_experts=1032"], ["num_experts = 1032", "expected 1..1024 experts"]),
    (A3, ["dispatch_dtype=mxfp8"], ["dispatch_dtype = 'mxfp8'", "expected one of int8, bf16"]),
    (A3, ["transport=urma"], ["transport = 'urma'", "expected one of memory", "no URMA work requests"]),
    (S950, ["max_tokens_per_rank=64"], ["max_tokens_per_rank = 64", "at least tokens_per_rank (128)"]),
    (A3, ["topology.chip.memory.hbm_capacity_GB=0.25"],
     ["max_tokens_per_rank = 128", "a window that fits the rank's HBM", "533,725,184 B"]),
])
def test_the_published_limits_are_errors(cli, user_error, repo_root, files, sets, words):
    topology, workload = files
    args = [a for s in sets for a in ("--set", s)]
    res = cli("run", repo_root / "topologies" / topology, repo_root / "workloads" / workload,
              *args, "--json")
    user_error(res, workload, *words, nothing_ran=True)


def test_a_run_reports_times_steps_and_the_layout(cli, repo_root):
    res = cli("run", repo_root / "topologies" / S950[0], repo_root / "workloads" / S950[1],
              "--set", "output_layout=masked", "--json")
    assert res.code == 0, res.err
    d = json.loads(res.out)
    for kind in ("dispatch", "combine"):
        assert d[f"{kind}_us"] > 0
        assert sum(d[f"{kind}_steps_us"].values()) == pytest.approx(d[f"{kind}_us"], rel=1e-3)
    assert d["output_layout"] == "masked"
    assert d["output_shape"] == [32, 128 * 8, 7168]       # local experts x max tokens x R
    assert "masked grouped GEMM" in d["gemm_input"]
    assert d["window_half"] == 0
