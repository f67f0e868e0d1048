"""Each rank's URMA engine and HBM as resources of a ``FlowNetwork``.

``RankEndpoints(net, hbm_GBps, hbm_fcfs)`` adds, per rank R, ``rankR.hbm`` (the chip's
HBM, in GB/s; first-come-first-served if ``hbm_fcfs``, see ``simnode.network.share``) and ``rankR.urma`` (the URMA engine, 1 ns of work per ns) to the network's
resources. ``send(src, dst, payload_bytes, descriptor_bytes, wqes)`` starts one
message train on the network that also charges, in proportion to its progress (a
weight per wire byte, so contention with the links is max-min fair):

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

DeepEP (``simnode.moe.deepep``) and the transport microbenchmark
(``simnode.workloads.transport``) post their messages through this one model.
"""

from __future__ import annotations

from simnode.network.flows import FlowNetwork
from simnode.network.share import Transfer


class RankEndpoints:
    """The ranks' HBM and URMA engine resources; see the module docstring."""

    def __init__(self, net: FlowNetwork, hbm_GBps: float, hbm_fcfs: bool = False):
        R = net.spec.num_ranks
        self.net = net
        self.spec = net.spec
        self.hbm = net.add_resources([f"rank{r}.hbm" for r in range(R)], [hbm_GBps] * R,
                                     fcfs=hbm_fcfs)
        # 1 ns of engine time per ns: weights are ns of work per wire byte
        self.urma = net.add_resources([f"rank{r}.urma" for r in range(R)], [1.0] * R)
        cap = self.spec.urma_payload_GBps
        self.tx = net.add_resources([f"rank{r}.urma_tx" for r in range(R)], [cap] * R) if cap else None
        self.rx = net.add_resources([f"rank{r}.urma_rx" for r in range(R)], [cap] * R) if cap else None

    def send(self, src: int, dst: int, payload_bytes: float, descriptor_bytes: float, wqes: int,
             extra: tuple = (), extra_units: tuple = (), flow_key: int = 0,
             peers: int = 1) -> Transfer:
        """One message train src -> dst of ``wqes`` WQEs, ``src`` posting to ``peers`` peers in
        all; returns the event of its arrival."""
        wire = self.spec.wire_bytes(payload_bytes)
        res = (self.hbm[src], self.hbm[dst], self.urma[src])
        work = (payload_bytes + descriptor_bytes, payload_bytes, wqes * self.spec.wqe_processing_ns)
        if self.tx is not None:
            stall = wqes * self.spec.wqe_stall_ns(peers)
            tx_work = payload_bytes + stall * self.spec.urma_payload_GBps   # 1 GB/s = 1 B/ns
            res, work = res + (self.tx[src], self.rx[dst]), work + (tx_work, payload_bytes)
        res, work = nonzero(res + tuple(extra), work + tuple(extra_units))
        return self.net.send(src, dst, payload_bytes, extra_resources=res,
                             extra_weights=tuple(u / wire for u in work), tag=(src, dst),
                             flow_key=flow_key)


    def groups(self) -> list[tuple[str, list]]:
        """(name, per-rank resource ids) of the chip resources this model adds."""
        out = [("hbm", self.hbm), ("urma", self.urma)]
        if self.tx is not None:
            out += [("urma_tx", self.tx), ("urma_rx", self.rx)]
        return out


def busiest(net: FlowNetwork, groups, horizon_ns: float) -> tuple[dict, dict]:
    """Per group of per-rank resources, the busiest rank's share of it over ``horizon_ns``
    and that resource's name (e.g. ``rank0.urma_rx``): two dicts keyed by group name."""
    fracs, names = {}, {}
    for name, ids in groups:
        used = net.bytes_by_resource[ids] / (net.capacity[ids] * horizon_ns)
        i = int(used.argmax())
        fracs[name], names[name] = float(used[i]), net.names[ids[i]]
    return fracs, names


def nonzero(resources: tuple, units: tuple) -> tuple[tuple, tuple]:
    """Drop resources a transfer does not use (zero work): the max-min solver needs every
    listed resource to carry a positive weight."""
    keep = [i for i, u in enumerate(units) if u > 0]
    return tuple(resources[i] for i in keep), tuple(units[i] for i in keep)
