"""Workload kind ``deepep`` through the CLI: JSON fields, EP override, phase selection,
determinism, the hot-expert what-if, Chrome trace, and every user error (exit 2)."""

import json

import numpy as np
import pytest

from simnode.ep import fields
from simnode.workloads.loader import load_inputs

SMALL = ("--set", "tokens_per_rank=512")


@pytest.fixture
def deepep(cli, repo_root):
    """deepep("--set", "num_ranks=4", ...) -> CliResult of ``simnode run ... --json``
    on the supernode topology with the shipped workload at 512 tokens per rank."""
    def run(*extra, json_out=True, topology="atlas950-supernode.yaml"):
        args = ["run", repo_root / "topologies" / topology,
                repo_root / "workloads" / "deepep-normal.yaml", *SMALL, *extra]
        return cli(*args, *(["--json"] if json_out else []))
    return run


def ok_json(res) -> dict:
    assert res.code == 0, res.err
    return json.loads(res.out)


# -- result fields -----------------------------------------------------------------------------
def test_json_carries_both_kernels_and_their_bounds(deepep):
    d = ok_json(deepep("--set", "num_ranks=4"))
    assert d["kind"] == "deepep" and d["num_ranks"] == 4
    for k in ("dispatch_ns", "combine_ns", "dispatch_GBps", "combine_GBps",
              "bound_dispatch_ns", "bound_combine_ns"):
        assert isinstance(d[k], float) and d[k] > 0, k
    assert d["dispatch_ns"] >= d["bound_dispatch_ns"]
    assert d["combine_ns"] >= d["bound_combine_ns"]
    assert d["makespan_ns"] == pytest.approx(d["dispatch_ns"] + d["combine_ns"], rel=1e-6)
    # DeepEP's convention: received tokens x logical bytes / kernel time (GB/s = B/ns)
    assert d["dispatch_GBps"] == pytest.approx(
        d["dispatch_recv_tokens_mean"] * d["dispatch_logical_bytes_per_token"] / d["dispatch_ns"],
        rel=0.02)


def test_num_ranks_16_overrides_the_topology(deepep):
    d = ok_json(deepep("--set", "num_ranks=16", "--set", "tokens_per_rank=256"))
    assert d["num_ranks"] == 16
    assert d["dispatch_recv_tokens_mean"] > 0


def test_phase_dispatch_runs_only_dispatch(deepep):
    d = ok_json(deepep("--set", "num_ranks=4", "--set", "phase=dispatch"))
    assert "dispatch_ns" in d
    assert not any(k.startswith("combine") or k == "bound_combine_ns" for k in d)
    assert d["makespan_ns"] == pytest.approx(d["dispatch_ns"], rel=1e-6)


def test_table_output(deepep):
    res = deepep("--set", "num_ranks=2", json_out=False)
    assert res.code == 0, res.err
    assert "dispatch_GBps" in res.out and "combine_GBps" in res.out


# -- determinism ---------------------------------------------------------------------------------
def test_same_seed_same_bytes(deepep):
    a = deepep("--set", "num_ranks=4", "--set", "seed=3")
    b = deepep("--set", "num_ranks=4", "--set", "seed=3")
    assert a.code == 0 and a.out == b.out


def test_different_seed_different_routing(repo_root, deepep):
    def routes(seed):
        inp = load_inputs(repo_root / "topologies" / "atlas950-supernode.yaml",
                          repo_root / "workloads" / "deepep-normal.yaml",
                          ["tokens_per_rank=512", "num_ranks=4", f"seed={seed}"])
        return np.stack(list(fields.routes(inp.params, 4)))
    assert np.array_equal(routes(3), routes(3))
    assert not np.array_equal(routes(3), routes(4))
    assert deepep("--set", "num_ranks=4", "--set", "seed=3").out != \
        deepep("--set", "num_ranks=4", "--set", "seed=4").out


def test_cli_seed_option_changes_routing(deepep):
    a = deepep("--set", "num_ranks=4", "--seed", "0")
    b = deepep("--set", "num_ranks=4", "--seed", "1")
    assert a.code == b.code == 0
    assert a.out != b.out


# -- HBM contention with URMA (facts 2.4, S5) ----------------------------------------------------
def test_combine_reduction_contends_with_urma_at_an_fcfs_hbm(deepep):
    """Combine's AIVs reduce ahead of the network; at a first-come-first-served HBM their
    reads take URMA's share while they last, so combine is slower than with a fair arbiter
    (the firmware fix S5 announces); dispatch, whose AIVs are idle during the transfer, is
    not affected."""
    common = ("--set", "num_ranks=8", "--set", "tokens_per_rank=2048")
    fcfs = ok_json(deepep(*common))
    fair = ok_json(deepep(*common, "--set", "topology.chip.memory.hbm_arbitration=fair"))
    assert fcfs["dispatch_ns"] == fair["dispatch_ns"]
    assert fcfs["combine_ns"] > 1.03 * fair["combine_ns"]
    assert fcfs["combine_chip_util_frac"]["urma_tx"] < fair["combine_chip_util_frac"]["urma_tx"]


