"""Flow-level model of a supernode's network on the one sharing engine.

``FlowNetwork(env, spec_or_graph, routing=None, batch_window_ns=0.0, share=None)`` puts the
network's ports (``simnode.network.routes``) on a ``simnode.engine.share.Share`` (its own,
or one shared with chips, so a message and a kernel can share a rank's HBM), and moves
messages over them:

- ``send(src, dst, size_bytes, extra_resources=(), cap_GBps=inf, tag=None, flow_key=0,
  extra_weights=None) -> Transfer``: one message. It adds the wire overhead (one header per
  MTU of payload), routes it, and its event fires when the last byte has arrived = when
  the last byte is served on its path + the path latency (links' propagation + one switch
  hop per switch). The fluid flow occupies every port of its path at once (cut-through),
  so a message alone on its path takes ``latency + wire bytes / bandwidth``.
  ``transfer.injected`` fires when the last byte has left the sender. ``cap_GBps`` limits
  the wire rate; ``extra_resources`` are charged the payload bytes only (headers exist on
  the wire, not in HBM), or ``weight x wire rate`` with ``extra_weights``.
- ``send_many(src, dst, payload_bytes, extra_rows, extra_units, flow_key) -> Group``:
  many messages at once (arrays), one event when the last has arrived; message k uses
  ``extra_units[k, j]`` units of ``extra_rows[k, j]`` over its whole transfer.

Routing (``spec.routing`` unless overridden): ``ecmp`` hashes each (src, dst, flow_key)
onto one spine (give each send queue its own ``flow_key``, e.g. the Jetty index, as a
RoCE queue pair has its own UDP source port); ``spray`` spreads every message evenly
over all spines (modeled as per-leaf aggregate ports, exact for an even split). A full
mesh has one link per ordered pair of ranks.

Batching: ``batch_window_ns`` (see ``simnode.engine.share``) trades accuracy for solver
runs; a resource is never over-used and each start or end moves by at most the window.
Keep it well below a message's duration. 0 is exact.

Not modeled here: the per-message engine costs of ``SupernodeSpec`` (``wqe_processing_ns``,
``doorbell_ns``, ``wqebb_bytes``) belong to the sender's URMA engine
(``simnode.network.urma``).

Records: ``share.bytes_by_resource`` (wire bytes per port; payload or work units per extra
resource), ``share.series``, ``share.recomputes``, ``hottest_links(n)``,
``payload_bytes_sent``, ``messages_sent``. Deterministic: no randomness, stable orders.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import simpy

from simnode.engine.share import Group, Share, Transfer
from simnode.network.routes import Routes
from simnode.config.supernode import SupernodeSpec

SERIES_BINS = 256           # time bins of the per-resource series (bounded memory)


class FlowNetwork:
    """A supernode's network as max-min fair flows; see the module docstring."""

    def __init__(self, env: simpy.Environment, spec_or_graph, *, routing: str | None = None,
                 batch_window_ns: float = 0.0, share: Share | None = None,
                 on_message: Callable | None = None):
        """``on_message(transfer)`` is called once a ``send``'s finish is known (the transfer
        has ``src``, ``dst``, ``payload_bytes``, ``tag``, ``start_ns``, ``served_ns``,
        ``latency_ns``: arrival = served_ns + latency_ns)."""
        self.env = env
        self.share = share if share is not None else Share(env, batch_window_ns, SERIES_BINS)
        if isinstance(spec_or_graph, SupernodeSpec):
            self.routes = Routes.from_spec(spec_or_graph, routing)
        else:                                           # e.g. a built Clos with links removed
            self.routes = Routes.from_graph(spec_or_graph, routing)
        self.spec: SupernodeSpec = self.routes.spec
        self.routing = self.routes.routing
        self.num_ranks = self.routes.num_ranks
        self.ports = np.asarray(self.share.add_resources(
            list(self.routes.port_names), self.routes.port_capacity_GBps), dtype=np.int64)
        self.share.on_served = on_message
        self.payload_bytes_sent = 0.0
        self.messages_sent = 0

    def route(self, src_rank: int, dst_rank: int, flow_key: int = 0) -> tuple[tuple[int, ...], float]:
        """(share resource ids of the path, path latency in ns) of one message."""
        rows, lat = self.routes.route(src_rank, dst_rank, flow_key)
        return tuple(int(self.ports[p]) for p in rows[0] if p >= 0), float(lat[0])

    def latency_ns(self, src, dst) -> np.ndarray:
        """Path latency of messages src -> dst (arrays)."""
        return self.routes.route(src, dst)[1]

    def wire_bytes(self, payload) -> np.ndarray:
        """Bytes on the wire for payloads (one header per MTU, at least one packet)."""
        spec = self.spec
        payload = np.asarray(payload, dtype=float)
        packets = np.maximum(1.0, np.ceil(payload / spec.mtu_bytes))
        return payload + packets * spec.header_bytes_per_packet

    # -- messages --------------------------------------------------------------------------
    def send(self, src_rank: int, dst_rank: int, size_bytes: float, extra_resources: tuple = (),
             cap_GBps: float = math.inf, tag=None, flow_key: int = 0,
             extra_weights: tuple | None = None) -> Transfer:
        """Send ``size_bytes`` of payload from ``src_rank`` to ``dst_rank``; see the module
        docstring. Returns an event firing on arrival."""
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
        share = self.share
        tr = Transfer(self.env, wire, latency_ns, tag, src_rank, dst_rank, size_bytes)
        share.start_transfer(tr, resources, weights, cap_GBps)
        return tr

    def send_many(self, src, dst, payload_bytes, extra_rows=None, extra_units=None,
                  flow_key=0, tag=None, cap_GBps=None) -> Group:
        """Send message k of ``payload_bytes[k]`` from ``src[k]`` to ``dst[k]`` for every k at
        once; message k also uses ``extra_units[k, j]`` units of share resource
        ``extra_rows[k, j]`` (-1: none) in proportion to its progress, and moves at most
        ``cap_GBps[k]`` wire bytes per ns (None: no cap). Returns one event that fires when
        the last message has arrived (``Group.arrival_ns`` per message)."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        payload = np.asarray(payload_bytes, dtype=float)
        n = src.shape[0]
        rows, lat = self.routes.route(src, dst, flow_key)
        local = src == dst
        wire = np.where(local, payload, self.wire_bytes(payload))
        ports = np.where(rows >= 0, self.ports[np.maximum(rows, 0)], -1)
        w_ports = np.where(rows >= 0, 1.0, 0.0)
        if extra_rows is not None:
            er = np.asarray(extra_rows, dtype=np.int64).reshape(n, -1)
            eu = np.asarray(extra_units, dtype=float).reshape(n, -1)
            use = (er >= 0) & (eu > 0) & (payload > 0)[:, None]
            ew = np.where(use, eu / np.where(wire > 0, wire, 1.0)[:, None], 0.0)
            er = np.where(use, er, -1)
            all_rows = np.concatenate([ports, er], axis=1)
            all_w = np.concatenate([w_ports, ew], axis=1)
        else:
            all_rows, all_w = ports, w_ports
        self.payload_bytes_sent += float(payload.sum())
        self.messages_sent += n
        caps = np.full(n, math.inf) if cap_GBps is None else np.asarray(cap_GBps, dtype=float)
        return self.share.start_group(wire, all_rows, all_w, caps, lat, tag)

    # -- reports ---------------------------------------------------------------------------
    @property
    def num_network_resources(self) -> int:
        return len(self.ports)

    def horizon_ns(self) -> float:
        """Time from 0 to the last byte served (the span utilizations are measured over)."""
        return max(self.share.last_served_ns, 0.0)

    def port_bytes(self) -> np.ndarray:
        """Wire bytes each port carried."""
        self.share.sync()
        return self.share.bytes_by_resource[self.ports]

    def hottest_links(self, n: int = 10) -> list[tuple[str, float, float]]:
        """The ``n`` busiest ports: (name, bytes, utilization), utilization = bytes /
        (capacity x ``horizon_ns()``), highest first (a bundle of spine uplinks can move the
        most bytes while a single rank port is the one that is full). Ties break by bytes
        (both rounded to 12 significant digits, so float noise does not pick), then name
        order."""
        b = self.port_bytes()
        cap = self.routes.port_capacity_GBps
        horizon = self.horizon_ns()
        util = b / cap
        key = lambda r: (-float(f"{util[r]:.12g}"), -float(f"{b[r]:.12g}"), r)  # noqa: E731
        order = sorted(range(len(b)), key=key)[:n]
        return [(self.routes.port_names[r], float(b[r]),
                 float(b[r] / (cap[r] * horizon)) if horizon > 0 else 0.0) for r in order]

    def utilization_series(self) -> tuple[np.ndarray, np.ndarray]:
        """(bin edges in ns, busy fraction per (time bin, share resource))."""
        self.share.sync()
        return self.share.series.utilization(self.share.capacity)

    def bound_ns(self, traffic_bytes, extra: list | None = None) -> float:
        """Lower bound of delivering ``traffic_bytes`` ([src, dst] payload bytes, or
        [src, dst, flow_key]): the busiest port's bytes / capacity on these routes, and of
        ``extra`` (name, bytes, capacity) loads such as a rank's URMA ceiling."""
        from simnode.network.bound import busiest_load
        return busiest_load(self.routes, traffic_bytes, extra).time_ns
