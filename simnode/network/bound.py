"""Analytical lower bound of delivering a traffic matrix: the busiest port's bytes /
capacity, on the same routes the flows take (``simnode.network.routes``).

``port_loads(traffic_bytes, spec_or_routes, ...)`` puts a ``[src, dst]`` traffic matrix
(bytes; the diagonal is local and ignored) on every port it crosses, routed exactly as
``FlowNetwork`` routes messages (``spray``: a leaf's uplinks as one aggregate; ``ecmp``:
each pair's bytes on the spine its hash picks, split evenly over ``flow_keys``, or given
per flow key as ``[src, dst, flow_key]``; a full mesh: each pair's own link; a graph with
links removed: around them), and, if the spec sets ``urma_payload_GBps``, on each rank's
URMA send and receive sides (payload only). ``analytical_bound_ns`` is the largest
``bytes / capacity`` among them: no schedule can finish sooner (latencies and per-message
costs are not included). Port names match the resource names of ``FlowNetwork``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simnode.network.routes import Routes
from simnode.config.supernode import SupernodeSpec


@dataclass(frozen=True)
class PortLoad:
    name: str
    size_bytes: float
    capacity_GBps: float

    @property
    def time_ns(self) -> float:
        return self.size_bytes / self.capacity_GBps


def _routes(spec_or_routes, routing) -> Routes:
    if isinstance(spec_or_routes, Routes):
        return spec_or_routes
    return Routes.from_spec(spec_or_routes, routing)


def _by_key(traffic, n: int, flow_keys) -> np.ndarray:
    t = np.array(traffic, dtype=float)
    if t.shape[:2] != (n, n) or t.ndim not in (2, 3):
        raise ValueError(f"traffic has shape {t.shape}; expected ({n}, {n}) or ({n}, {n}, keys)")
    if t.ndim == 2:
        keys = tuple(flow_keys)
        out = np.zeros((n, n, max(keys) + 1))
        for k in keys:
            out[:, :, k] += t / len(keys)
        t = out
    idx = np.arange(n)
    t[idx, idx, :] = 0.0
    return t


def port_loads(traffic_bytes, spec_or_routes, routing: str | None = None,
               flow_keys: tuple[int, ...] = (0,), with_headers: bool = False) -> list[PortLoad]:
    """Bytes and capacity of every port the traffic crosses; see the module docstring.
    ``with_headers``: count wire bytes as if each entry were one message (fewest headers:
    still a lower bound)."""
    routes, out, b = _loads(traffic_bytes, spec_or_routes, routing, flow_keys, with_headers)
    return out + [PortLoad(name, float(x), float(c)) for name, x, c in
                  zip(routes.port_names, b, routes.port_capacity_GBps)]


def _loads(traffic_bytes, spec_or_routes, routing, flow_keys, with_headers):
    """(routes, the URMA sides' PortLoads, bytes per port) of ``port_loads``."""
    routes = _routes(spec_or_routes, routing)
    spec = routes.spec
    t = _by_key(traffic_bytes, routes.num_ranks, flow_keys)
    payload = t.sum(axis=2)
    if with_headers:
        packets = np.maximum(1, np.ceil(t / spec.mtu_bytes))
        t = np.where(t > 0, t + packets * spec.header_bytes_per_packet, 0.0)
    return routes, _urma_loads(payload, spec), routes.port_loads(t)


def _urma_loads(payload: np.ndarray, spec: SupernodeSpec) -> list[PortLoad]:
    """Each rank's URMA send and receive sides, if the spec limits them (payload bytes)."""
    cap = spec.urma_payload_GBps
    if not cap:
        return []
    return ([PortLoad(f"rank{r}.urma_tx", float(payload[r].sum()), cap) for r in range(spec.num_ranks)]
            + [PortLoad(f"rank{r}.urma_rx", float(payload[:, r].sum()), cap) for r in range(spec.num_ranks)])


def busiest_load(routes: Routes, traffic_bytes, extra: list | None = None,
                 flow_keys: tuple[int, ...] = (0,), with_headers: bool = False) -> PortLoad:
    """The load with the largest bytes / capacity among the ports (and ``extra`` PortLoads
    or (name, bytes, capacity) tuples); the first such, in port order."""
    loads = port_loads(traffic_bytes, routes, flow_keys=flow_keys, with_headers=with_headers)
    loads += [x if isinstance(x, PortLoad) else PortLoad(*x) for x in (extra or [])]
    return max(loads, key=lambda p: p.time_ns)


def busiest_port(traffic_bytes, spec_or_routes, routing: str | None = None,
                 flow_keys: tuple[int, ...] = (0,), with_headers: bool = False) -> PortLoad:
    """The port with the largest bytes / capacity (the first such, in port order): the one
    ``max`` picks from ``port_loads``, without a record per port (the same division, so
    the same times; URMA sides come first, so they win ties)."""
    routes, urma, b = _loads(traffic_bytes, spec_or_routes, routing, flow_keys, with_headers)
    if not b.size:                              # no ports: the URMA sides alone
        return max(urma, key=lambda p: p.time_ns)
    best = max(urma, key=lambda p: p.time_ns) if urma else None
    cap = np.asarray(routes.port_capacity_GBps, dtype=float)
    i = int(np.argmax(b / cap))                 # the first largest
    port = PortLoad(routes.port_names[i], float(b[i]), float(cap[i]))
    return best if best is not None and best.time_ns >= port.time_ns else port


def analytical_bound_ns(traffic_matrix_bytes, spec_or_routes, routing: str | None = None,
                        flow_keys: tuple[int, ...] = (0,), with_headers: bool = False) -> float:
    """Lower bound (ns) on the time to deliver ``traffic_matrix_bytes`` ([src, dst] bytes):
    the busiest port's bytes / bandwidth. ``with_headers`` counts wire overhead."""
    return busiest_port(traffic_matrix_bytes, spec_or_routes, routing, flow_keys,
                        with_headers).time_ns
