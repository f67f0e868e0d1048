"""Each rank's URMA engine and HBM as resources of a ``FlowNetwork``.

``RankEndpoints(net, hbm_GBps, hbm_fcfs)`` adds, per rank R, ``rankR.hbm`` (the chip's
HBM, in GB/s; first-come-first-served if ``hbm_fcfs``, see ``simnode.engine.maxmin``) and
``rankR.urma`` (the URMA engine, 1 ns of work per ns) to the network's share.
``send(src, dst, payload_bytes, descriptor_bytes, wqes)`` starts one message train
(``send_many``: many at once, one event) that also charges, in proportion to its
progress (a weight per wire byte, so contention with the links is max-min fair):

- the sender's HBM: the payload and the WQEs the engine fetches (descriptor bytes);
- the receiver's HBM: the remote writes of the payload;
- the sender's URMA engine: ``wqes x spec.wqe_processing_ns``, so small messages load
  it more (the per-message cost of facts 5.5's open "WQE processing rate");
- if ``spec.urma_payload_GBps`` > 0, the sender's URMA send side (``rankR.urma_tx``) and
  the receiver's receive side (``rankR.urma_rx``), each that many GB/s of payload over
  all peers together: a chip-side ceiling below the sum of the ports;
- what-if, off unless ``spec.urma_context_miss_ns`` > 0: on the send side, each WQE whose
  peer context misses the engine's cache (``spec.context_miss_fraction(peers)`` of them,
  ``peers`` = how many peers the sender posts to) stalls the engine for that long, time
  in which it moves no payload: ``miss_ns x urma_payload_GBps`` bytes of send-side work;
  likewise, off unless ``spec.urma_wqe_ns_per_peer`` > 0, every WQE stalls it for
  ``peers x urma_wqe_ns_per_peer`` (``spec.wqe_stall_ns(peers)`` is the sum of the two);
- any ``extra`` resources with their total ``extra_units`` of work.

DeepEP (``simnode.ep.deepep``) and the transport microbenchmark
(``simnode.workloads.kinds.transport``) post their messages through this one model.
"""

from __future__ import annotations

import numpy as np

from simnode.engine.share import Group, Transfer
from simnode.network.flows import FlowNetwork


