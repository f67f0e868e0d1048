"""Chakra ET files simnode did not write (tests/chakra/fixtures/README.md: mlc-chakra's own
generator) on the 950 supernode, against a hand calculation from the topology's numbers.

Eight ranks share one leaf of the Clos: a message crosses two links and one switch hop. A
rank sends at most ``min(ports x port bandwidth x payload share of a packet, URMA payload
ceiling)``; each step of a collective costs one doorbell, its bytes at that rate, and one
path latency. ALL_TO_ALL of S bytes per rank: one step of (N - 1) / N x S per rank;
ALL_REDUCE as a ring: 2 (N - 1) steps of S / N. The flow solver runs exact
(``batch_window_ns: 0``): its batching window would add up to a window per step.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simnode.workloads.loader import load_inputs, load_topology_only

TOPO = "topologies/atlas950-supernode.yaml"
FIXTURES = Path(__file__).parent / "fixtures"
S = 64 * 2**20                       #: comm_size of the generated nodes (fixtures/README.md)
N = 8


def rank_rate_GBps(spec) -> float:
    payload_share = spec.mtu_bytes / (spec.mtu_bytes + spec.header_bytes_per_packet)
    return min(spec.ports_per_rank * spec.port_bandwidth_GBps * payload_share, spec.urma_payload_GBps)


def step_ns(spec, bytes_per_rank: float) -> float:
    latency = 2 * spec.link_latency_ns + spec.hop_latency_ns       # rank -> leaf -> rank
    return spec.doorbell_ns + bytes_per_rank / rank_rate_GBps(spec) + latency


def run(write_yaml, folder: str):
    wl = write_yaml({"kind": "chakra", "et_dir": str(FIXTURES / folder), "batch_window_ns": 0},
                    f"{folder}.yaml")
    return load_inputs(TOPO, wl).run()


def test_the_generated_all_to_all_takes_the_hand_calculated_time(write_yaml):
    spec = load_topology_only(TOPO)[0].supernode
    res = run(write_yaml, "alltoall-8")
    hand = step_ns(spec, (N - 1) / N * S)
    assert res.makespan_ns == pytest.approx(hand, rel=0.05)
    (k,) = res.kernels
    assert k.name == "all_to_all" and k.time_ns == pytest.approx(hand, rel=0.05)


def test_the_generated_all_reduce_takes_the_hand_calculated_ring_time(write_yaml):
    spec = load_topology_only(TOPO)[0].supernode
    res = run(write_yaml, "allreduce-8")
    hand = 2 * (N - 1) * step_ns(spec, S / N)
    assert res.makespan_ns == pytest.approx(hand, rel=0.05)
    figures = {f.name: f.value for f in res.kernels[0].figures}
    assert figures["bytes"] == pytest.approx(2 * (N - 1) * S, rel=1e-9)     # N ranks x 2(N-1) x S/N
