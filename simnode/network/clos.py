"""Two-tier Clos topology as a networkx graph, its link indexing and path enumeration.

``build_clos(spec)`` returns a ``networkx.DiGraph``: nodes ``rank{i}``, ``leaf{j}``,
``spine{s}`` (attribute ``kind``, ``index``; ranks carry ``leaf``, switches
``hop_latency_ns``), and one directed edge per link and direction with
``capacity_GBps``, ``latency_ns``, ``kind`` and a stable integer ``link_id``. The
graph keeps its spec in ``graph.graph["spec"]``. A single-leaf supernode has no
spine tier.

Link ids, in this order: for each rank r, ``rank r -> leaf`` (2r) and ``leaf -> rank r``
(2r+1); then for each leaf l and spine s, ``leaf l -> spine s`` and ``spine s -> leaf l``.

``link_table(graph)`` gives names, capacities and latencies indexed by link id
(``renumber_links`` closes the gaps left by removed links);
``candidate_paths(graph, src, dst)`` lists the shortest paths between two ranks as
tuples of link ids (same leaf: rank->leaf->rank; else one path per spine), read from
the graph, so a graph with a link removed routes around it; ``simnode.network.routes.
ecmp_choice`` is the deterministic flow hash that picks one of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from simnode.errors import ConfigError
from simnode.config.supernode import SupernodeSpec, check_shape


def rank_node(i: int) -> str:
    return f"rank{i}"


def leaf_node(j: int) -> str:
    return f"leaf{j}"


def spine_node(s: int) -> str:
    return f"spine{s}"


def build_clos(spec: SupernodeSpec) -> nx.DiGraph:
    """The Clos network of ``spec`` (validated with ``check_shape``); see the module docstring."""
    check_shape(spec)
    g = nx.DiGraph(spec=spec)
    rank_bw = spec.rank_bandwidth_GBps
    lat = spec.link_latency_ns
    num_leaves = spec.num_leaves
    for j in range(num_leaves):
        g.add_node(leaf_node(j), kind="leaf", index=j, hop_latency_ns=spec.hop_latency_ns)
    link_id = 0
    for i in range(spec.num_ranks):
        r, leaf = rank_node(i), leaf_node(spec.leaf_of(i))
        g.add_node(r, kind="rank", index=i, leaf=spec.leaf_of(i))
        g.add_edge(r, leaf, capacity_GBps=rank_bw, latency_ns=lat, kind="rank_up", link_id=link_id)
        g.add_edge(leaf, r, capacity_GBps=rank_bw, latency_ns=lat, kind="rank_down",
                   link_id=link_id + 1)
        link_id += 2
    if num_leaves > 1:
        # every leaf spreads its uplink capacity evenly over the spines (module docstring)
        up_bw = spec.leaf_spine_link_GBps
        for s in range(spec.num_spines):
            g.add_node(spine_node(s), kind="spine", index=s, hop_latency_ns=spec.hop_latency_ns)
        for j in range(num_leaves):
            for s in range(spec.num_spines):
                leaf, spine = leaf_node(j), spine_node(s)
                g.add_edge(leaf, spine, capacity_GBps=up_bw, latency_ns=lat, kind="leaf_up",
                           link_id=link_id)
                g.add_edge(spine, leaf, capacity_GBps=up_bw, latency_ns=lat, kind="spine_down",
                           link_id=link_id + 1)
                link_id += 2
    if not nx.is_strongly_connected(g):
        raise ConfigError(spec.source or "<SupernodeSpec>", "supernode", spec.num_ranks,
                          "a connected network (some ranks cannot reach each other)")
    return g


@dataclass(frozen=True)
class LinkTable:
    """The links of a graph indexed by ``link_id``."""
    names: tuple[str, ...]              #: "u->v"
    ends: tuple[tuple[str, str], ...]   #: (u, v) node names
    kinds: tuple[str, ...]              #: rank_up, rank_down, leaf_up, spine_down
    capacity_GBps: np.ndarray           #: per direction
    latency_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.names)


def link_table(graph: nx.DiGraph) -> LinkTable:
    """Names, ends, capacities and latencies of every link, in ``link_id`` order."""
    edges = sorted(graph.edges(data=True), key=lambda e: e[2]["link_id"])
    ids = [d["link_id"] for _, _, d in edges]
    if ids != list(range(len(ids))):
        raise ValueError("link ids of the graph are not 0..n-1 without gaps "
                         "(after removing links, call renumber_links(graph))")
    for u, v, d in edges:
        if not d["capacity_GBps"] > 0:
            raise ValueError(f"link {u}->{v} has capacity {d['capacity_GBps']!r} GB/s; expected > 0")
    return LinkTable(
        names=tuple(f"{u}->{v}" for u, v, _ in edges),
        ends=tuple((u, v) for u, v, _ in edges),
        kinds=tuple(d["kind"] for _, _, d in edges),
        capacity_GBps=np.array([d["capacity_GBps"] for _, _, d in edges], dtype=float),
        latency_ns=np.array([d["latency_ns"] for _, _, d in edges], dtype=float),
    )


def renumber_links(graph: nx.DiGraph) -> nx.DiGraph:
    """Make link ids contiguous again (keeping their order), e.g. after removing links;
    changes ``graph`` in place and returns it."""
    edges = sorted(graph.edges(data=True), key=lambda e: e[2]["link_id"])
    for new, (_, _, d) in enumerate(edges):
        d["link_id"] = new
    return graph


def _spines_between(graph: nx.DiGraph, leaf_a: str, leaf_b: str) -> list[str]:
    spines = [n for n in graph.successors(leaf_a)
              if graph.nodes[n]["kind"] == "spine" and graph.has_edge(n, leaf_b)]
    return sorted(spines, key=lambda n: graph.nodes[n]["index"])


def candidate_paths(graph: nx.DiGraph, src_rank: int, dst_rank: int) -> list[tuple[int, ...]]:
    """Shortest paths from rank ``src_rank`` to ``dst_rank`` as tuples of link ids.

    Same rank: ``[()]`` (no network). Same leaf: one path. Otherwise one path per spine
    joined to both leaves, in spine order. Raises ValueError if there is no path.
    """
    if src_rank == dst_rank:
        return [()]
    s, d = rank_node(src_rank), rank_node(dst_rank)
    ls, ld = leaf_node(graph.nodes[s]["leaf"]), leaf_node(graph.nodes[d]["leaf"])
    e = graph.edges
    up, down = e[s, ls]["link_id"], e[ld, d]["link_id"]
    if ls == ld:
        return [(up, down)]
    paths = [(up, e[ls, sp]["link_id"], e[sp, ld]["link_id"], down)
             for sp in _spines_between(graph, ls, ld)]
    if not paths:
        raise ValueError(f"no path from {s} to {d}: {ls} and {ld} share no spine")
    return paths


def path_latency_ns(graph: nx.DiGraph, path: tuple[int, ...], table: LinkTable) -> float:
    """Latency of a path: its links' latencies plus the hop latency of every switch on it."""
    total = 0.0
    for link in path:
        u, v = table.ends[link]
        total += table.latency_ns[link]
        total += graph.nodes[v].get("hop_latency_ns", 0.0)   # ranks have no hop latency
    return total

