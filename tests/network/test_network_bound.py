"""Analytical bound: the busiest port under each routing policy."""

import numpy as np
import pytest

from simnode.network.bound import analytical_bound_ns, busiest_port, port_loads
from simnode.network.routes import ecmp_choice
from simnode.config.supernode import SupernodeSpec


def spec(**kw) -> SupernodeSpec:
    base = dict(num_ranks=8, ports_per_rank=1, port_bandwidth_GBps=100.0, leaf_radix=4,
                spine_radix=8, num_spines=2, oversubscription=1.0, routing="spray",
                hop_latency_ns=0.0, link_latency_ns=0.0, mtu_bytes=1000,
                header_bytes_per_packet=0, wqe_processing_ns=0.0, doorbell_ns=0.0,
                wqebb_bytes=64)
    base.update(kw)
    return SupernodeSpec(**base)


def test_uniform_traffic_is_bound_by_rank_ports():
    t = np.full((8, 8), 1000.0)
    assert analytical_bound_ns(t, spec()) == pytest.approx(7 * 1000 / 100)


def test_diagonal_is_local_and_ignored():
    t = np.eye(8) * 5e8
    assert analytical_bound_ns(t, spec()) == 0.0


def test_hot_destination_is_bound_by_its_ingress():
    t = np.zeros((8, 8))
    t[:, 5] = 1000.0
    port = busiest_port(t, spec())
    assert port.name == "leaf2->rank5" and port.time_ns == pytest.approx(7 * 10.0)


def test_urma_ceiling_below_the_ports_is_the_bound_and_counts_payload_only():
    t = np.full((8, 8), 1000.0)
    s = spec(urma_payload_GBps=50.0, header_bytes_per_packet=100)   # ports: 100 GB/s wire
    port = busiest_port(t, s, with_headers=True)
    assert port.name == "rank0.urma_tx" and port.time_ns == pytest.approx(7 * 1000 / 50)
    assert {p.name for p in port_loads(t, s)} >= {"rank7.urma_tx", "rank7.urma_rx"}
    assert not any("urma" in p.name for p in port_loads(t, spec()))       # 0 = no ceiling


def test_urma_receive_ceiling_binds_a_hot_destination():
    t = np.zeros((8, 8))
    t[:, 5] = 1000.0
    port = busiest_port(t, spec(urma_payload_GBps=50.0))
    assert port.name == "rank5.urma_rx" and port.time_ns == pytest.approx(7 * 20.0)


def test_oversubscribed_leaf_is_bound_by_its_uplinks():
    s = spec(oversubscription=2.0, leaf_radix=3, num_spines=1, num_ranks=4)  # 2 ranks/leaf, 1 up
    t = np.zeros((4, 4))
    t[0, 2] = t[1, 3] = 1000.0
    port = busiest_port(t, s)
    assert port.name == "leaf0->spines" and port.capacity_GBps == pytest.approx(100.0)
    assert port.time_ns == pytest.approx(20.0)


def test_ecmp_puts_each_pair_on_its_hashed_spine():
    s = spec(routing="ecmp")
    t = np.zeros((8, 8))
    t[0, 2] = 1000.0
    loads = {p.name: p.size_bytes for p in port_loads(t, s)}
    sp = ecmp_choice(0, 2, 0, 2)
    assert loads[f"leaf0->spine{sp}"] == 1000.0 and loads[f"leaf0->spine{1 - sp}"] == 0.0
    spread = {p.name: p.size_bytes for p in port_loads(t, s, flow_keys=tuple(range(64)))}
    assert spread["leaf0->spine0"] + spread["leaf0->spine1"] == pytest.approx(1000.0)


def test_ecmp_traffic_per_flow_key():
    s = spec(routing="ecmp")
    t = np.zeros((8, 8, 4))
    t[0, 2, 3] = 1000.0
    t[1, 3, 1] = 500.0
    loads = {p.name: p.size_bytes for p in port_loads(t, s)}
    assert loads[f"leaf0->spine{ecmp_choice(0, 2, 3, 2)}"] >= 1000.0
    assert sum(loads[f"leaf0->spine{k}"] for k in range(2)) == 1500.0
    assert loads["rank0->leaf0"] == 1000.0 and loads["leaf1->rank3"] == 500.0


def test_headers_are_counted_when_asked():
    t = np.zeros((8, 8))
    t[0, 1] = 2500.0
    s = spec(header_bytes_per_packet=100)
    assert analytical_bound_ns(t, s) == pytest.approx(25.0)
    assert analytical_bound_ns(t, s, with_headers=True) == pytest.approx(28.0)


def test_wrong_shape():
    with pytest.raises(ValueError, match=r"expected \(8, 8\) or"):
        analytical_bound_ns(np.zeros((4, 4)), spec())


@pytest.mark.parametrize("seed", range(12))
def test_busiest_port_is_the_first_largest_of_port_loads(seed):
    """``busiest_port`` picks without a record per port what ``max`` picks from
    ``port_loads`` (the first largest time, URMA sides first): on random traffic, with
    ties (uniform traffic), URMA ceilings, headers and both routings."""
    rng = np.random.default_rng(seed)
    kw = dict(routing=("spray", "ecmp")[seed % 2])
    if seed % 3 == 0:
        kw["urma_payload_GBps"] = float(rng.choice([50.0, 100.0, 400.0]))
    if seed % 4 < 2:
        kw.update(header_bytes_per_packet=64)
    s = spec(**kw)
    t = np.full((8, 8), 1000.0) if seed % 5 == 0 else rng.integers(0, 5, (8, 8)) * 250.0
    for headers in (False, True):
        want = max(port_loads(t, s, with_headers=headers), key=lambda p: p.time_ns)
        assert busiest_port(t, s, with_headers=headers) == want
