"""Where messages go: the network's ports (the resources a message crosses) and each
(src, dst) pair's path through them, computed for many pairs at once.

``Routes.from_spec(spec, routing)`` builds them for a Clos or full mesh straight from
the spec (arithmetic, no graph: fast at 1024+ ranks); ``Routes.from_graph(graph,
routing)`` from a networkx graph of ``simnode.network.clos`` (e.g. one with links
removed, which routes around them). Both number links as ``build_clos`` /
``build_full_mesh`` do (tests check that they agree).

Ports: every link is one port, except with ``spray`` routing, where each leaf's uplinks
(and its downlinks from the spines) form one aggregate port ``leafJ->spines`` /
``spines->leafJ`` of ``num_spines x`` the slowest member's capacity: an even split over
all spines loads them equally, so the aggregate is exact and costs one port per leaf
instead of one per spine.

``route(src, dst, flow_key)`` (arrays) returns each message's ports (rows padded with
-1) and path latency (links' propagation + the hop latency of each switch on it).
``ecmp`` picks one spine per (src, dst, flow_key) by a fixed hash (``ecmp_choice``), as a
RoCE queue pair's source port would; ``spray`` spreads over every spine.

``port_loads(traffic)`` puts a ``[src, dst]`` (or ``[src, dst, flow_key]``) traffic
matrix on the ports by the same routes, the basis of ``simnode.network.bound``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simnode.config.supernode import ROUTING_POLICIES, SupernodeSpec, check_shape
from simnode.engine.mix import MASK64, splitmix64, splitmix64_array


def ecmp_choice(src_rank: int, dst_rank: int, flow_key: int, num_paths: int) -> int:
    """Index of the path ECMP picks for a flow: a fixed hash of (src, dst, flow_key).

    Deterministic across runs and processes (not Python's ``hash``); ``flow_key`` plays
    the role of the queue's UDP source port in RoCE ECMP, e.g. the sender's Jetty index.
    """
    h = splitmix64(splitmix64(splitmix64(src_rank) ^ dst_rank) ^ (flow_key & MASK64))
    return h % num_paths


def ecmp_choices(src: np.ndarray, dst: np.ndarray, flow_key: np.ndarray,
                 num_paths: np.ndarray) -> np.ndarray:
    """``ecmp_choice`` for arrays (the same hash, in wrapping uint64 arithmetic)."""
    u = np.uint64
    h = splitmix64_array(splitmix64_array(splitmix64_array(np.asarray(src).astype(u))
                                          ^ np.asarray(dst).astype(u))
                         ^ np.asarray(flow_key).astype(np.int64).astype(u))
    return (h % np.asarray(num_paths).astype(u)).astype(np.int64)


@dataclass(frozen=True)
class Routes:
    """Ports and paths of one network; see the module docstring."""
    spec: SupernodeSpec
    routing: str
    port_names: tuple                  #: per port
    port_capacity_GBps: np.ndarray     #: per port, per direction (wire bytes)
    link_names: tuple                  #: every physical link, in link-id order
    link_port: np.ndarray              #: the port each link belongs to
    rank_leaf: np.ndarray              #: [rank] leaf index (0 in a full mesh)
    up_port: np.ndarray                #: [rank] port of its link into the leaf (mesh: unused)
    down_port: np.ndarray              #: [rank] port of its link from the leaf
    up_lat: np.ndarray                 #: [rank] latency to its leaf, the leaf's hop included
    down_lat: np.ndarray               #: [rank] latency from its leaf
    mid_n: np.ndarray                  #: [leaf a, leaf b] paths between two leaves (0: same leaf)
    mid_up: np.ndarray                 #: [a, b, k] port from leaf a to the k-th spine
    mid_down: np.ndarray               #: [a, b, k] port from that spine to leaf b
    mid_lat: np.ndarray                #: [a, b, k] latency leaf a -> spine -> leaf b (+ b's hop)
    mesh_port: np.ndarray | None       #: full mesh: [src, dst] port of the direct link
    mesh_lat: np.ndarray | None

    @property
    def num_ranks(self) -> int:
        return self.rank_leaf.shape[0]

    @property
    def num_ports(self) -> int:
        return len(self.port_names)

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec: SupernodeSpec, routing: str | None = None) -> "Routes":
        """The routes of ``spec``'s Clos or full mesh (validated with ``check_shape``)."""
        check_shape(spec)
        routing = routing or spec.routing
        if spec.shape == "full_mesh":
            return cls._mesh(spec, routing)
        if routing not in ROUTING_POLICIES:
            raise ValueError(f"routing {routing!r}: expected one of {ROUTING_POLICIES}")
        R, L, S = spec.num_ranks, spec.num_leaves, spec.num_spines
        leaf = np.arange(R) // spec.ranks_per_leaf
        leaf_of = leaf.tolist()                 # (Python ints: cheaper to format)
        names = [n for r in range(R)
                 for n in (f"rank{r}->leaf{leaf_of[r]}", f"leaf{leaf_of[r]}->rank{r}")]
        if L > 1:
            names += [n for j in range(L) for s in range(S)
                      for n in (f"leaf{j}->spine{s}", f"spine{s}->leaf{j}")]
        caps = np.full(len(names), spec.rank_bandwidth_GBps)
        caps[2 * R:] = spec.leaf_spine_link_GBps
        lat = np.full(len(names), spec.link_latency_ns)
        hop = spec.hop_latency_ns
        # per leaf pair: the spine paths (latency: up link + spine hop + down link + leaf b hop)
        if L > 1:
            up_ids = 2 * R + 2 * (np.arange(L)[:, None] * S + np.arange(S)[None, :])   # [a, s]
            down_ids = up_ids + 1                                                       # [b, s]
            mid_up = np.broadcast_to(up_ids[:, None, :], (L, L, S))
            mid_down = np.broadcast_to(down_ids[None, :, :], (L, L, S))
            mid_lat = np.full((L, L, S), 2 * spec.link_latency_ns + 2 * hop)
            mid_n = np.full((L, L), S)
        else:
            mid_up = mid_down = np.zeros((1, 1, 1), dtype=np.int64)
            mid_lat = np.zeros((1, 1, 1))
            mid_n = np.zeros((1, 1), dtype=np.int64)
        np.fill_diagonal(mid_n, 0)
        leaf_ups = [2 * R + 2 * (j * S + np.arange(S)) for j in range(L)] if L > 1 else []
        leaf_downs = [u + 1 for u in leaf_ups]
        return cls._finish(spec, routing, tuple(names), caps, lat, leaf, np.arange(R) * 2,
                           np.arange(R) * 2 + 1, np.full(L, hop), mid_n, mid_up, mid_down, mid_lat,
                           leaf_ups, leaf_downs)

    @classmethod
    def from_graph(cls, graph, routing: str | None = None) -> "Routes":
        """The routes of a graph built by ``simnode.network.clos`` / ``mesh`` (links may have
        been removed; ``renumber_links`` first): shortest paths read from the graph."""
        from simnode.network.clos import link_table, renumber_links
        graph = renumber_links(graph.copy())
        spec: SupernodeSpec = graph.graph["spec"]
        routing = routing or spec.routing
        table = link_table(graph)
        if spec.shape == "full_mesh":
            return cls._mesh(spec, routing, table, graph)
        if routing not in ROUTING_POLICIES:
            raise ValueError(f"routing {routing!r}: expected one of {ROUTING_POLICIES}")
        nodes = graph.nodes
        R = sum(1 for _, k in nodes(data="kind") if k == "rank")
        L = sum(1 for _, k in nodes(data="kind") if k == "leaf")
        leaf = np.array([nodes[f"rank{r}"]["leaf"] for r in range(R)])
        e = graph.edges
        up = np.array([e[f"rank{r}", f"leaf{leaf[r]}"]["link_id"] for r in range(R)])
        down = np.array([e[f"leaf{leaf[r]}", f"rank{r}"]["link_id"] for r in range(R)])
        hop = np.array([nodes[f"leaf{j}"].get("hop_latency_ns", 0.0) for j in range(L)])
        paths = {}
        for a in range(L):
            for b in range(L):
                if a == b:
                    continue
                spines = sorted((n for n in graph.successors(f"leaf{a}")
                                 if nodes[n]["kind"] == "spine" and graph.has_edge(n, f"leaf{b}")),
                                key=lambda n: nodes[n]["index"])
                paths[(a, b)] = [(e[f"leaf{a}", sp]["link_id"], e[sp, f"leaf{b}"]["link_id"],
                                  table.latency_ns[e[f"leaf{a}", sp]["link_id"]]
                                  + nodes[sp].get("hop_latency_ns", 0.0)
                                  + table.latency_ns[e[sp, f"leaf{b}"]["link_id"]] + hop[b])
                                 for sp in spines]
        width = max([len(p) for p in paths.values()] + [1])
        mid_n = np.zeros((L, L), dtype=np.int64)
        mid_up = np.zeros((L, L, width), dtype=np.int64)
        mid_down = np.zeros((L, L, width), dtype=np.int64)
        mid_lat = np.zeros((L, L, width))
        for (a, b), ps in paths.items():
            if not ps:
                raise ValueError(f"no path from leaf{a} to leaf{b}: they share no spine")
            mid_n[a, b] = len(ps)
            for k, (u, d, lt) in enumerate(ps):
                mid_up[a, b, k], mid_down[a, b, k], mid_lat[a, b, k] = u, d, lt
        kinds = table.kinds
        leaf_ups = [np.array([i for i, (u, _) in enumerate(table.ends)
                              if kinds[i] == "leaf_up" and u == f"leaf{j}"], dtype=np.int64)
                    for j in range(L)]
        leaf_downs = [np.array([i for i, (_, v) in enumerate(table.ends)
                                if kinds[i] == "spine_down" and v == f"leaf{j}"], dtype=np.int64)
                      for j in range(L)]
        return cls._finish(spec, routing, table.names, table.capacity_GBps, table.latency_ns,
                           leaf, up, down, hop, mid_n, mid_up, mid_down, mid_lat, leaf_ups,
                           leaf_downs)

    @classmethod
    def _finish(cls, spec, routing, names, caps, lat, leaf, up, down, leaf_hop, mid_n, mid_up,
                mid_down, mid_lat, leaf_ups, leaf_downs) -> "Routes":
        """Ports from links (spray: each leaf's uplinks and downlinks folded into one
        aggregate each); ``leaf_ups[a]`` / ``leaf_downs[b]``: link ids of a leaf's links to
        and from the spines."""
        L = leaf_hop.shape[0]
        caps = np.asarray(caps, dtype=float)
        lat = np.asarray(lat, dtype=float)
        if routing == "spray" and L > 1:
            rank_links = np.sort(np.concatenate([up, down]))
            link_port = np.full(len(names), -1, dtype=np.int64)
            link_port[rank_links] = np.arange(rank_links.size)
            port_names = [names[i] for i in rank_links.tolist()]
            port_caps = caps[rank_links].tolist()
            base = len(port_names)
            # every pair of leaves: mid_n[a, b] == len(leaf_ups[a]) == len(leaf_downs[b]), the
            # first pair that is not (in row order) named
            ups = np.array([len(u) for u in leaf_ups])
            downs = np.array([len(d) for d in leaf_downs])
            bad = ~((mid_n == ups[:, None]) & (ups[:, None] == downs[None, :]))
            np.fill_diagonal(bad, False)
            if bad.any():
                a, b = np.argwhere(bad)[0].tolist()
                raise ValueError(f"spray needs leaf{a} and leaf{b} joined by every spine "
                                 f"either of them uses; use routing='ecmp' for this graph")
            for a in range(L):
                link_port[leaf_ups[a]] = base + a
                port_names.append(f"leaf{a}->spines")
                # an even split: the slowest member limits the aggregate
                port_caps.append(len(leaf_ups[a]) * float(caps[leaf_ups[a]].min()))
            for b in range(L):
                link_port[leaf_downs[b]] = base + L + b
                port_names.append(f"spines->leaf{b}")
                port_caps.append(len(leaf_downs[b]) * float(caps[leaf_downs[b]].min()))
            # the last byte arrives over the slowest spine path
            agg_lat = np.where(mid_n > 0, np.max(np.where(
                np.arange(mid_lat.shape[2])[None, None, :] < mid_n[:, :, None], mid_lat, -np.inf),
                axis=2), 0.0)
            mid_up = np.broadcast_to((base + np.arange(L))[:, None, None], (L, L, 1)).copy()
            mid_down = np.broadcast_to((base + L + np.arange(L))[None, :, None], (L, L, 1)).copy()
            mid_lat = agg_lat[:, :, None]
            mid_n = np.where(mid_n > 0, 1, 0)
        else:
            link_port = np.arange(len(names), dtype=np.int64)
            port_names, port_caps = list(names), list(caps)
            mid_up, mid_down = link_port[mid_up], link_port[mid_down]
        return cls(spec, routing, tuple(port_names), np.asarray(port_caps, dtype=float),
                   tuple(names), link_port, leaf, link_port[up], link_port[down],
                   lat[up] + leaf_hop[leaf], lat[down], mid_n, np.asarray(mid_up),
                   np.asarray(mid_down), np.asarray(mid_lat, dtype=float), None, None)

    @classmethod
    def _mesh(cls, spec, routing, table=None, graph=None) -> "Routes":
        """Full mesh: every link is a port; a message takes the one link src -> dst."""
        R = spec.num_ranks
        port = np.full((R, R), -1, dtype=np.int64)
        lat = np.zeros((R, R))
        if table is None:
            names, caps = [], []
            for a in range(R):
                for b in range(R):
                    if a != b:
                        port[a, b] = len(names)
                        lat[a, b] = spec.link_latency_ns
                        names.append(f"rank{a}->rank{b}")
                        caps.append(spec.peer_link_GBps)
            names, caps = tuple(names), np.asarray(caps, dtype=float)
        else:
            names, caps = table.names, table.capacity_GBps
            for lid, (u, v) in enumerate(table.ends):
                a, b = graph.nodes[u]["index"], graph.nodes[v]["index"]
                port[a, b], lat[a, b] = lid, table.latency_ns[lid]
        z = np.zeros(R, dtype=np.int64)
        return cls(spec, routing, names, caps, names, np.arange(len(names)), z, z - 1, z - 1,
                   np.zeros(R), np.zeros(R), np.zeros((1, 1), dtype=np.int64),
                   np.zeros((1, 1, 1), dtype=np.int64), np.zeros((1, 1, 1), dtype=np.int64),
                   np.zeros((1, 1, 1)), port, lat)

    # -- routing ----------------------------------------------------------------------------
    def route(self, src, dst, flow_key=0) -> tuple[np.ndarray, np.ndarray]:
        """(ports [n, 4] padded with -1, latency [n] ns) of messages src -> dst (arrays or
        scalars; a message to itself crosses no port)."""
        src = np.atleast_1d(np.asarray(src, dtype=np.int64))
        dst = np.atleast_1d(np.asarray(dst, dtype=np.int64))
        n = src.shape[0]
        rows = np.full((n, 4), -1, dtype=np.int64)
        lat = np.zeros(n)
        R = self.num_ranks
        # (four reductions, no temporary masks over the batch)
        if n and (src.min() < 0 or src.max() >= R or dst.min() < 0 or dst.max() >= R):
            raise ValueError(f"ranks must be in 0..{R - 1}")
        other = src != dst
        if self.mesh_port is not None:
            p = self.mesh_port[src, dst]
            if (other & (p < 0)).any():
                raise ValueError("no link between two ranks of the full mesh")
            rows[other, 0] = p[other]
            lat[other] = self.mesh_lat[src, dst][other]
            return rows, lat
        a, b = self.rank_leaf[src], self.rank_leaf[dst]
        if other.all():                         # (the usual batch: no message to itself)
            rows[:, 0] = self.up_port[src]
            lat = self.up_lat[src] + self.down_lat[dst]
            apart = a != b
            same = ~apart
        else:
            rows[other, 0] = self.up_port[src[other]]
            lat[other] = self.up_lat[src[other]] + self.down_lat[dst[other]]
            same = other & (a == b)
            apart = other & (a != b)
        rows[same, 1] = self.down_port[dst[same]]
        cross = np.flatnonzero(apart)           # (indices: the mask is used seven times)
        if cross.size:
            ac, bc = a[cross], b[cross]
            # [a, b, k] of the (L, L, W) path tables as one flat index: one gather per table
            # instead of a three-array fancy index (the same elements, C order)
            pair = ac * self.mid_n.shape[1] + bc
            at = pair * self.mid_up.shape[2]
            if self.routing == "ecmp":
                key = np.broadcast_to(np.asarray(flow_key, dtype=np.int64), (n,))[cross]
                at += ecmp_choices(src[cross], dst[cross], key, self.mid_n.reshape(-1)[pair])
            # (spray: one aggregate path per leaf pair, k = 0)
            rows[cross, 1] = self.mid_up.reshape(-1)[at]
            rows[cross, 2] = self.mid_down.reshape(-1)[at]
            rows[cross, 3] = self.down_port[dst[cross]]
            lat[cross] += self.mid_lat.reshape(-1)[at]
        return rows, lat

    def port_loads(self, traffic) -> np.ndarray:
        """Bytes per port of a ``[src, dst]`` traffic matrix (the diagonal is local and
        ignored), or of ``[src, dst, flow_key]`` bytes per flow key (ECMP hashes each)."""
        t = np.asarray(traffic, dtype=float)
        R = self.num_ranks
        if t.shape[:2] != (R, R) or t.ndim not in (2, 3):
            raise ValueError(f"traffic has shape {t.shape}; expected ({R}, {R}) or ({R}, {R}, keys)")
        if t.ndim == 2:
            t = t[:, :, None]
        s, d, k = np.nonzero(t)
        keep = s != d
        s, d, k = s[keep], d[keep], k[keep]
        rows, _ = self.route(s, d, k)
        sizes = np.repeat(t[s, d, k], 4)
        flat = rows.ravel()
        m = flat >= 0
        return np.bincount(flat[m], weights=sizes[m], minlength=self.num_ports)
