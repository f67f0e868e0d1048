"""Supernode spec loading: the shipped file loads; impossible shapes name file, key and value."""

import copy
from dataclasses import replace
from pathlib import Path

import pytest

from simnode.config.topology import load_topology, load_topology_raw, topology_from_mapping
from simnode.errors import ConfigError
from simnode.config.supernode import SupernodeSpec, check_shape, supernode_from_mapping

TOPO = Path(__file__).resolve().parents[2] / "topologies" / "atlas950-supernode.yaml"
SRC = "my-supernode.yaml"


def base() -> dict:
    return copy.deepcopy(load_topology_raw(TOPO)["supernode"])


def load(**changes) -> SupernodeSpec:
    data = base()
    data.update(changes)
    return supernode_from_mapping(data, SRC)


def error_of(**changes) -> str:
    with pytest.raises(ConfigError) as info:
        load(**changes)
    return str(info.value)


def test_shipped_file_loads_with_its_chip():
    topo = load_topology(TOPO)
    sn = topo.supernode
    assert topo.chip.name == "ascend950dt"
    assert topo.num_ranks == sn.num_ranks == 8
    assert sn.routing == "spray" and sn.oversubscription == 1.0
    # 405 GB/s payload per rank after headers (the S5-derived limit used to set the ports)
    assert sn.rank_bandwidth_GBps * sn.payload_efficiency == pytest.approx(405.0, rel=1e-3)
    assert sn.source == str(TOPO)


@pytest.mark.parametrize("num_ranks, leaves", [(2, 1), (8, 1), (16, 2), (128, 16), (1024, 128)])
def test_ranks_up_to_1024_load(num_ranks, leaves):
    sn = load(num_ranks=num_ranks)
    assert sn.num_leaves == leaves and sn.ranks_per_leaf == 8


def test_wire_bytes_count_one_header_per_mtu():
    sn = load()
    assert sn.packets(0) == 1 and sn.wire_bytes(0) == 64
    assert sn.wire_bytes(4096) == 4096 + 64
    assert sn.wire_bytes(4097) == 4097 + 2 * 64


def test_oversubscription_sets_leaf_shape():
    sn = load(oversubscription=3.0)
    # r*8 down + ceil(r*8/3) up <= 128  ->  r = 12 (96 down, 32 up)
    assert sn.ranks_per_leaf == 12 and sn.leaf_up_ports == 32
    assert sn.leaf_uplink_GBps == pytest.approx(sn.ranks_per_leaf * sn.rank_bandwidth_GBps / 3)


@pytest.mark.parametrize("key, value, expected", [
    ("port_bandwidth_GBps", 0, "greater than 0"),
    ("oversubscription", 0.5, ">= 1.0"),
    ("num_ranks", 1, ">= 2"),
    ("num_ranks", 9000, "<= 8192"),
    ("routing", "ecpm", "'ecmp'"),
    ("leaf_radix", "big", "an integer"),
    ("hop_latency_ns", -1, ">= 0"),
    ("urma_payload_GBps", -5, ">= 0"),
    ("urma_payload_GBps", "fast", "a number"),
    ("urma_context_cache_entries", -1, ">= 0"),
    ("urma_context_cache_entries", 2.5, "an integer"),
    ("urma_context_miss_ns", -3, ">= 0"),
    ("urma_wqe_ns_per_peer", -0.1, ">= 0"),
    ("urma_wqe_ns_per_peer", "slow", "a number"),
])
def test_bad_values_name_file_key_and_value(key, value, expected):
    msg = error_of(**{key: value})
    assert SRC in msg and f"supernode.{key}" in msg and repr(value) in msg and expected in msg


def test_unknown_key_suggests_the_right_one():
    msg = error_of(num_spine=4)
    assert SRC in msg and "supernode.num_spine" in msg and "Did you mean 'num_spines'" in msg


def test_missing_key():
    data = base()
    del data["mtu_bytes"]
    with pytest.raises(ConfigError, match=r"supernode\.mtu_bytes = '<missing>'"):
        supernode_from_mapping(data, SRC)


