"""A decode step exported as Chakra ET files (``simnode export``) and run back: replayed with
the recorded times, the step time is the run's (every stream, fork / join and barrier is a
node or an edge of the graphs); the MoE blocks' dispatch and combine carry the low-latency
plan's bytes per peer."""

from __future__ import annotations

import pytest

from simnode.chakra.etfile import COLL, read_rank, rank_files
from simnode.chakra.export import step_graphs, write_dir
from simnode.workloads.kinds.decode_step import simulate
from simnode.workloads.loader import load_inputs

TOPO = "topologies/atlas950-supernode.yaml"
SMALL = ["num_layers=4", "chips=4", "attn_dp=4", "moe_ep=4", "global_batch=8", "next_n=1",
         "accepted_tokens=0.5"]


@pytest.mark.parametrize("extra", ([], ["forced_eplb=false", "routing=zipf"]))
def test_a_decode_step_survives_export_and_replay(tmp_path, write_yaml, extra):
    inputs = load_inputs(TOPO, "workloads/v4-flash-decode.yaml", SMALL + extra)
    _, out = simulate(inputs.topology, inputs.params)
    write_dir(tmp_path / "et", "v4", step_graphs(out.run), {"writer": "simnode"})
    wl = write_yaml({"kind": "chakra", "et_dir": str(tmp_path / "et"), "comm_time": "recorded"}, "c.yaml")
    res = load_inputs(TOPO, wl, ["num_ranks=4"]).run()
    assert res.makespan_ns == pytest.approx(out.run.step_ns, rel=0.01)
    graphs = [read_rank(f) for f in rank_files(tmp_path / "et")]
    assert len(graphs) == 4
    sent = sum(n.comm_size_bytes for g in graphs for n in g if n.kind == COLL)
    moe_ops = len(out.run.moe_index)
    per_step = sum(sum(sum(pb[k]) for k in ("dispatch", "combine")) for pb in out.run.moe.peer_bytes)
    if len(out.run.moes) == 1:
        assert sent == pytest.approx(moe_ops * per_step, rel=1e-9)
    else:                                   # hash-routed layers send the table's bytes
        assert sent > 0


def test_the_export_command_writes_a_decode_step(cli, repo_root, tmp_path):
    res = cli("export", repo_root / TOPO, repo_root / "workloads/v4-flash-decode.yaml",
              *[a for s in SMALL for a in ("--set", s)], "--chakra", tmp_path / "et")
    assert res.code == 0, res.err
    assert "decode_step" in res.out and len(list((tmp_path / "et").glob("*.et"))) == 4
