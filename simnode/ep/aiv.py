"""Kernels whose AI vector cores move the rows themselves (memory semantics), as flows.

A member whose AIVs copy rows to and from other dies' memory windows (the A3's normal
kernels over HCCS; low-latency kernels' window writes) mixes ``AivCopies`` into its
``EPKernel``. A copy of n rows is one flow that puts its bytes on the path's links and on
both ranks' HBM and holds the copying AIV (a resource of 1 ns of AIV time per ns) for the
rows' serial time, so it runs at most at that AIV's own rate and shares the links with every
other AIV's flow:

- ``start_copies(net)``: every pair's path and one-way latency, looked up once (a chain
  starts ~256 R flows); returns the farthest one-way latency;
- ``aiv_resources(phase)``: one resource per (rank, AIV); ``aiv_pool(phase, work)``: one pool
  per rank sized by ``effective_aivs`` of its AIVs' work;
- ``copy_ns(bytes, pipe)``: one AIV's MTE2 / MTE3 copy time on the chip's paths;
- ``copy_flows`` (a group, one event) and ``copy_flow`` (one transfer, optionally served by
  the source die's read port, or a store from the AIV's UB); ``chain``: one AIV's pieces
  [(peer, rows)] in order.

``split(total, parts)`` and ``effective_aivs(work)`` are the kernels' equal splits.
"""

from __future__ import annotations

import numpy as np


def split(total: int, parts: int) -> np.ndarray:
    """``total`` items over ``parts`` as the kernels split them: equal shares, the
    remainder one each to the first parts."""
    return np.full(parts, total // parts) + (np.arange(parts) < total % parts)


def effective_aivs(work) -> float:
    """AIVs that, sharing the work evenly, take as long as the busiest one: total / max
    (at least a tiny positive number, so an idle pool is still a resource)."""
    work = np.asarray(work, dtype=float)
    top = float(work.max()) if work.size else 0.0
    return float(work.sum() / top) if top > 0 else 1.0


class AivCopies:
    """Mixin of an ``EPKernel`` with ``r_hbm`` (share ids per rank); see the module docstring."""

    def start_copies(self, net) -> float:
        chip, R = self.chip, self.spec.num_ranks
        f = chip.aic_freq_GHz
        self._rates = {pipe: (chip.paths[path].bandwidth_B_per_cycle * f,
                              chip.paths[path].base_latency_cycles / f)
                       for pipe, path in (("mte2", "gm_to_ub"), ("mte3", "ub_to_gm"))}
        self.vec_ops_per_ns = chip.vector.ops_per_cycle["simple"] * chip.aiv_freq_GHz
        src, dst = np.repeat(np.arange(R), R), np.tile(np.arange(R), R)
        self.one_way_ns = net.latency_ns(src, dst).reshape(R, R)
        self.rtt_ns = self.one_way_ns + self.one_way_ns.T
        ports, _ = net.routes.route(src, dst)
        self._paths = [tuple(int(net.ports[q]) for q in row if q >= 0) for row in ports]
        self.pools: dict = {}        #: phase -> share ids of its AIV resources
        return float(self.one_way_ns.max()) if R > 1 else 0.0

    def copy_ns(self, nbytes: float, pipe: str) -> float:
        """One AIV's copy of ``nbytes`` on ``pipe`` ("mte2": GM->UB, "mte3": UB->GM), in ns."""
        rate, base = self._rates[pipe]
        return base + nbytes / rate

    def aiv_resources(self, phase: str) -> np.ndarray:
        """One resource per AIV of every rank for a phase of per-AIV chains (1 ns of AIV time
        per ns): [rank, aiv] share ids."""
        R, A = self.spec.num_ranks, self.plan.num_aiv
        ids = np.asarray(self.net.share.add_resources(
            [f"rank{r}.aiv{a}_{phase}" for r in range(R) for a in range(A)], [1.0] * (R * A)),
            dtype=np.int64)
        self.pools[phase] = ids
        return ids.reshape(R, A)

    def aiv_pool(self, phase: str, work: np.ndarray) -> np.ndarray:
        """The ranks' AIV pools of a phase, from each rank's per-AIV work [R, A] (ns): 1 ns of
        AIV time per ns and AIV, as many AIVs as ``effective_aivs``."""
        caps = [effective_aivs(w) for w in work]
        ids = np.asarray(self.net.share.add_resources(
            [f"rank{r}.aiv_{phase}" for r in range(len(caps))], caps), dtype=np.int64)
        self.pools[phase] = ids
        return ids

    def copy_flows(self, src, dst, payload, aiv_rows, aiv_ns):
        """Flows of rows: ``payload`` bytes src -> dst on the links and both HBMs, and
        ``aiv_ns`` of the AIV pool ``aiv_rows`` (share ids) that copies them."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        payload = np.asarray(payload, dtype=float)
        rows = np.stack([np.asarray(aiv_rows, dtype=np.int64), self.r_hbm[src], self.r_hbm[dst]], axis=1)
        units = np.stack([np.asarray(aiv_ns, dtype=float), payload, payload], axis=1)
        local = src == dst
        units[local, 2] = 0.0                     # a local copy reads and writes one HBM: count once
        units[local, 1] = 2 * payload[local]
        self.payload_sent += float(payload[~local].sum())
        return self.post(self.net.send_many(src, dst, payload, rows, units, tag=(src, dst)))

    def copy_flow(self, src: int, dst: int, payload: float, aiv: int, aiv_ns: float,
                  served_by: int = -1, from_ub: bool = False):
        """One flow of ``copy_flows`` (the same resources and units), started on the share
        directly with the path looked up once per run; ``served_by``: the source die's read
        port, for a remote read; ``from_ub``: a store of rows the AIV holds in its UB (only
        the destination's HBM is written)."""
        hs, hd = int(self.r_hbm[src]), int(self.r_hbm[dst])
        if src == dst:                            # a local copy reads and writes one HBM
            return self.net.share.start(payload, (aiv, hs), (aiv_ns / payload, 1.0 if from_ub else 2.0))
        path = self._paths[src * self.spec.num_ranks + dst]
        wire = self.spec.wire_bytes(payload)
        self.payload_sent += payload
        extra, w = (aiv, hs, hd), (aiv_ns / wire, payload / wire, payload / wire)
        if from_ub:
            extra, w = (aiv, hd), (aiv_ns / wire, payload / wire)
        if served_by >= 0:
            extra, w = extra + (served_by,), w + (payload / wire,)
        return self.net.share.start(wire, path + extra, (1.0,) * len(path) + w,
                                    latency_ns=float(self.one_way_ns[src, dst]))

    def chain(self, rank: int, aiv: int, pieces: list, row_bytes: float, row_ns,
              pull: bool = False, read_ports=()):
        """AIV ``aiv`` (share id) of ``rank`` moves its pieces [(peer, rows)] in order, one
        flow per piece, the next started when the last has arrived: a pull reads from the
        peer (peer -> rank, served by ``read_ports[peer]`` if given), a push writes to it.
        ``row_ns[peer]``: the AIV's serial time per row with that peer."""
        for peer, n in pieces:
            if n <= 0:
                continue
            if pull:
                yield self.copy_flow(peer, rank, n * row_bytes, aiv, n * row_ns[peer],
                                     int(read_ports[peer]) if peer != rank and len(read_ports) else -1)
            else:
                yield self.copy_flow(rank, peer, n * row_bytes, aiv, n * row_ns[peer])
