"""Analytical lower bound of an all-to-all's time: the busiest port's bytes / bandwidth
(a rank's URMA send or receive side counting as a port, if the spec limits it).

``port_loads(traffic_bytes, spec, ...)`` sums a ``[src, dst]`` traffic matrix (bytes;
the diagonal is local and ignored) onto every port it must cross: each rank's
egress and ingress link, and each leaf's uplinks and downlinks as the routing uses
them (``spray``: a leaf's uplinks as one aggregate; ``ecmp``: each pair's bytes on
the spine its hash picks, split evenly over ``flow_keys``); in a ``full_mesh``, each
ordered pair's own link; and, if the spec sets ``urma_payload_GBps``, each rank's URMA
send and receive sides (payload only). For ECMP the traffic may
instead be ``[src, dst, flow_key]`` (bytes per flow key, e.g. per send queue). ``analytical_bound_ns``
is the largest ``bytes / capacity`` among them: no schedule can finish sooner
(latencies and per-message costs are not included). Port names match the resource
names of ``FlowNetwork``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simnode.network.clos import ecmp_choice
from simnode.network.spec import SupernodeSpec


@dataclass(frozen=True)
class PortLoad:
    name: str
    size_bytes: float
    capacity_GBps: float

    @property
    def time_ns(self) -> float:
        return self.size_bytes / self.capacity_GBps


def _wire(traffic: np.ndarray, spec: SupernodeSpec) -> np.ndarray:
    """Wire bytes if each entry were one message (fewest headers: still a lower bound)."""
    packets = np.maximum(1, np.ceil(traffic / spec.mtu_bytes))
    return np.where(traffic > 0, traffic + packets * spec.header_bytes_per_packet, 0.0)


def port_loads(traffic_bytes, spec: SupernodeSpec, routing: str | None = None,
               flow_keys: tuple[int, ...] = (0,), with_headers: bool = False) -> list[PortLoad]:
    """Bytes and capacity of every port the traffic crosses; see the module docstring."""
    t = np.array(traffic_bytes, dtype=float)
    n = spec.num_ranks
    if t.shape[:2] != (n, n) or t.ndim not in (2, 3):
        raise ValueError(f"traffic has shape {t.shape}; expected ({n}, {n}) or ({n}, {n}, keys)")
    by_key = t if t.ndim == 3 else None
    if by_key is not None:
        by_key[np.arange(n), np.arange(n)] = 0.0
        payload = by_key.sum(axis=2)
        if with_headers:
            by_key = _wire(by_key, spec)
        t = by_key.sum(axis=2)
    else:
        np.fill_diagonal(t, 0.0)
        payload = t
        if with_headers:
            t = _wire(t, spec)
    out = _urma_loads(payload, spec)
    if spec.shape == "full_mesh":      # one link per ordered pair, no switches
        return out + [PortLoad(f"rank{a}->rank{b}", float(t[a, b]), spec.peer_link_GBps)
                      for a in range(n) for b in range(n) if a != b]
    routing = routing or spec.routing
    rank_bw = spec.rank_bandwidth_GBps
    leaf = np.arange(n) // spec.ranks_per_leaf
    for r in range(n):
        out.append(PortLoad(f"rank{r}->leaf{leaf[r]}", float(t[r].sum()), rank_bw))
        out.append(PortLoad(f"leaf{leaf[r]}->rank{r}", float(t[:, r].sum()), rank_bw))
    num_leaves = spec.num_leaves
    if num_leaves == 1:
        return out
    cross = t * (leaf[:, None] != leaf[None, :])
    if routing == "spray":
        by_leaf = np.zeros((num_leaves, num_leaves))
        np.add.at(by_leaf, (leaf[:, None], leaf[None, :]), cross)
        for j in range(num_leaves):
            out.append(PortLoad(f"leaf{j}->spines", float(by_leaf[j].sum()), spec.leaf_uplink_GBps))
            out.append(PortLoad(f"spines->leaf{j}", float(by_leaf[:, j].sum()), spec.leaf_uplink_GBps))
        return out
    up = np.zeros((num_leaves, spec.num_spines))
    down = np.zeros((spec.num_spines, num_leaves))
    for s, d in zip(*np.nonzero(cross)):
        if by_key is not None:
            keys = np.flatnonzero(by_key[s, d])
            sizes = by_key[s, d, keys]
        else:
            keys, sizes = flow_keys, [cross[s, d] / len(flow_keys)] * len(flow_keys)
        for key, size in zip(keys, sizes):
            sp = ecmp_choice(int(s), int(d), int(key), spec.num_spines)
            up[leaf[s], sp] += size
            down[sp, leaf[d]] += size
    link = spec.leaf_spine_link_GBps
    for j in range(num_leaves):
        for sp in range(spec.num_spines):
            out.append(PortLoad(f"leaf{j}->spine{sp}", float(up[j, sp]), link))
            out.append(PortLoad(f"spine{sp}->leaf{j}", float(down[sp, j]), link))
    return out


def _urma_loads(payload: np.ndarray, spec: SupernodeSpec) -> list[PortLoad]:
    """Each rank's URMA send and receive sides, if the spec limits them (payload bytes)."""
    cap = spec.urma_payload_GBps
    if not cap:
        return []
    return ([PortLoad(f"rank{r}.urma_tx", float(payload[r].sum()), cap) for r in range(spec.num_ranks)]
            + [PortLoad(f"rank{r}.urma_rx", float(payload[:, r].sum()), cap) for r in range(spec.num_ranks)])


def busiest_port(traffic_bytes, spec: SupernodeSpec, routing: str | None = None,
                 flow_keys: tuple[int, ...] = (0,), with_headers: bool = False) -> PortLoad:
    """The port with the largest bytes / capacity (the first such, in port order)."""
    loads = port_loads(traffic_bytes, spec, routing, flow_keys, with_headers)
    return max(loads, key=lambda p: p.time_ns)


def analytical_bound_ns(traffic_matrix_bytes, spec: SupernodeSpec, routing: str | None = None,
                        flow_keys: tuple[int, ...] = (0,), with_headers: bool = False) -> float:
    """Lower bound (ns) on the time to deliver ``traffic_matrix_bytes`` ([src, dst] bytes):
    the busiest port's bytes / bandwidth. ``with_headers`` counts wire overhead."""
    return busiest_port(traffic_matrix_bytes, spec, routing, flow_keys, with_headers).time_ns
