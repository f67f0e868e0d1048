"""A MoE layer exported as Chakra ET files and run back on the supernode.

Each overlap mode at EP8 and EP32 (workloads/moe-layer.yaml): replayed with the recorded
times, the layer time is the exported run's (within 1%: the export carries every dependency
the schedule had). On the network the dispatch and combine nodes are message trains without
DeepEP's software costs: the layer comes back a little shorter, with the same bytes. mlc-chakra's own jsonizer reads
every exported file.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from simnode.chakra.etfile import COLL, read_rank, rank_files
from simnode.chakra.export import layer_graphs, write_dir
from simnode.workloads.kinds.moe_layer import simulate
from simnode.workloads.loader import load_inputs

TOPO = "topologies/atlas950-supernode.yaml"
MODES = ("sequential", "two_micro_batch", "fused")


def export(tmp_path, ranks: int, overlap: str):
    inputs = load_inputs(TOPO, "workloads/moe-layer.yaml", [f"num_ranks={ranks}", f"overlap={overlap}"])
    lr = simulate(inputs.topology, inputs.params)
    write_dir(tmp_path / "et", "moe-layer", layer_graphs(lr), {"writer": "simnode"})
    return lr


def replay(write_yaml, tmp_path, ranks: int, comm_time: str):
    wl = write_yaml({"kind": "chakra", "et_dir": str(tmp_path / "et"), "comm_time": comm_time},
                    f"chakra-{comm_time}.yaml")
    return load_inputs(TOPO, wl, [f"num_ranks={ranks}"]).run()


@pytest.mark.parametrize("ranks", (8, 32))
@pytest.mark.parametrize("overlap", MODES)
def test_the_layer_time_survives_export_and_replay(tmp_path, write_yaml, ranks, overlap):
    lr = export(tmp_path, ranks, overlap)
    res = replay(write_yaml, tmp_path, ranks, "recorded")
    assert res.makespan_ns == pytest.approx(lr.layer_ns, rel=0.01)
    # on the network, dispatch and combine lose DeepEP's software costs and nothing else: the
    # layer comes back a little shorter (0.1-1.7% at these sizes), never longer
    net = replay(write_yaml, tmp_path, ranks, "network")
    assert 0.97 * lr.layer_ns < net.makespan_ns <= lr.layer_ns
    # the exported bytes are the plans' (every dispatch and combine byte that crosses the network)
    graphs = [read_rank(f) for f in rank_files(tmp_path / "et")]
    sent = sum(n.comm_size_bytes for g in graphs for n in g if n.kind == COLL)
    planned = sum(float(plan.traffic(k).sum()) for plan in lr.plans for k in ("dispatch", "combine"))
    assert sent == pytest.approx(planned, rel=1e-9)


def test_on_the_network_the_replay_moves_the_exported_bytes(tmp_path, write_yaml):
    lr = export(tmp_path, 8, "two_micro_batch")
    res = replay(write_yaml, tmp_path, 8, "network")
    k = {r.name: r for r in res.kernels}["all_to_all"]
    figures = {f.name: f.value for f in k.figures}
    planned = sum(float(plan.traffic(x).sum()) for plan in lr.plans for x in ("dispatch", "combine"))
    assert figures["count"] == 4 and figures["bytes"] == pytest.approx(planned, rel=1e-9)
    rows = {f.name: f.value for f in res.figures}["per_rank"]
    assert all(r["comm_ns"] > 0 and r["compute_ns"] > 0 for r in rows)


def test_chakra_s_jsonizer_reads_the_exported_files(tmp_path):
    export(tmp_path, 8, "fused")
    for f in rank_files(tmp_path / "et"):
        out = tmp_path / (f.name + ".json")
        run = subprocess.run([sys.executable, "-m", "chakra.src.jsonizer.jsonizer", "--input_filename",
                              str(f), "--output_filename", str(out)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        text = out.read_text()
        assert '"COMM_COLL_NODE"' in text and '"comm_peer_bytes"' in text


def test_a_variable_all_to_all_is_one_node_with_its_bytes_per_peer(tmp_path):
    lr = export(tmp_path, 8, "sequential")
    nodes = read_rank(rank_files(tmp_path / "et")[3])
    dispatch = next(n for n in nodes if n.name == "dispatch")
    assert dispatch.comm_type == "ALL_TO_ALL" and len(dispatch.peer_bytes) == 8
    row = np.asarray(lr.plans[0].traffic("dispatch")[3])
    assert list(dispatch.peer_bytes) == [int(b) for b in row] and dispatch.peer_bytes[3] == 0
    assert dispatch.comm_size_bytes == sum(dispatch.peer_bytes)
    # the schedule's order: dispatch, its epilogue, then the experts
    ep = next(n for n in nodes if n.name == "dispatch epilogue")
    assert dispatch.id in ep.deps


def test_a_deepep_run_exports_dispatch_then_combine(tmp_path, write_yaml, cli):
    res = cli("export", TOPO, "workloads/deepep-normal.yaml", "--chakra", tmp_path / "et")
    assert res.code == 0, res.err
    assert res.out.startswith("wrote 8 Chakra ET files to ") and "deepep 4307.455 us on 8 ranks" in res.out
    nodes = read_rank(rank_files(tmp_path / "et")[0])
    assert [(n.name, n.comm_type, n.deps) for n in nodes] == [("dispatch", "ALL_TO_ALL", ()),
                                                               ("combine", "ALL_TO_ALL", (0,))]
    back = replay(write_yaml, tmp_path, 8, "recorded")
    assert back.makespan_ns == pytest.approx(4307455.0, rel=1e-6)


def test_an_export_folder_holds_one_workload(tmp_path, cli, user_error):
    folder = tmp_path / "et"
    folder.mkdir()
    (folder / "other.0.et").write_bytes(b"")
    res = cli("export", TOPO, "workloads/moe-layer.yaml", "--chakra", folder)
    user_error(res, "--chakra", "other.<rank>.et", nothing_ran=True)


def test_a_second_export_replaces_the_first(tmp_path, cli):
    folder = tmp_path / "et"
    folder.mkdir()
    (folder / "moe-layer.9.et").write_bytes(b"")          # left by an earlier, larger export
    res = cli("export", TOPO, "workloads/moe-layer.yaml", "--set", "tokens_per_rank=512",
              "--chakra", folder)
    assert res.code == 0, res.err
    assert sorted(f.name for f in folder.iterdir()) == [f"moe-layer.{r}.et" for r in range(8)]


def test_the_decode_layer_with_its_shared_stream_round_trips(tmp_path, write_yaml):
    """comm: low_latency, the shared experts on a stream of their own: recorded, the layer time
    comes back; on the network about a quarter shorter (docs/chakra.md), the low-latency
    kernels' costs being most of their time at decode sizes."""
    inputs = load_inputs(TOPO, "workloads/moe-layer-decode-v4-flash.yaml")
    lr = simulate(inputs.topology, inputs.params)
    graphs = layer_graphs(lr)
    assert {n.stream for n in graphs[0]} == {"comm", "compute", "shared"}
    write_dir(tmp_path / "et", "decode", graphs, {})
    R = len(graphs)
    assert replay(write_yaml, tmp_path, R, "recorded").makespan_ns == pytest.approx(lr.layer_ns, rel=0.01)
    assert 0.7 < replay(write_yaml, tmp_path, R, "network").makespan_ns / lr.layer_ns < 0.8
