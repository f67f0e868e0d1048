"""Small ET graphs with closed-form answers on the 8-rank 950 supernode (exact flow solves):
a send and its receive, compute beside communication (exposed communication), the ring
collectives' step counts, and dependencies."""

from __future__ import annotations

import pytest

from simnode.chakra.etfile import COLL, COMP, RECV, SEND, ETNode, write_rank
from simnode.workloads.loader import load_inputs, load_topology_only

TOPO = "topologies/atlas950-supernode.yaml"
SPEC = load_topology_only(TOPO)[0].supernode
RATE = min(SPEC.ports_per_rank * SPEC.port_bandwidth_GBps * SPEC.mtu_bytes
           / (SPEC.mtu_bytes + SPEC.header_bytes_per_packet), SPEC.urma_payload_GBps)
PATH_NS = 2 * SPEC.link_latency_ns + SPEC.hop_latency_ns      # rank -> leaf -> rank


def step_ns(bytes_: float) -> float:
    return SPEC.doorbell_ns + bytes_ / RATE + PATH_NS


def run(tmp_path, write_yaml, graphs, name: str = "et"):
    folder = tmp_path / name
    folder.mkdir()
    for r, nodes in enumerate(graphs):
        write_rank(folder / f"g.{r}.et", nodes)
    wl = write_yaml({"kind": "chakra", "et_dir": str(folder), "batch_window_ns": 0}, f"{name}.yaml")
    res = load_inputs(TOPO, wl).run()
    return res, {f.name: f.value for f in res.figures}


def test_a_send_lands_then_its_receive_lets_compute_start(tmp_path, write_yaml):
    size = 2**20
    graphs = [[ETNode(0, "send", SEND, comm_size_bytes=size, peer=1, tag=5)],
              [ETNode(0, "recv", RECV, comm_size_bytes=size, peer=0, tag=5),
               ETNode(1, "use", COMP, (0,), 1000.0)]] + [[]] * 6
    res, figures = run(tmp_path, write_yaml, graphs)
    assert res.makespan_ns == pytest.approx(step_ns(size) + 1000.0, rel=1e-3)
    rank1 = figures["per_rank"][1]
    assert rank1["compute_ns"] == pytest.approx(1000.0) and rank1["exposed_comm_ns"] == pytest.approx(
        step_ns(size), rel=1e-3)


def test_compute_beside_a_collective_hides_it(tmp_path, write_yaml):
    size = 8 * 2**20
    a2a = ETNode(0, "a2a", COLL, comm_type="ALL_TO_ALL", comm_size_bytes=size)
    long = 2 * step_ns(size * 7 / 8)
    graphs = [[a2a, ETNode(1, "gemm", COMP, (), long)]] * 8          # no dependency between them
    res, figures = run(tmp_path, write_yaml, graphs)
    assert res.makespan_ns == pytest.approx(long)
    assert all(r["exposed_comm_ns"] == 0 for r in figures["per_rank"])
    dependent = [[a2a, ETNode(1, "gemm", COMP, (0,), long)]] * 8
    res, _ = run(tmp_path, write_yaml, dependent, "dependent")
    assert res.makespan_ns == pytest.approx(long + step_ns(size * 7 / 8), rel=1e-3)


@pytest.mark.parametrize("ctype, steps", [("REDUCE_SCATTER", 7), ("ALL_GATHER", 7), ("ALL_REDUCE", 14)])
def test_ring_collectives_take_their_steps(tmp_path, write_yaml, ctype, steps):
    size = 8 * 2**20
    graphs = [[ETNode(0, "c", COLL, comm_type=ctype, comm_size_bytes=size)]] * 8
    res, _ = run(tmp_path, write_yaml, graphs)
    assert res.makespan_ns == pytest.approx(steps * step_ns(size / 8), rel=1e-3)


def test_a_barrier_waits_for_the_last_rank(tmp_path, write_yaml):
    graphs = [[ETNode(0, "work", COMP, (), 1000.0 * (r + 1)),
               ETNode(1, "barrier", COLL, (0,), comm_type="BARRIER")] for r in range(8)]
    res, _ = run(tmp_path, write_yaml, graphs)
    assert res.makespan_ns == pytest.approx(8000.0 + SPEC.doorbell_ns + PATH_NS, rel=1e-3)