class RankEndpoints:
    """The ranks' HBM and URMA engine resources; see the module docstring."""

    def __init__(self, net: FlowNetwork, hbm_GBps: float, hbm_fcfs: bool = False,
                 hbm: list | None = None):
        """``hbm``: the ranks' HBM resources if they already exist on ``net.share`` (a chip
        model added them); else they are added here."""
        R = net.spec.num_ranks
        share = net.share
        self.net = net
        self.spec = net.spec
        self.hbm = np.asarray(hbm if hbm is not None else share.add_resources(
            [f"rank{r}.hbm" for r in range(R)], [hbm_GBps] * R, "fcfs" if hbm_fcfs else "fair"),
            dtype=np.int64)
        # 1 ns of engine time per ns: weights are ns of work per wire byte
        self.urma = np.asarray(share.add_resources([f"rank{r}.urma" for r in range(R)], [1.0] * R),
                               dtype=np.int64)
        self._stall = None
        cap = self.spec.urma_payload_GBps
        self.tx = np.asarray(share.add_resources([f"rank{r}.urma_tx" for r in range(R)], [cap] * R),
                             dtype=np.int64) if cap else None
        self.rx = np.asarray(share.add_resources([f"rank{r}.urma_rx" for r in range(R)], [cap] * R),
                             dtype=np.int64) if cap else None
        if cap:
            self._declare_covers()

    def _declare_covers(self) -> None:
        """Every message a rank sends crosses its URMA send side, and every message it
        receives its receive side: the engine may leave a resource out of its solves once
        those ceilings provably fill first (``Share.cover``; exact)."""
        share, routes, ports = self.net.share, self.net.routes, self.net.ports
        R = self.spec.num_ranks
        for r in range(R):
            share.cover(int(self.urma[r]), [self.tx[r]])
            share.cover(int(self.hbm[r]), [self.tx[r], self.rx[r]])
        if routes.mesh_port is not None:
            for a in range(R):
                for b in range(R):
                    if a != b:
                        share.cover(int(ports[routes.mesh_port[a, b]]), [self.tx[a]])
            return
        for r in range(R):
            share.cover(int(ports[routes.up_port[r]]), [self.tx[r]])
            share.cover(int(ports[routes.down_port[r]]), [self.rx[r]])
        # a leaf's uplinks carry only its ranks' messages, its downlinks only theirs
        leaves = {}
        for r in range(R):
            leaves.setdefault(int(routes.rank_leaf[r]), []).append(r)
        up_of, down_of = {}, {}
        for port, name in enumerate(routes.port_names):
            a, _, b = name.partition("->")
            if a.startswith("leaf") and (b.startswith("spine")):
                up_of[port] = int(a[4:])
            elif b.startswith("leaf") and (a.startswith("spine")):
                down_of[port] = int(b[4:])
        for port, leaf in up_of.items():
            share.cover(int(ports[port]), [self.tx[r] for r in leaves.get(leaf, [])])
        for port, leaf in down_of.items():
            share.cover(int(ports[port]), [self.rx[r] for r in leaves.get(leaf, [])])

    def _stall_of(self, n: int) -> np.ndarray:
        """``spec.wqe_stall_ns(k)`` for k = 0 .. n - 1 at least (kept: every send asks)."""
        if self._stall is None or len(self._stall) < n:
            self._stall = np.array([self.spec.wqe_stall_ns(k) for k in range(n)])
        return self._stall

    def _work(self, src, dst, payload, descriptor_bytes, wqes, peers):
        """[n, k] resources and units of work of message trains (see the module docstring)."""
        spec = self.spec
        cols = [(self.hbm[src], payload + descriptor_bytes), (self.hbm[dst], payload),
                (self.urma[src], wqes * spec.wqe_processing_ns)]
        if self.tx is not None:
            stall = wqes * self._stall_of(int(peers.max()) + 1)[peers]
            # 1 GB/s = 1 B/ns: a stall of x ns costs the send side x * ceiling bytes of work
            cols += [(self.tx[src], payload + stall * spec.urma_payload_GBps),
                     (self.rx[dst], payload)]
        rows = np.empty((src.shape[0], len(cols)), dtype=np.int64)
        units = np.empty((src.shape[0], len(cols)))
        for j, (c, u) in enumerate(cols):       # (a scalar fills its column)
            rows[:, j] = c
            units[:, j] = u
        return rows, units

    def send_many(self, src, dst, payload_bytes, descriptor_bytes, wqes, peers,
                  extra_rows=None, extra_units=None, flow_key=0, tag=None) -> Group:
        """Message trains src[k] -> dst[k] of ``wqes[k]`` WQEs, the sender posting to
        ``peers[k]`` peers in all; one event for the arrival of them all."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        payload = np.asarray(payload_bytes, dtype=float)
        rows, units = self._work(src, dst, payload, np.asarray(descriptor_bytes, dtype=float),
                                 np.asarray(wqes, dtype=float),
                                 np.broadcast_to(np.asarray(peers, dtype=np.int64), src.shape))
        if extra_rows is not None:
            rows = np.concatenate([rows, np.asarray(extra_rows, dtype=np.int64)], axis=1)
            units = np.concatenate([units, np.asarray(extra_units, dtype=float)], axis=1)
        return self.net.send_many(src, dst, payload, rows, units, flow_key, tag)

    def send(self, src: int, dst: int, payload_bytes: float, descriptor_bytes: float, wqes: int,
             flow_key: int = 0, peers: int = 1) -> Transfer:
        """One message train src -> dst of ``wqes`` WQEs, ``src`` posting to ``peers`` peers in
        all; returns the event of its arrival."""
        rows, units = self._work(np.array([src]), np.array([dst]), np.array([float(payload_bytes)]),
                                 np.array([float(descriptor_bytes)]), np.array([float(wqes)]),
                                 np.array([peers]))
        wire = float(self.net.wire_bytes(payload_bytes))
        keep = units[0] > 0
        return self.net.send(src, dst, payload_bytes,
                             extra_resources=tuple(int(r) for r in rows[0][keep]),
                             extra_weights=tuple(float(u) / wire for u in units[0][keep]),
                             tag=(src, dst), flow_key=flow_key)

    def groups(self) -> list[tuple[str, np.ndarray]]:
        """(name, per-rank resource ids) of the chip resources this model adds."""
        out = [("hbm", self.hbm), ("urma", self.urma)]
        if self.tx is not None:
            out += [("urma_tx", self.tx), ("urma_rx", self.rx)]
        return out


def busiest(net: FlowNetwork, groups, horizon_ns: float) -> tuple[dict, dict]:
    """Per group of per-rank resources, the busiest rank's share of it over ``horizon_ns``
    and that resource's name (e.g. ``rank0.urma_rx``): two dicts keyed by group name. Ties
    (to 12 significant digits) go to the lowest rank."""
    share = net.share
    share.sync()
    b, cap = share.bytes_by_resource, share.capacity
    fracs, names = {}, {}
    for name, ids in groups:
        used = b[ids] / (cap[ids] * horizon_ns)
        rounded = np.array([float(f"{u:.12g}") for u in used])
        i = int(rounded.argmax())
        fracs[name], names[name] = float(used[i]), share.names[int(ids[i])]
    return fracs, names