def test_peer_context_cache_what_if_reports_its_miss_share(deepep):
    """Off by default (no miss share); with 5 cached contexts and 15 peers per rank, 10 of
    15 WQEs miss in both kernels, and both get slower."""
    base = ok_json(deepep("--set", "num_ranks=16"))
    what = ok_json(deepep("--set", "num_ranks=16",
                          "--set", "topology.supernode.urma_context_cache_entries=5",
                          "--set", "topology.supernode.urma_context_miss_ns=20"))
    for kind in ("dispatch", "combine"):
        assert base[f"{kind}_urma_context_miss_frac"] == 0.0
        assert what[f"{kind}_urma_context_miss_frac"] == pytest.approx(10 / 15, abs=1e-4)
        assert what[f"{kind}_GBps"] < base[f"{kind}_GBps"]


def test_per_peer_wqe_cost_what_if_reports_its_stall(deepep):
    """Off by default; at 0.1 ns per peer and 15 peers per rank every WQE stalls the engine
    for 1.5 ns in both kernels, and both get slower."""
    base = ok_json(deepep("--set", "num_ranks=16"))
    what = ok_json(deepep("--set", "num_ranks=16",
                          "--set", "topology.supernode.urma_wqe_ns_per_peer=0.1"))
    for kind in ("dispatch", "combine"):
        assert base[f"{kind}_urma_wqe_stall_ns"] == 0.0
        assert what[f"{kind}_urma_wqe_stall_ns"] == pytest.approx(1.5)
        assert what[f"{kind}_urma_context_miss_frac"] == 0.0
        assert what[f"{kind}_GBps"] < base[f"{kind}_GBps"]


def test_trace_shows_the_reduction_window_where_hbm_is_full_and_urma_slowed(deepep, tmp_path):
    path = tmp_path / "combine.json"
    res = deepep("--set", "num_ranks=8", "--set", "tokens_per_rank=2048", "--set", "phase=combine",
                 "--trace", path)
    assert res.code == 0, res.err
    ev = json.loads(path.read_text())["traceEvents"]
    rank0 = next(e["pid"] for e in ev if e["ph"] == "M" and e["args"].get("name") == "rank000")

    def series(name):
        return sorted((e["ts"], e["args"]["busy"]) for e in ev
                      if e["ph"] == "C" and e["pid"] == rank0 and e["name"] == name)

    def at(points, ts):
        return [v for t, v in points if t <= ts][-1]

    hbm, tx = series("util hbm"), series("util urma_tx")
    full = [t for t, v in hbm if v > 0.99]
    assert full                                             # the AIVs' reduction fills the HBM
    assert at(tx, full[0]) < 0.7                            # ... and URMA gets only a share
    assert max(v for _, v in tx) > 0.95                     # ... until it ends


# -- what-if: hot experts --------------------------------------------------------------------------
def test_hot_experts_slow_dispatch_and_load_the_port_of_their_rank(deepep):
    common = ("--set", "num_ranks=8", "--set", "tokens_per_rank=1024", "--set", "phase=dispatch")
    uniform = ok_json(deepep(*common, "--set", "routing=uniform"))
    hot = ok_json(deepep(*common, "--set", "routing=hot", "--set", "hot_experts=4",
                         "--set", "hot_share=0.25"))
    # experts 0..3 sit on rank 0 (contiguous blocks of 32): its ingress is the hot spot, and
    # of its ingress the chip's URMA receive side (below the port's payload limit) is full
    assert hot["dispatch_GBps"] < uniform["dispatch_GBps"]
    assert hot["dispatch_ns"] > uniform["dispatch_ns"]
    assert hot["dispatch_hottest_links"][0]["link"] == "leaf0->rank0"
    assert hot["bottleneck"] == "rank0.urma_rx (dispatch)"
    assert hot["dispatch_chip_util_frac"]["urma_rx"] > hot["dispatch_hottest_links"][0]["util_frac"]
    assert hot["bound_dispatch_ns"] > uniform["bound_dispatch_ns"]


# -- trace ----------------------------------------------------------------------------------------
def test_trace_has_ranks_phases_network_counters_and_paired_arrows(deepep, tmp_path):
    path = tmp_path / "deepep.json"
    res = deepep("--set", "num_ranks=4", "--trace", path)
    assert res.code == 0, res.err
    trace = json.loads(path.read_text())
    assert trace["displayTimeUnit"] == "ns"
    ev = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(n for n in procs.values() if n.startswith("rank")) == [f"rank{r:03d}" for r in range(4)]
    net_pid = next(p for p, n in procs.items() if n == "network")
    spans = {e["name"] for e in ev if e["ph"] == "X"}
    assert {"dispatch", "combine", "entry barrier", "URMA transfer + drain",
            "exit barrier"} <= spans
    counters = [e for e in ev if e["ph"] == "C"]
    links = [e for e in counters if e["pid"] == net_pid]
    assert links and all("->" in e["name"] for e in links)
    assert any(e["name"] == "util rank0->leaf0" for e in links)
    # each rank's chip counters sit in its own process
    chip = {(procs[e["pid"]], e["name"]) for e in counters if e["pid"] != net_pid}
    assert chip == {(f"rank{r:03d}", f"util {x}") for r in range(4) for x in ("hbm", "urma_tx", "urma_rx")}
    s = {e["id"]: e for e in ev if e["ph"] == "s"}
    f = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert s and s.keys() == f.keys()
    assert all(f[i]["ts"] >= s[i]["ts"] and f[i]["pid"] != s[i]["pid"] for i in s)
    assert len(s) == 2 * 4 * 3                            # one train per ordered pair, per kernel


