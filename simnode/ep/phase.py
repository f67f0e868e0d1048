"""What every EP kernel's plan answers, and what one run of a kernel returns.

``TrafficPlan``: the base of a member's plan (pure numpy, no SimPy). The member gives
``pair`` ([src, dst] rows dispatch moves from src to dst's experts; the diagonal holds a
rank's own rows, which never cross the network; combine returns the same rows along the
transpose), ``wire_row_bytes(kind)`` (payload bytes of one row on the network) and
``counted_row_bytes(kind)`` (the bytes of one received row its benchmark counts); the base
derives the traffic matrix and the received counts from them.

``RankTimes``: one rank's kernel start, end and named phases. ``PhaseRun``: one kernel on
every rank: times, received rows, bytes, the bound, the hottest links and the busiest chip
resources, with the benchmark's bandwidth per rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

KINDS = ("dispatch", "combine")


class TrafficPlan:
    """Derived counts of a member's plan; see the module docstring."""

    pair: np.ndarray

    def wire_row_bytes(self, kind: str):
        raise NotImplementedError

    def counted_row_bytes(self, kind: str) -> int:
        raise NotImplementedError

    def traffic(self, kind: str) -> np.ndarray:
        """[src, dst] payload bytes ``kind`` sends over the network (own rows left out)."""
        pair = self.pair if kind == "dispatch" else self.pair.T
        traffic = pair * self.wire_row_bytes(kind)
        np.fill_diagonal(traffic, 0)
        return traffic

    def received(self, include_self: bool = True) -> np.ndarray:
        """[d] rows rank d receives in dispatch (= the rows it returns in combine), its own
        included unless ``include_self`` is False."""
        m = self.pair
        return m.sum(axis=0) - (0 if include_self else np.diag(m))


@dataclass
class RankTimes:
    """One rank's run of a kernel: its start, end and named phases (the trace's spans)."""
    start_ns: float = 0.0
    phases: dict = field(default_factory=dict)   #: phase name -> (start_ns, end_ns)
    end_ns: float = 0.0

    def mark(self, name: str, start_ns: float, end_ns: float) -> None:
        self.phases[name] = (start_ns, end_ns)


@dataclass
class PhaseRun:
    kind: str                        #: "dispatch" or "combine"
    ranks: list                      #: RankTimes per rank
    recv_tokens: np.ndarray          #: rows each rank received, its own included (the benchmarks' count)
    recv_remote_tokens: np.ndarray   #: of which came over the network from other ranks
    logical_bytes_per_token: int     #: the benchmark's bytes per received row
    wire_bytes: float                #: bytes the network carried, headers included
    payload_bytes: float
    bound_ns: float                  #: busiest port's bytes / bandwidth (no latency, no costs)
    hottest: list                    #: (resource, bytes, utilization) of the busiest links
    resources: dict                  #: per-rank chip resources: name -> busiest rank's utilization
    busiest: dict                    #: name -> that busiest resource, e.g. "rank0.urma_rx"
    solver_recomputes: int
    transfers: int

    @property
    def kernel_ns(self) -> np.ndarray:
        return np.array([r.end_ns - r.start_ns for r in self.ranks])

    @property
    def GBps(self) -> np.ndarray:
        """The benchmarks' convention per rank: received rows x counted bytes / kernel time.
        DeepEP's ``num_recv_tokens`` counts every record in the receive buffer, the self-rank
        region too (S6 dispatch.hpp: the rank histogram and receive prefix sums include the
        rank itself; facts 2.4's 16,384 x 4.44 = 72.7 K records at EP8 count it as well)."""
        return self.recv_tokens * self.logical_bytes_per_token / self.kernel_ns

    @property
    def network_GBps(self) -> np.ndarray:
        """The same with only the rows that crossed the network."""
        return self.recv_remote_tokens * self.logical_bytes_per_token / self.kernel_ns
