"""Workload kind ``transport`` (put microbenchmark): closed-form p2p time, all-to-all at the
port limit on a non-blocking Clos, per-message engine costs, conservation over random
patterns, determinism, trace, report, and every user error (exit 2)."""

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from simnode.workloads.loader import load_inputs
from simnode.workloads.kinds.transport import TransportSim, peers_of


@pytest.fixture
def transport(cli, repo_root):
    """transport("--set", "pattern=ring", ...) -> CliResult of ``simnode run ... --json``."""
    def run(*extra, json_out=True):
        args = ["run", repo_root / "topologies" / "atlas950-supernode.yaml",
                repo_root / "workloads" / "transport-alltoall.yaml", *extra]
        return cli(*args, *(["--json"] if json_out else []))
    return run


def ok_json(res) -> dict:
    assert res.code == 0, res.err
    return json.loads(res.out)


def test_p2p_time_is_doorbell_plus_wire_time_plus_latency_and_ack(transport, repo_root):
    """One put alone on its path: doorbell + its bytes at the slower of the rank's ports (wire
    bytes) and the chip's URMA ceiling (payload) + one-way latency + the ack's way back
    (ranks 0 and 1 share a leaf: 2 links + 1 switch hop each way)."""
    size = 4 * 2**20
    d = ok_json(transport("--set", "pattern=p2p", "--set", f"bytes_per_peer={size}"))
    spec = load_inputs(repo_root / "topologies" / "atlas950-supernode.yaml",
                       repo_root / "workloads" / "transport-alltoall.yaml").topology.supernode
    wire = size + math.ceil(size / spec.mtu_bytes) * spec.header_bytes_per_packet
    one_way = 2 * spec.link_latency_ns + spec.hop_latency_ns
    transfer = max(wire / (spec.ports_per_rank * spec.port_bandwidth_GBps), size / spec.urma_payload_GBps)
    expected = spec.doorbell_ns + transfer + 2 * one_way
    assert d["transport_ns"] == pytest.approx(expected, rel=1e-9)
    assert d["senders"] == 1 and d["aggregate_GBps"] == pytest.approx(d["transport_GBps"])


def test_alltoall_across_spines_runs_near_the_port_payload_limit(transport):
    """A uniform all-to-all of large puts on the non-blocking Clos (32 ranks: 4 leaves, so
    most traffic crosses the spines) and no chip-side URMA ceiling is bound by the rank
    ports: close to the bound, never under it, and close to the port payload limit."""
    d = ok_json(transport("--set", "num_ranks=32", "--set", "bytes_per_peer=4194304",
                          "--set", "topology.supernode.urma_payload_GBps=0"))
    assert d["transport_ns"] >= d["bound_transport_ns"]
    assert d["transport_sim_over_bound"] < 1.03
    assert 0.97 < d["transport_frac_of_port_limit"] <= 1.0
    assert d["bottleneck"].startswith("link rank")


def test_alltoall_under_the_urma_ceiling_runs_at_it_and_names_it(transport):
    """With the shipped ceiling (below the ports' payload limit) the same all-to-all runs at
    the ceiling: the bound counts it, and the result names a rank's URMA send side."""
    d = ok_json(transport("--set", "num_ranks=32", "--set", "bytes_per_peer=4194304"))
    assert d["urma_payload_limit_GBps"] < d["port_payload_limit_GBps"]
    assert d["transport_ns"] >= d["bound_transport_ns"]
    assert d["transport_sim_over_bound"] < 1.03
    assert 0.97 < d["transport_frac_of_rank_limit"] <= 1.0
    assert d["bottleneck"].startswith("rank") and d["bottleneck"].endswith(".urma_tx")


def test_splitting_a_put_into_more_messages_is_never_faster(transport):
    """Each WQE costs the sender's URMA engine wqe_processing_ns: at 64 B messages the
    engine, not the link, sets the rate."""
    runs = [ok_json(transport("--set", "bytes_per_peer=262144", "--set", f"messages_per_peer={m}"))
            for m in (1, 64, 4096)]
    times = [d["transport_ns"] for d in runs]
    assert times == sorted(times) and times[-1] > 1.5 * times[0]
    assert runs[-1]["bottleneck"].endswith(".urma")


def test_ring_and_alltoall_load_every_rank_port_equally(transport):
    for pattern in ("ring", "alltoall"):
        d = ok_json(transport("--set", f"pattern={pattern}", "--set", "bytes_per_peer=1048576"))
        utils = [h["util_frac"] for h in d["transport_hottest_links"]]
        assert max(utils) - min(utils) < 1e-3, pattern


def test_same_inputs_same_bytes(transport):
    a = transport("--set", "num_ranks=16", "--set", "bytes_per_peer=65536")
    b = transport("--set", "num_ranks=16", "--set", "bytes_per_peer=65536")
    assert a.code == 0 and a.out == b.out


@settings(max_examples=25, deadline=None)
@given(pattern=st.sampled_from(["p2p", "ring", "alltoall"]), ranks=st.integers(2, 24),
       size=st.integers(1, 3 * 2**20), messages=st.integers(1, 40))
