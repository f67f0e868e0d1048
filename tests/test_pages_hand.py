"""Figures the pages work out by hand from a topology's or a workload's numbers: each is
recomputed here from the same files and must be the page's (to its printed digits), so a
change of a constant that moves one is seen."""

from __future__ import annotations

from pathlib import Path

import yaml

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


def _values(name: str) -> dict:
    values = yaml.safe_load((ROOT / "topologies" / "calibrated" / name).read_text())["values"]
    return {k.split(".")[-1]: v for k, v in values.items()}


def test_the_low_latency_page_s_calibration_figures_are_the_overlays():
    """docs/low-latency.md: the refit against the normal kernels' fit, and the URMA engine's
    time per work request of the two 950 overlays."""
    ll, normal = _values("a3-ll-write.yaml")["remote_write_ns"], _values("a3-aligned-reads.yaml")["remote_write_ns"]
    wqe = {_values(f"deepep-peer-{s}.yaml")["wqe_processing_ns"] for s in ("cost", "cache")}
    text = " ".join((DOCS / "low-latency.md").read_text().split())
    quoted = [f"`remote_write_ns` {normal:g} ns", f"{ll:.1f} ns, {100 * (ll / normal - 1):.1f}% above",
              f"**{ll:g} ns**"] + [f"({w:.0f} ns each" for w in wqe]
    assert [q for q in quoted if q not in text] == []
