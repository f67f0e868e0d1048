"""Flow-level model of a supernode's Clos network on SimPy.

``FlowNetwork(env, spec_or_graph, routing=None, batch_window_ns=0.0)`` is a
``BatchedShare`` (see ``simnode.network.share``: the ``add_resource`` / ``start``
interface of ``simnode.engine.fluid.FluidShare``) whose first resources are the
network's links, so chip resources added with ``add_resource`` (an HBM port, say)
can be crossed by the same transfer as the links and share max-min fairly with them.

``send(src_rank, dst_rank, size_bytes, extra_resources=(), cap_GBps=inf, tag=None,
flow_key=0)`` moves one message: it adds the wire overhead (one header per MTU of
payload), routes it, and returns a ``Transfer`` event that fires when the last byte
has arrived = when the last byte is served on its path + the path latency (links'
propagation + one switch hop per switch). The fluid flow occupies every link of its
path at once (cut-through), so one message alone on its path takes
``latency + wire bytes / bandwidth``. ``transfer.injected`` fires when the last byte
has left the sender. ``cap_GBps`` limits the wire rate; ``extra_resources`` are
charged the payload bytes only (headers exist on the wire, not in HBM).

A ``full_mesh`` spec (``simnode.network.mesh``) has one resource per ordered pair of
ranks: a message takes the link from its sender to its receiver, with that link's
latency; routing does not apply. The rest of this docstring is about the Clos.

Routing (``spec.routing`` unless overridden):
- ``"ecmp"``: the flow takes one spine, picked by ``clos.ecmp_choice(src, dst,
  flow_key)``; give each send queue its own ``flow_key`` (e.g. the Jetty index), as a
  RoCE queue pair has its own UDP source port.
- ``"spray"``: every message is spread evenly over all spines. Evenly spread flows
  load every uplink of a leaf equally, so each leaf's uplinks (and each leaf's
  downlinks from the spines) are modeled as one aggregate resource, ``leafJ->spines``
  and ``spines->leafJ``, of ``num_spines x`` the slowest member's capacity. This is
  exact for an even split and costs one flow per message instead of one per spine.
  Spine links then carry ``1/num_spines`` of the aggregate each.

Batching: ``batch_window_ns`` (see ``simnode.network.share``) trades accuracy for
solver runs; a resource is never over-used and each start or end moves by at most
the window. Keep it well below a message's duration: an EP128 all-to-all of 1.04 M
messages of ~90 kB (~14 us each at its fair share; benchmarks/bench_network.py)
needs 155 k / 35 k / 9 k / 1.9 k solves at 10 / 50 / 200 / 1000 ns (540 / 115 / 43 /
46 s wall) and simulates 1844.7 / 1841.4 / 1852.8 / 1889.9 us. 0 is exact.

Not modeled here: the per-message engine costs of ``SupernodeSpec``
(``wqe_processing_ns``, ``doorbell_ns``, ``wqebb_bytes``) belong to the sender's URMA
engine; the DeepEP layer applies them (e.g. as an engine resource with weights).

Records: ``bytes_by_resource`` (wire bytes per link; payload bytes per extra
resource), ``series`` (bytes per time bin and resource, bounded memory),
``recomputes`` (solver runs), ``hottest_links(n)``, ``payload_bytes_sent``.
Deterministic: no randomness, stable orders everywhere.

``analytical_bound_ns(traffic_matrix_bytes, spec)`` (from ``simnode.network.bound``,
re-exported here) is the busiest port's bytes / bandwidth, the floor of any run.
"""

from __future__ import annotations

from typing import Callable

import networkx as nx
import numpy as np
import simpy

from simnode.network.bound import analytical_bound_ns  # noqa: F401  (part of this API)
from simnode.network.clos import (build_clos, candidate_paths, ecmp_choice, leaf_node,
                                  link_table, renumber_links)
from simnode.network.mesh import build_full_mesh
from simnode.network.share import BatchedShare, Transfer
from simnode.network.spec import ROUTING_POLICIES, SupernodeSpec