# -- user errors ----------------------------------------------------------------------------------
def test_num_ranks_must_divide_num_experts(deepep, user_error):
    user_error(deepep("--set", "num_ranks=12"), "deepep-normal.yaml (with --set overrides)",
                      "num_ranks = 12", "a divisor of num_experts (256)")


def test_a_topology_rank_count_that_does_not_divide_the_experts_names_the_topology(
        deepep, user_error):
    # num_ranks = 0 in the workload leaves the count to the topology file
    user_error(deepep("--set", "num_ranks=0", "--set", "topology.supernode.num_ranks=12"),
               "atlas950-supernode.yaml (with --set overrides)", "supernode.num_ranks = 12",
               "a divisor of num_experts (256)")


def test_num_ranks_above_what_the_clos_supports(deepep, user_error):
    user_error(deepep("--set", "num_ranks=5000"),
                      "num_ranks = 5000", "at most 1024 ranks")


def test_num_ranks_below_two(deepep, user_error):
    user_error(deepep("--set", "num_ranks=1"), "deepep-normal.yaml", "num_ranks = 1",
               "at least 2 ranks")


def test_routing_file_required_when_routing_is_file(deepep, user_error):
    user_error(deepep("--set", "routing=file"), "routing_file = ''", ".npy/.npz")


def test_routing_file_of_the_wrong_shape(deepep, tmp_path, user_error):
    path = tmp_path / "routes.npy"
    np.save(path, np.zeros((10, 6), dtype=np.int32))
    user_error(deepep("--set", "num_ranks=4", "--set", "routing=file",
                             "--set", f"routing_file={path}"),
                      str(path), "(10, 6)", "shape (512, 6)")


def test_routing_file_with_an_expert_id_out_of_range(deepep, tmp_path, user_error):
    ids = np.tile(np.arange(6, dtype=np.int32), (512, 1))
    ids[3, 2] = 300
    path = tmp_path / "routes.npy"
    np.save(path, ids)
    user_error(deepep("--set", "num_ranks=4", "--set", "routing=file",
                             "--set", f"routing_file={path}"),
                      str(path), "[3] = [0, 1, 300, 3, 4, 5]", "0..255")


def test_a_valid_routing_file_runs(deepep, tmp_path):
    ids = np.tile(np.array([0, 64, 128, 192, 1, 65], dtype=np.int32), (512, 1))  # ranks 0..3
    path = tmp_path / "routes.npy"
    np.save(path, ids)
    d = ok_json(deepep("--set", "num_ranks=4", "--set", "routing=file",
                       "--set", f"routing_file={path}"))
    assert d["routing_dest_ranks_per_token"] == 4.0
    assert d["dispatch_recv_tokens_mean"] == 512 * 4          # every token from all 4 ranks
    assert d["dispatch_recv_remote_tokens_mean"] == 512 * 3   # of which 3 over the network
    assert d["dispatch_GBps"] == pytest.approx(d["dispatch_network_GBps"] * 4 / 3)


def test_deepep_on_the_single_chip_topology(deepep, user_error):
    user_error(deepep(topology="ascend950dt.yaml"),
                      "ascend950dt.yaml", "supernode", "workload kind 'deepep'")


def test_unknown_send_order(deepep, user_error):
    user_error(deepep("--set", "send_order=lifo"), "deepep-normal.yaml", "send_order", "lifo",
               "jetty_fifo")


def test_in_order_jetties_through_the_cli(deepep):
    d = ok_json(deepep("--set", "num_ranks=4", "--set", "send_order=jetty_fifo",
                       "--set", "batch_window_ns=100"))
    assert d["dispatch_ns"] >= d["bound_dispatch_ns"] and d["combine_ns"] >= d["bound_combine_ns"]


def test_jetty_jitter_needs_in_order_jetties(deepep, user_error):
    user_error(deepep("--set", "jetty_jitter_ns=500"), "deepep-normal.yaml", "jetty_jitter_ns",
               "500", "send_order is jetty_fifo")


def test_jetty_jitter_is_seeded(deepep):
    """Same seed, same bytes; and the delays are there (the Jetties no longer start together)."""
    sets = ("--set", "num_ranks=4", "--set", "send_order=jetty_fifo", "--set", "batch_window_ns=100",
            "--set", "phase=dispatch", "--set", "seed=1")
    a, b = (deepep(*sets, "--set", "jetty_jitter_ns=3000") for _ in range(2))
    assert a.code == 0 and a.out == b.out
    still = ok_json(deepep(*sets))
    assert json.loads(a.out)["dispatch_ns"] > still["dispatch_ns"]
