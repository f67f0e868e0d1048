"""Full-mesh shape (netlayer 0 of the 8-card box): graph, routing, closed forms, bound,
the shipped topology file, and its user errors."""

import json

import numpy as np
import pytest
import simpy

from simnode.config.topology import load_topology_raw, topology_from_mapping
from simnode.errors import ConfigError
from simnode.network.bound import analytical_bound_ns, port_loads
from simnode.network.flows import FlowNetwork
from simnode.network.mesh import build_full_mesh, mesh_link_id
from simnode.config.supernode import SupernodeSpec, supernode_from_mapping


def spec(**kw) -> SupernodeSpec:
    """4 ranks, 3 ports of 100 GB/s each (one per peer), no fixed costs unless asked."""
    base = dict(num_ranks=4, ports_per_rank=3, port_bandwidth_GBps=100.0, leaf_radix=2,
                spine_radix=2, num_spines=0, oversubscription=1.0, routing="spray",
                hop_latency_ns=0.0, link_latency_ns=0.0, mtu_bytes=1000,
                header_bytes_per_packet=0, wqe_processing_ns=0.0, doorbell_ns=0.0,
                wqebb_bytes=64, shape="full_mesh", source="t.yaml")
    base.update(kw)
    return SupernodeSpec(**base)


def run_sends(net, sends):
    done = {}

    def one(i, src, dst, size):
        yield net.send(src, dst, size, tag=i)
        done[i] = net.env.now

    for i, (src, dst, size) in enumerate(sends):
        net.env.process(one(i, src, dst, size))
    net.env.run()
    return done


def test_graph_has_one_link_per_ordered_pair_numbered_by_mesh_link_id():
    g = build_full_mesh(spec(num_ranks=8, ports_per_rank=7))
    assert g.number_of_edges() == 8 * 7
    for u, v, d in g.edges(data=True):
        a, b = g.nodes[u]["index"], g.nodes[v]["index"]
        assert d["link_id"] == mesh_link_id(a, b, 8) and d["kind"] == "peer"
        assert d["capacity_GBps"] == 100.0


def test_spare_ports_are_unused_and_extra_ports_widen_each_link():
    assert spec(num_ranks=4, ports_per_rank=7).peer_link_GBps == 200.0    # 2 per peer, 1 spare
    assert spec(num_ranks=8, ports_per_rank=7).peer_link_GBps == 100.0


def test_one_message_takes_its_own_link():
    net = FlowNetwork(simpy.Environment(), spec(link_latency_ns=7.0))
    path, latency = net.route(2, 1)
    assert [net.share.names[r] for r in path] == ["rank2->rank1"] and latency == 7.0
    done = run_sends(net, [(2, 1, 1e6)])
    assert done[0] == pytest.approx(7.0 + 1e6 / 100.0)


def test_all_to_all_runs_every_link_in_parallel_at_the_bound():
    """Each pair has its own link: a uniform all-to-all takes what one message takes."""
    net = FlowNetwork(simpy.Environment(), spec())
    sends = [(a, b, 5e5) for a in range(4) for b in range(4) if a != b]
    done = run_sends(net, sends)
    traffic = np.full((4, 4), 5e5)
    assert max(done.values()) == pytest.approx(5e5 / 100.0)
    assert max(done.values()) == pytest.approx(analytical_bound_ns(traffic, spec()))
    assert {p.name for p in port_loads(traffic, spec())} == {net.share.names[r] for r in net.ports}


def test_two_messages_to_one_peer_share_the_link():
    net = FlowNetwork(simpy.Environment(), spec())
    done = run_sends(net, [(0, 1, 1e6), (0, 1, 1e6), (0, 2, 1e6)])
    assert done[0] == done[1] == pytest.approx(2e6 / 100.0)
    assert done[2] == pytest.approx(1e6 / 100.0)


def test_shipped_box_topology_loads_and_runs_transport(cli, repo_root):
    raw = load_topology_raw(repo_root / "topologies" / "npu8p-box-mesh.yaml")
    topo = topology_from_mapping(raw, "npu8p-box-mesh.yaml")
    sn = topo.supernode
    assert (sn.shape, sn.num_ranks, sn.ports_per_peer) == ("full_mesh", 8, 1)
    res = cli("run", repo_root / "topologies" / "npu8p-box-mesh.yaml",
              repo_root / "workloads" / "transport-alltoall.yaml", "--set", "bytes_per_peer=1048576", "--json")
    assert res.code == 0, res.err
    d = json.loads(res.out)
    # the all-to-all is held by the chip's URMA ceiling (the file calibrates it on S13)
    assert d["bottleneck"].endswith(".urma_tx") and d["transport_ns"] >= d["bound_transport_ns"]
    assert len(d["transport_hottest_links"]) == 5


def test_deepep_runs_on_the_mesh(cli, repo_root):
    res = cli("run", repo_root / "topologies" / "npu8p-box-mesh.yaml",
              repo_root / "workloads" / "deepep-normal.yaml", "--set", "tokens_per_rank=512", "--json")
    assert res.code == 0, res.err
    d = json.loads(res.out)
    assert d["dispatch_ns"] >= d["bound_dispatch_ns"] and d["combine_ns"] >= d["bound_combine_ns"]
    assert "->rank" in d["dispatch_hottest_links"][0]["link"]


# -- user errors -------------------------------------------------------------------------------
MESH = {"shape": "full_mesh", "num_ranks": 8, "ports_per_rank": 7, "port_bandwidth_GBps": 50.0,
        "link_latency_ns": 100, "mtu_bytes": 4096, "header_bytes_per_packet": 64,
        "wqe_processing_ns": 10, "doorbell_ns": 200, "wqebb_bytes": 64}


def test_a_mesh_needs_no_switch_keys():
    s = supernode_from_mapping(dict(MESH), "box.yaml")
    assert s.shape == "full_mesh" and s.num_spines == 0


def test_too_few_ports_for_the_peers_names_the_key():
    with pytest.raises(ConfigError) as e:
        supernode_from_mapping({**MESH, "ports_per_rank": 6}, "box.yaml")
    msg = str(e.value)
    assert "box.yaml" in msg and "supernode.ports_per_rank" in msg and "= 6" in msg and "at least 7" in msg


def test_unknown_shape_lists_the_shapes():
    with pytest.raises(ConfigError) as e:
        supernode_from_mapping({**MESH, "shape": "torus"}, "box.yaml")
    msg = str(e.value)
    assert "supernode.shape" in msg and "torus" in msg and "full_mesh" in msg and "clos" in msg


def test_a_clos_still_needs_its_switch_keys():
    with pytest.raises(ConfigError) as e:
        supernode_from_mapping({**MESH, "shape": "clos"}, "box.yaml")
    assert "leaf_radix" in str(e.value)


def test_more_ranks_than_the_box_has_ports_for_is_a_user_error(cli, repo_root, user_error):
    res = cli("run", repo_root / "topologies" / "npu8p-box-mesh.yaml",
              repo_root / "workloads" / "transport-alltoall.yaml", "--set", "num_ranks=16")
    user_error(res, "npu8p-box-mesh.yaml", "ports_per_rank", "16 ranks")