def test_leaf_radix_too_small_for_one_rank():
    msg = error_of(leaf_radix=12)        # 8 ports + 8 uplinks > 12
    assert "supernode.leaf_radix = 12" in msg and "at least 16 ports" in msg and SRC in msg


def test_leaves_without_spines_are_disconnected():
    msg = error_of(num_ranks=16, num_spines=0)
    assert "supernode.num_spines = 0" in msg and "disconnected" in msg and "2 leaf switches" in msg


def test_more_spines_than_uplinks():
    msg = error_of(num_ranks=16, num_spines=65)
    assert "supernode.num_spines = 65" in msg and "at most 64" in msg


def test_spine_radix_too_small_for_the_ranks():
    msg = error_of(num_ranks=1024, spine_radix=64)
    assert "supernode.num_ranks = 1024" in msg and "at most 512 ranks" in msg
    assert "spine_radix is 64" in msg


def test_single_leaf_needs_no_spines():
    assert load(num_ranks=8, num_spines=0).num_leaves == 1


def test_errors_through_the_topology_loader_name_the_file():
    data = load_topology_raw(TOPO)
    data["supernode"]["oversubscription"] = 0.9
    with pytest.raises(ConfigError) as info:
        topology_from_mapping(data, "pod.yaml")
    assert str(info.value).startswith("pod.yaml: supernode.oversubscription = 0.9")


def test_check_shape_guards_specs_built_in_code():
    sn = load()
    with pytest.raises(ConfigError, match=r"supernode\.port_bandwidth_GBps = 0"):
        check_shape(replace(sn, port_bandwidth_GBps=0))
    with pytest.raises(ConfigError, match=r"supernode\.oversubscription = 0\.5"):
        check_shape(replace(sn, oversubscription=0.5))


def test_context_miss_needs_the_urma_ceiling():
    msg = error_of(urma_context_miss_ns=10, urma_payload_GBps=0)
    assert SRC in msg and "supernode.urma_context_miss_ns = 10" in msg
    assert "unless supernode.urma_payload_GBps > 0" in msg


def test_per_peer_wqe_cost_needs_the_urma_ceiling():
    msg = error_of(urma_wqe_ns_per_peer=0.5, urma_payload_GBps=0)
    assert SRC in msg and "supernode.urma_wqe_ns_per_peer = 0.5" in msg
    assert "unless supernode.urma_payload_GBps > 0" in msg


def test_wqe_stall_adds_the_cache_misses_and_the_per_peer_cost():
    assert load().wqe_stall_ns(127) == 0.0                           # shipped: both off
    linear = load(urma_wqe_ns_per_peer=0.08)
    assert linear.wqe_stall_ns(7) == pytest.approx(0.56)              # grows from the first peer
    assert linear.wqe_stall_ns(127) == pytest.approx(10.16)
    cache = load(urma_context_cache_entries=32, urma_context_miss_ns=10)
    assert cache.wqe_stall_ns(31) == 0.0                              # nothing until it overflows
    assert cache.wqe_stall_ns(127) == pytest.approx(10 * 95 / 127)
    both = load(urma_context_cache_entries=32, urma_context_miss_ns=10, urma_wqe_ns_per_peer=0.08)
    assert both.wqe_stall_ns(127) == pytest.approx(10 * 95 / 127 + 10.16)


def test_context_miss_fraction_is_the_uncached_share_of_peers():
    assert load().context_miss_fraction(127) == 0.0                  # shipped: off
    sn = load(urma_context_cache_entries=32, urma_context_miss_ns=10)
    assert sn.context_miss_fraction(7) == 0.0                         # every peer fits
    assert sn.context_miss_fraction(32) == 0.0
    assert sn.context_miss_fraction(127) == pytest.approx(95 / 127)
    assert load(urma_context_miss_ns=10).context_miss_fraction(7) == 1.0   # no cache at all