def test_every_put_is_sent_once_and_bounded(repo_root, pattern, ranks, size, messages):
    """Conservation (the run raises if payload sent != planned) and the bound, on random
    patterns, rank counts, sizes and message splits."""
    inputs = load_inputs(repo_root / "topologies" / "atlas950-supernode.yaml",
                         repo_root / "workloads" / "transport-alltoall.yaml",
                         {"pattern": pattern, "num_ranks": ranks, "bytes_per_peer": size,
                          "messages_per_peer": messages})
    topology = inputs.kind.check(inputs.topology, inputs.params)
    peers = peers_of(pattern, ranks)
    out = TransportSim(topology, peers, size, messages).run()
    assert out["traffic"].sum() == size * sum(len(p) for p in peers)
    assert out["rank_ns"].max() >= out["bound_ns"]
    assert out["wire_bytes"] >= 2 * out["traffic"].sum()     # each byte crosses >= 2 links


def test_trace_has_transport_tracks_network_counters_and_arrows(transport, tmp_path):
    path = tmp_path / "t.json"
    res = transport("--set", "bytes_per_peer=65536", "--trace", path, json_out=False)
    assert res.code == 0, res.err
    events = json.loads(path.read_text())["traceEvents"]
    threads = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "rank000.transport" in threads and "rank0->leaf0" in threads
    spans = {e["name"] for e in events if e["ph"] == "X"}
    assert {"transport", "doorbell", "puts (transfer + ack)"} <= spans
    starts = [e for e in events if e["ph"] == "s"]
    assert len(starts) == 8 * 7 and len(starts) == sum(1 for e in events if e["ph"] == "f")
    assert any(e["ph"] == "C" for e in events)


def test_report_of_a_transport_run(cli, repo_root, tmp_path):
    out = tmp_path / "run"
    res = cli("run", repo_root / "topologies" / "atlas950-supernode.yaml",
              repo_root / "workloads" / "transport-alltoall.yaml", "--set", "bytes_per_peer=65536",
              "--out", out)
    assert res.code == 0, res.err
    assert (out / "series.json").exists()
    res = cli("report", out, "-o", tmp_path / "r.html")
    assert res.code == 0, res.err
    page = (tmp_path / "r.html").read_text()
    assert "transport: phases_us" in page and "transport: hottest_links" in page and "link rank" in page
    assert 'alt="link_util transport-alltoall"' in page and 'alt="chip_util transport-alltoall"' in page


def test_uncached_peer_contexts_stall_each_put(transport):
    """What-if context cache: an 8-rank all-to-all posts to 7 peers; with room for 7 nothing
    changes, with none every one of a rank's 7 x 64 WQEs stalls the engine for the miss."""
    sets = ("--set", "messages_per_peer=64", "--set", "bytes_per_peer=4194304")
    miss = "topology.supernode.urma_context_miss_ns=100"
    base = ok_json(transport(*sets))["transport_ns"]
    fits = ok_json(transport(*sets, "--set", miss, "--set",
                             "topology.supernode.urma_context_cache_entries=7"))["transport_ns"]
    stalled = ok_json(transport(*sets, "--set", miss))["transport_ns"]
    assert fits == base
    assert stalled == pytest.approx(base + 7 * 64 * 100, rel=0.01)


def test_per_peer_wqe_cost_stalls_each_put_by_the_peer_count(transport):
    """What-if linear shape: an 8-rank all-to-all posts to 7 peers, so each of a rank's
    7 x 64 WQEs stalls the engine for 7 x 2 ns."""
    sets = ("--set", "messages_per_peer=64", "--set", "bytes_per_peer=4194304")
    base = ok_json(transport(*sets))["transport_ns"]
    stalled = ok_json(transport(*sets, "--set", "topology.supernode.urma_wqe_ns_per_peer=2"))
    assert stalled["transport_ns"] == pytest.approx(base + 7 * 64 * 7 * 2, rel=0.01)


# -- user errors -------------------------------------------------------------------------------
def test_unknown_pattern(transport, user_error):
    user_error(transport("--set", "pattern=broadcast"), "workloads/transport-alltoall.yaml",
               "pattern", "broadcast", "alltoall")


def test_p2p_destination_outside_the_supernode(transport, user_error):
    user_error(transport("--set", "pattern=p2p", "--set", "p2p_dst=8"),
               "transport-alltoall.yaml", "p2p_dst", "8", "0..7")


def test_p2p_to_itself(transport, user_error):
    user_error(transport("--set", "pattern=p2p", "--set", "p2p_dst=0"),
               "transport-alltoall.yaml", "p2p_dst", "other than p2p_src")


def test_one_rank(transport, user_error):
    user_error(transport("--set", "num_ranks=1"), "transport-alltoall.yaml", "num_ranks", "at least 2")


def test_zero_bytes(transport, user_error):
    user_error(transport("--set", "bytes_per_peer=0"), "transport-alltoall.yaml", "bytes_per_peer")


def test_transport_on_the_single_chip_topology(cli, repo_root, user_error):
    res = cli("run", repo_root / "topologies" / "ascend950dt.yaml",
              repo_root / "workloads" / "transport-alltoall.yaml")
    user_error(res, "ascend950dt.yaml", "supernode", "transport")


def test_context_miss_without_the_urma_ceiling(transport, user_error):
    user_error(transport("--set", "topology.supernode.urma_context_miss_ns=10",
                         "--set", "topology.supernode.urma_payload_GBps=0"),
               "atlas950-supernode.yaml", "supernode.urma_context_miss_ns", "10",
               "urma_payload_GBps > 0")


@pytest.mark.parametrize("ranks", [1, 2, 3, 8, 128])
def test_alltoall_peers_are_every_other_rank_in_order(ranks):
    """``peers_of("alltoall")``: each rank's peers are all the others, ascending (the order
    the puts are posted in, so the order of the share's rows)."""
    assert peers_of("alltoall", ranks) == [[d for d in range(ranks) if d != r] for r in range(ranks)]
