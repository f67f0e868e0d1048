"""Figures the pages work out by hand from a topology's or a workload's numbers: each is
recomputed here from the same files and must be the page's (to its printed digits), so a
change of a constant that moves one is seen."""

from __future__ import annotations

from pathlib import Path

from simnode.workloads.loader import load_topology_only

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_the_chakra_page_s_hand_calculation_is_the_topology_s():
    """docs/chakra.md, "A foreign file checked by hand": a rank's rate, a step's fixed costs,
    the 64 MiB all-reduce (14 ring steps of 8 MiB) and all-to-all (7/8 of it in one step)."""
    spec = load_topology_only(str(ROOT / "topologies" / "atlas950-supernode.yaml"))[0].supernode
    share = spec.mtu_bytes / (spec.mtu_bytes + spec.header_bytes_per_packet)
    rate = min(spec.ports_per_rank * spec.port_bandwidth_GBps * share, spec.urma_payload_GBps)
    path = 2 * spec.link_latency_ns + spec.hop_latency_ns
    size, n = 64 * 2**20, 8
    step = spec.doorbell_ns + size / n / rate + path
    alltoall = spec.doorbell_ns + (n - 1) / n * size / rate + path
    text = " ".join((DOCS / "chakra.md").read_text().split())
    quoted = [f"min({spec.ports_per_rank} ports x {spec.port_bandwidth_GBps:g} GB/s x "
              f"{spec.mtu_bytes}/{spec.mtu_bytes + spec.header_bytes_per_packet}, the URMA ceiling "
              f"{spec.urma_payload_GBps:g} GB/s) = {rate:.1f} GB/s",
              f"a step costs a {spec.doorbell_ns:g} ns doorbell plus {path:g} ns of path",
              f"{2 * (n - 1)} steps of {size // n // 2**20} MiB",
              f"{spec.doorbell_ns:g} + {size // n} / {rate:.1f} + {path:g} = {step:.0f} ns, "
              f"{2 * (n - 1) * step / 1e3:.1f} us in all",
              f"{alltoall / 1e3:.1f} us by hand"]
    assert [q for q in quoted if q not in text] == []
