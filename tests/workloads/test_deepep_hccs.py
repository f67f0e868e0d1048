"""Workload kind ``deepep_hccs`` (DeepEP-Ascend's A3 normal kernels): the plan's counts, the
benchmark's byte convention, per-access costs and the peer what-ifs, errors. Small cases."""

from __future__ import annotations

import numpy as np
import pytest

from simnode.moe.deepep_hccs import HccsCosts, build_hccs_plan, effective_aivs, split
from simnode.moe.routing import route_supernode
from simnode.workloads.loader import load_inputs

TOPO = "topologies/atlas900-a3-superpod.yaml"
WORK = "workloads/deepep-a3-normal.yaml"
SMALL = ("tokens_per_rank=256", "batch_window_ns=0")


def run(repo_root, *sets) -> dict:
    return load_inputs(str(repo_root / TOPO), str(repo_root / WORK), SMALL + tuple(sets)).run().to_dict()


def test_the_plan_counts_every_token_and_expert_pair_once():
    routes = route_supernode(64, 32, 4, 8, "uniform", 0)
    plan = build_hccs_plan(routes, 8, 64, 7168, 4, 32, 48, True)
    assert plan.counts.sum() == 8 * 64 * 4
    assert plan.recv_rows().sum() == plan.pair_rows().sum() == 8 * 64 * 4
    # the INT8 record as one copy moves it (X7): row 7168 + scale slot 32 + triple 12
    assert plan.record_bytes == 7212
    # statuses: E / AIVs each, the remainder to the first AIVs
    spans = plan.aiv_statuses()
    assert len(spans) == 48 and sum(b - a for a, b in spans) == 32
    assert spans[0] == (0, 1) and spans[31] == (31, 32) and spans[32] == (32, 32)


def test_split_and_effective_aivs():
    assert list(split(10, 4)) == [3, 3, 2, 2]
    assert effective_aivs([3, 3, 2, 2]) == pytest.approx(10 / 3)
    assert effective_aivs([0, 0]) == 1.0


def test_bandwidth_is_received_rows_times_bf16_row_over_call_time(repo_root):
    out = run(repo_root)
    for kind in ("dispatch", "combine"):
        rows = out[f"{kind}_recv_rows_mean"]
        assert rows == pytest.approx(256 * 8, rel=0.05)       # a rank receives ~ tokens x top-k
        # mean over ranks of rows x 2 x hidden / time, close to the mean rows over mean time
        assert out[f"{kind}_GBps"] == pytest.approx(rows * 7168 * 2 / out[f"{kind}_ns"], rel=0.02)


def test_a_dearer_remote_access_lowers_both_kernels(repo_root):
    base = run(repo_root)
    slow = run(repo_root, "remote_read_ns=5000", "remote_write_ns=5000")
    assert slow["dispatch_GBps"] < 0.8 * base["dispatch_GBps"]
    assert slow["combine_GBps"] < 0.8 * base["combine_GBps"]


def test_a_cache_holding_every_peer_changes_nothing(repo_root):
    base = run(repo_root, "remote_read_ns=1000")
    cached = run(repo_root, "remote_read_ns=1000", "peer_cache_entries=7", "read_miss_ns=5000")
    assert cached["dispatch_GBps"] == base["dispatch_GBps"]


def test_a_cost_per_peer_grows_with_the_peers(repo_root):
    def loss(n):
        a = run(repo_root, f"num_ranks={n}", "remote_read_ns=1000")
        b = run(repo_root, f"num_ranks={n}", "remote_read_ns=1000", "read_ns_per_peer=100")
        return 1 - b["dispatch_GBps"] / a["dispatch_GBps"]
    assert loss(16) > loss(8) > 0


def test_the_stall_shapes():
    c = HccsCosts(0, 0, 0, 0, 0, 0, 0, peer_cache_entries=32, read_miss_ns=10, write_miss_ns=0,
                  read_ns_per_peer=0, write_ns_per_peer=0.5)
    assert c.miss_fraction(16) == 0 and c.miss_fraction(64) == 0.5
    assert c.stall_ns(64, write=False) == 5.0 and c.stall_ns(64, write=True) == 32.0


def test_same_inputs_same_result(repo_root):
    assert run(repo_root, "batch_window_ns=2000") == run(repo_root, "batch_window_ns=2000")


def test_a_negative_access_cost_is_an_error(cli, user_error, repo_root):
    user_error(cli("run", repo_root / TOPO, repo_root / WORK, "--set", "remote_read_ns=-1"),
               "remote_read_ns = -1", "a number >= 0")


def test_ranks_that_do_not_divide_the_experts(cli, user_error, repo_root):
    user_error(cli("run", repo_root / TOPO, repo_root / WORK, "--set", "num_ranks=12"),
               "num_ranks = 12", "a divisor of num_experts (256)")