class FlowNetwork(BatchedShare):
    """A supernode's network as max-min fair flows; see the module docstring."""

    def __init__(self, env: simpy.Environment, spec_or_graph: SupernodeSpec | nx.DiGraph, *,
                 routing: str | None = None, batch_window_ns: float = 0.0,
                 util_max_bins: int = 256, util_bin_ns: float = 1000.0,
                 on_rates: Callable | None = None, on_message: Callable | None = None):
        """``on_message(transfer)`` is called once a message's finish is known; the
        transfer has ``src``, ``dst``, ``payload_bytes``, ``tag``, ``start_ns``,
        ``served_ns`` and ``latency_ns`` (arrival = served_ns + latency_ns)."""
        super().__init__(env, batch_window_ns, util_max_bins, util_bin_ns, on_rates)
        if isinstance(spec_or_graph, nx.DiGraph):     # e.g. a built Clos with links removed
            self.graph = renumber_links(spec_or_graph.copy())
        elif spec_or_graph.shape == "full_mesh":
            self.graph = build_full_mesh(spec_or_graph)
        else:
            self.graph = build_clos(spec_or_graph)
        self.spec: SupernodeSpec = self.graph.graph["spec"]
        self.routing = routing or self.spec.routing
        if self.routing not in ROUTING_POLICIES:
            raise ValueError(f"routing {self.routing!r}: expected one of {ROUTING_POLICIES}")
        self.links = link_table(self.graph)
        self.on_served = on_message
        self.payload_bytes_sent = 0.0
        self.messages_sent = 0
        g = self.graph
        self.num_ranks = sum(1 for _, k in g.nodes(data="kind") if k == "rank")
        self._mesh: dict | None = None
        if self.spec.shape == "full_mesh":
            self._init_mesh()
            return
        self._rank_leaf = [g.nodes[f"rank{i}"]["leaf"] for i in range(self.num_ranks)]
        self._up = [g.edges[f"rank{i}", leaf_node(self._rank_leaf[i])]["link_id"]
                    for i in range(self.num_ranks)]
        self._down = [g.edges[leaf_node(self._rank_leaf[i]), f"rank{i}"]["link_id"]
                      for i in range(self.num_ranks)]
        # resources: links in link-id order (spray: leaf<->spine links replaced by aggregates)
        kinds = self.links.kinds
        own = [lid for lid in range(len(self.links))
               if self.routing == "ecmp" or kinds[lid] in ("rank_up", "rank_down")]
        self._link_res = np.full(len(self.links), -1, dtype=np.int64)
        self._link_res[own] = self.add_resources([self.links.names[i] for i in own],
                                                 self.links.capacity_GBps[own])
        # per leaf: its uplink and downlink ids (to the spines)
        self._leaf_ups: dict[int, list[int]] = {}
        self._leaf_downs: dict[int, list[int]] = {}
        for lid, (u, v) in enumerate(self.links.ends):
            if kinds[lid] == "leaf_up":
                self._leaf_ups.setdefault(g.nodes[u]["index"], []).append(lid)
            elif kinds[lid] == "spine_down":
                self._leaf_downs.setdefault(g.nodes[v]["index"], []).append(lid)
        self._agg_up: dict[int, int] = {}
        self._agg_down: dict[int, int] = {}
        if self.routing == "spray":
            self._add_spray_aggregates()
        self.num_network_resources = len(self.names)
        self._middles: dict[tuple[int, int], list] = {}
        # per rank: resource and latency of its up and down link (up: + its leaf's hop)
        lat = self.links.latency_ns
        self._up_res = [int(self._link_res[l]) for l in self._up]
        self._down_res = [int(self._link_res[l]) for l in self._down]
        self._up_lat = [float(lat[l]) + self._hop(leaf_node(self._rank_leaf[i]))
                        for i, l in enumerate(self._up)]
        self._down_lat = [float(lat[l]) for l in self._down]

    def _init_mesh(self) -> None:
        """Full mesh: every link is a resource; a message takes the one link src -> dst."""
        g, lat = self.graph, self.links.latency_ns
        res = self.add_resources(list(self.links.names), self.links.capacity_GBps)
        self._mesh = {}
        for lid, (u, v) in enumerate(self.links.ends):
            self._mesh[(g.nodes[u]["index"], g.nodes[v]["index"])] = ((int(res[lid]),), float(lat[lid]))
        self.num_network_resources = len(self.names)

    # -- routing ---------------------------------------------------------------------------
    def _add_spray_aggregates(self) -> None:
        cap = self.links.capacity_GBps
        names, caps, keys = [], [], []
        for leaf, ups in sorted(self._leaf_ups.items()):
            names.append(f"{leaf_node(leaf)}->spines")
            caps.append(len(ups) * cap[ups].min())      # an even split: the slowest limits
            keys.append(("up", leaf))
        for leaf, downs in sorted(self._leaf_downs.items()):
            names.append(f"spines->{leaf_node(leaf)}")
            caps.append(len(downs) * cap[downs].min())
            keys.append(("down", leaf))
        for (kind, leaf), rid in zip(keys, self.add_resources(names, caps)):
            (self._agg_up if kind == "up" else self._agg_down)[leaf] = rid

    def _hop(self, node: str) -> float:
        return self.graph.nodes[node].get("hop_latency_ns", 0.0)

    def _leaf_middles(self, src_rank: int, dst_rank: int) -> list:
        """Per spine (ecmp) or once (spray): (middle resources, latency from leaf to leaf)."""
        a, b = self._rank_leaf[src_rank], self._rank_leaf[dst_rank]
        got = self._middles.get((a, b))
        if got is not None:
            return got
        lat = self.links.latency_ns
        res = self._link_res
        phys = []
        for path in candidate_paths(self.graph, src_rank, dst_rank):
            up_s, down_s = path[1], path[2]
            spine = self.links.ends[up_s][1]
            phys.append(((int(res[up_s]), int(res[down_s])), float(
                lat[up_s] + self._hop(spine) + lat[down_s] + self._hop(leaf_node(b)))))
        if self.routing == "spray":
            if not len(phys) == len(self._leaf_ups[a]) == len(self._leaf_downs[b]):
                raise ValueError(f"spray needs leaf{a} and leaf{b} joined by every spine "
                                 f"either of them uses; use routing='ecmp' for this graph")
            # the last byte arrives over the slowest spine path
            got = [((self._agg_up[a], self._agg_down[b]), max(l for _, l in phys))]
        else:
            got = phys
        self._middles[(a, b)] = got
        return got

    def route(self, src_rank: int, dst_rank: int, flow_key: int = 0) -> tuple[tuple[int, ...], float]:
        """(resource ids of the path, path latency in ns) a message from src to dst takes."""
        if src_rank == dst_rank:
            return (), 0.0                      # a local copy: no network
        if self._mesh is not None:
            got = self._mesh.get((src_rank, dst_rank))
            if got is None:
                raise ValueError(f"no link from rank{src_rank} to rank{dst_rank} in the full mesh")
            return got
        up, down = self._up_res[src_rank], self._down_res[dst_rank]
        base = self._up_lat[src_rank] + self._down_lat[dst_rank]
        if self._rank_leaf[src_rank] == self._rank_leaf[dst_rank]:
            return (up, down), base
        middles = self._middles.get((self._rank_leaf[src_rank], self._rank_leaf[dst_rank]))
        if middles is None:
            middles = self._leaf_middles(src_rank, dst_rank)
        pick = 0 if len(middles) == 1 else ecmp_choice(src_rank, dst_rank, flow_key, len(middles))
        mid, mid_lat = middles[pick]
        return (up,) + mid + (down,), base + mid_lat

    # -- messages --------------------------------------------------------------------------
    def send(self, src_rank: int, dst_rank: int, size_bytes: float, extra_resources: tuple = (),
             cap_GBps: float = float("inf"), tag=None, flow_key: int = 0,
             extra_weights: tuple | None = None) -> Transfer:
        """Send ``size_bytes`` of payload from ``src_rank`` to ``dst_rank``; see the module
        docstring. ``cap_GBps`` caps the wire rate; returns an event firing on arrival.
        ``extra_weights`` (one per extra resource) replace the default payload share: the
        message then uses ``weight x wire rate`` of each extra resource."""
        if not (0 <= src_rank < self.num_ranks and 0 <= dst_rank < self.num_ranks):
            raise ValueError(f"ranks must be in 0..{self.num_ranks - 1}: got {src_rank} -> {dst_rank}")
        path, latency_ns = self.route(src_rank, dst_rank, flow_key)
        extra = tuple(extra_resources) if size_bytes > 0 else ()
        if path:
            wire = self.spec.wire_bytes(size_bytes)
            resources = path + extra
            if extra_weights is not None and extra:
                weights = (1.0,) * len(path) + tuple(float(w) for w in extra_weights)
            else:
                weights = (1.0,) * len(path) + (size_bytes / wire,) * len(extra) if extra else None
        else:                                   # local copy: only the extra resources, payload only
            wire, resources, weights = size_bytes, extra, None
        self.payload_bytes_sent += size_bytes
        self.messages_sent += 1
        return self._start(wire, resources, weights, cap_GBps, latency_ns, tag,
                           src_rank, dst_rank, size_bytes)

    # -- reports ---------------------------------------------------------------------------
    def horizon_ns(self) -> float:
        """Time from 0 to the last byte served (the span utilizations are measured over)."""
        return max(self.last_served_ns, 0.0)

    def hottest_links(self, n: int = 10) -> list[tuple[str, float, float]]:
        """The ``n`` busiest network resources: (name, bytes, utilization), utilization =
        bytes / (capacity x ``horizon_ns()``), highest first (a bundle of spine uplinks can
        move the most bytes while a single rank port is the one that is full). Ties break by
        bytes, then resource id."""
        self.sync()
        k = self.num_network_resources
        horizon = self.horizon_ns()
        order = sorted(range(k), key=lambda r: (-self._bytes[r] / self._cap[r], -self._bytes[r], r))[:n]
        return [(self.names[r], float(self._bytes[r]),
                 float(self._bytes[r] / (self._cap[r] * horizon)) if horizon > 0 else 0.0)
                for r in order]

    def utilization_series(self) -> tuple[np.ndarray, np.ndarray]:
        """(bin edges in ns, busy fraction per (time bin, resource)); resource order = ``names``."""
        self.sync()
        return self.series.utilization(self._cap)
