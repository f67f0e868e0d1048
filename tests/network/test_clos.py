"""Clos graph builder, link indexing, path enumeration and the ECMP hash."""

from collections import Counter

import networkx as nx
import pytest

from simnode.errors import ConfigError
from simnode.network.clos import build_clos, candidate_paths, link_table, path_latency_ns
from simnode.network.routes import ecmp_choice
from simnode.config.supernode import SupernodeSpec


def spec(**kw) -> SupernodeSpec:
    base = dict(num_ranks=8, ports_per_rank=2, port_bandwidth_GBps=50.0, leaf_radix=8,
                spine_radix=8, num_spines=2, oversubscription=1.0, routing="ecmp",
                hop_latency_ns=200.0, link_latency_ns=100.0, mtu_bytes=4096,
                header_bytes_per_packet=64, wqe_processing_ns=0.0, doorbell_ns=0.0,
                wqebb_bytes=64, source="t.yaml")
    base.update(kw)
    return SupernodeSpec(**base)


def test_shape_and_capacities():
    s = spec()                         # 2 ranks per leaf (4 down + 4 up ports), 4 leaves
    g = build_clos(s)
    kinds = Counter(k for _, k in g.nodes(data="kind"))
    assert kinds == {"rank": 8, "leaf": 4, "spine": 2}
    assert g.number_of_edges() == 2 * 8 + 2 * 4 * 2
    assert g.edges["rank0", "leaf0"]["capacity_GBps"] == 100.0
    assert g.edges["leaf3", "spine1"]["capacity_GBps"] == 100.0   # 200 GB/s up over 2 spines
    assert all(d["latency_ns"] == 100.0 for _, _, d in g.edges(data=True))
    assert nx.is_strongly_connected(g)


def test_uplinks_reflect_oversubscription():
    g = build_clos(spec(oversubscription=2.0, leaf_radix=9))   # 3 ranks: 6 down, 3 up ports
    s = g.graph["spec"]
    assert s.ranks_per_leaf == 3
    up = g.edges["leaf0", "spine0"]["capacity_GBps"]
    assert up * s.num_spines == pytest.approx(3 * 100.0 / 2.0)


def test_link_ids_are_stable_and_documented():
    g = build_clos(spec())
    t = link_table(g)
    assert t.names[:4] == ("rank0->leaf0", "leaf0->rank0", "rank1->leaf0", "leaf0->rank1")
    assert t.names[16:20] == ("leaf0->spine0", "spine0->leaf0", "leaf0->spine1", "spine1->leaf0")
    assert len(t) == g.number_of_edges()
    assert link_table(build_clos(spec())).names == t.names


def test_paths_match_networkx_shortest_paths():
    g = build_clos(spec())
    t = link_table(g)
    ids = {e: i for i, e in enumerate(t.ends)}
    for a in range(8):
        for b in range(8):
            if a == b:
                assert candidate_paths(g, a, b) == [()]
                continue
            ours = sorted(candidate_paths(g, a, b))
            ref = sorted(tuple(ids[(u, v)] for u, v in zip(p, p[1:]))
                         for p in nx.all_shortest_paths(g, f"rank{a}", f"rank{b}"))
            assert ours == ref


def test_path_latency_counts_links_and_switch_hops():
    g = build_clos(spec())
    t = link_table(g)
    same_leaf = candidate_paths(g, 0, 1)[0]
    cross = candidate_paths(g, 0, 7)[0]
    assert path_latency_ns(g, same_leaf, t) == 2 * 100 + 200
    assert path_latency_ns(g, cross, t) == 4 * 100 + 3 * 200


def test_a_removed_link_is_routed_around():
    g = build_clos(spec())
    g.remove_edge("leaf0", "spine0")
    assert len(candidate_paths(g, 0, 7)) == 1


def test_single_leaf_has_no_spines():
    g = build_clos(spec(num_ranks=2, num_spines=0))
    assert not any(k == "spine" for _, k in g.nodes(data="kind"))
    assert candidate_paths(g, 0, 1) == [(0, 3)]


def test_build_rejects_impossible_shapes():
    with pytest.raises(ConfigError, match=r"t\.yaml: supernode\.num_spines = 0"):
        build_clos(spec(num_spines=0))


def test_ecmp_hash_is_deterministic_and_spreads():
    picks = [ecmp_choice(s, d, k, 64) for s in range(16) for d in range(16) for k in range(16)]
    assert picks == [ecmp_choice(s, d, k, 64) for s in range(16) for d in range(16)
                     for k in range(16)]
    counts = Counter(picks)
    assert set(counts) == set(range(64))
    assert max(counts.values()) < 2.5 * len(picks) / 64


def test_batched_routes_are_the_graphs_ecmp_paths_for_every_pair_and_key():
    # Routes.route gathers a batch's leaf-to-leaf paths from flat views of its [a, b, k]
    # tables; every message must get the link ids and latency of the path the graph and
    # ecmp_choice give it (spine paths several wide: k indexes them), self-messages none
    from simnode.network.routes import Routes
    import numpy as np
    g = build_clos(spec(num_ranks=12, ports_per_rank=1, leaf_radix=8, num_spines=4, spine_radix=6))
    table = link_table(g)
    routes = Routes.from_graph(g, "ecmp")
    n = routes.num_ranks
    src, dst, key = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), np.arange(5),
                                                       indexing="ij"))
    rows, lat = routes.route(src, dst, key)
    for i, (s, d, k) in enumerate(zip(src.tolist(), dst.tolist(), key.tolist())):
        paths = candidate_paths(g, s, d)
        path = paths[ecmp_choice(s, d, k, len(paths))]
        assert tuple(int(x) for x in rows[i] if x >= 0) == path, (s, d, k)
        assert lat[i] == pytest.approx(path_latency_ns(g, path, table) if path else 0.0)
