"""Bad Chakra input is a one-line ConfigError naming the file, key and value (exit 2): a file
that is not an ET, a missing rank, a rank count the topology does not have, a collective or
node type simnode does not run, broken dependencies, ranks whose collectives differ, a kind
export cannot write, and mlc-chakra missing."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from simnode.chakra.etfile import COLL, COMP, SEND, ETNode, write_rank

TOPO = "topologies/atlas950-supernode.yaml"
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def chakra_run(tmp_path, write_yaml, cli):
    """Run kind chakra on a folder: chakra_run(folder, *more CLI args) -> CliResult."""
    def run(folder, *more):
        wl = write_yaml({"kind": "chakra", "et_dir": str(folder)}, "chakra.yaml")
        return cli("run", TOPO, wl, *more)
    return run


def copy_ranks(src: Path, dst: Path, ranks) -> Path:
    dst.mkdir()
    for r in ranks:
        shutil.copy(src / f"ALL_TO_ALL.{r}.et", dst / f"ALL_TO_ALL.{r}.et")
    return dst


def write_graphs(folder: Path, graphs) -> Path:
    folder.mkdir()
    for r, nodes in enumerate(graphs):
        write_rank(folder / f"w.{r}.et", nodes)
    return folder


def test_a_file_that_is_not_an_et(tmp_path, chakra_run, user_error):
    folder = tmp_path / "et"
    folder.mkdir()
    for r in range(8):
        (folder / f"w.{r}.et").write_text("kind: moe_layer\nnum_ranks: 8\n")
    user_error(chakra_run(folder), "w.0.et", "expected a Chakra ET file", nothing_ran=True)


def test_a_missing_rank(tmp_path, chakra_run, user_error):
    folder = copy_ranks(FIXTURES / "alltoall-8", tmp_path / "et", [0, 1, 2, 4, 5, 6, 7])
    user_error(chakra_run(folder), "et_dir", "rank 3 is missing", nothing_ran=True)


def test_a_folder_without_et_files(tmp_path, chakra_run, user_error):
    (tmp_path / "empty").mkdir()
    user_error(chakra_run(tmp_path / "empty"), "et_dir", "it holds none", nothing_ran=True)
    user_error(chakra_run(tmp_path / "nowhere"), "et_dir", "a folder of Chakra ET files", nothing_ran=True)


def test_a_rank_count_the_topology_does_not_run(tmp_path, chakra_run, user_error):
    folder = copy_ranks(FIXTURES / "alltoall-8", tmp_path / "et", range(4))
    user_error(chakra_run(folder), "supernode.num_ranks = 8", "4 files, one per rank",
               "--set num_ranks=4", nothing_ran=True)
    user_error(chakra_run(FIXTURES / "alltoall-8", "--set", "num_ranks=16"), "num_ranks = 16",
               "8 files", nothing_ran=True)


def test_an_unknown_comm_type(tmp_path, chakra_run, user_error):
    folder = write_graphs(tmp_path / "et", [[ETNode(0, "bcast", COLL, comm_type="BROADCAST",
                                                    comm_size_bytes=1024)]] * 8)
    user_error(chakra_run(folder), "w.0.et", "comm_type = 'BROADCAST'", "ALL_TO_ALL, ALL_REDUCE",
               nothing_ran=True)


def write_raw(folder: Path, node) -> Path:
    """Every one of 8 ranks' files: the metadata record, then ``node`` (an et_def Node) as is."""
    from chakra.schema.protobuf import et_def_pb2 as pb
    from chakra.src.third_party.utils.protolib import encodeMessage
    folder.mkdir()
    for r in range(8):
        with open(folder / f"w.{r}.et", "wb") as f:
            encodeMessage(f, pb.GlobalMetadata(version="1.0.0"))
            encodeMessage(f, node)
    return folder


def test_a_comm_type_the_schema_does_not_have(tmp_path, chakra_run, user_error):
    from chakra.schema.protobuf import et_def_pb2 as pb
    node = pb.Node(id=0, name="odd", type=pb.COMM_COLL_NODE)
    node.attr.append(pb.AttributeProto(name="comm_type", int64_val=42))
    user_error(chakra_run(write_raw(tmp_path / "et", node)), "comm_type = '42'", nothing_ran=True)


def test_a_node_type_simnode_does_not_run(tmp_path, chakra_run, user_error):
    from chakra.schema.protobuf import et_def_pb2 as pb
    folder = write_raw(tmp_path / "et", pb.Node(id=0, name="load", type=pb.MEM_LOAD_NODE))
    user_error(chakra_run(folder), "type = 'MEM_LOAD_NODE'", "COMP_NODE", nothing_ran=True)


def test_a_dependency_on_no_node_and_a_circle(tmp_path, chakra_run, user_error):
    dangling = write_graphs(tmp_path / "a", [[ETNode(0, "x", COMP, (7,), 10.0)]] * 8)
    user_error(chakra_run(dangling), "w.0.et", "node 0 ('x').deps = 7", nothing_ran=True)
    circle = write_graphs(tmp_path / "b", [[ETNode(0, "x", COMP, (1,), 10.0),
                                            ETNode(1, "y", COMP, (0,), 10.0)]] * 8)
    user_error(chakra_run(circle), "without a circle", nothing_ran=True)


def test_ranks_whose_collectives_differ(tmp_path, chakra_run, user_error):
    a2a = ETNode(0, "a2a", COLL, comm_type="ALL_TO_ALL", comm_size_bytes=1024)
    ar = ETNode(0, "ar", COLL, comm_type="ALL_REDUCE", comm_size_bytes=1024)
    folder = write_graphs(tmp_path / "et", [[a2a]] * 7 + [[ar]])
    user_error(chakra_run(folder), "w.7.et", "collective 0 = 'ALL_REDUCE'", "rank 0 has ALL_TO_ALL",
               nothing_ran=True)


def test_per_peer_bytes_not_one_per_rank(tmp_path, chakra_run, user_error):
    node = ETNode(0, "a2a", COLL, comm_type="ALL_TO_ALL", comm_size_bytes=3, peer_bytes=(1, 1, 1))
    folder = write_graphs(tmp_path / "et", [[node]] * 8)
    user_error(chakra_run(folder), "comm_peer_bytes = '3 entries'", "one entry per rank (8 ranks)",
               nothing_ran=True)


def test_export_of_a_kind_it_cannot_write(tmp_path, cli, user_error):
    res = cli("export", "topologies/ascend950dt.yaml", "workloads/gemm-bf16-4096x7168x16384.yaml",
              "--chakra", tmp_path / "et")
    user_error(res, "kind = 'gemm'", "moe_layer, deepep", nothing_ran=True)
    assert not (tmp_path / "et").exists()


def test_without_mlc_chakra(tmp_path, chakra_run, user_error, monkeypatch):
    monkeypatch.setitem(sys.modules, "chakra.schema.protobuf", None)
    user_error(chakra_run(FIXTURES / "alltoall-8"), "mlc-chakra", "pip install 'simnode[chakra]'",
               nothing_ran=True)


def test_two_workloads_in_one_folder(tmp_path, chakra_run, user_error):
    folder = copy_ranks(FIXTURES / "alltoall-8", tmp_path / "et", range(8))
    shutil.copy(FIXTURES / "allreduce-8" / "ALL_REDUCE.0.et", folder)
    user_error(chakra_run(folder), "et_dir", "it holds 2: ALL_REDUCE, ALL_TO_ALL", nothing_ran=True)


def test_point_to_point_nodes_without_a_partner(tmp_path, chakra_run, user_error):
    from chakra.schema.protobuf import et_def_pb2 as pb
    no_peer = write_raw(tmp_path / "a", pb.Node(id=0, name="send", type=pb.COMM_SEND_NODE))
    user_error(chakra_run(no_peer), "attr.comm_dst = -1", "the peer rank", nothing_ran=True)
    far = write_graphs(tmp_path / "b", [[ETNode(0, "send", SEND, comm_size_bytes=8, peer=9)]] + [[]] * 7)
    user_error(chakra_run(far), "w.0.et", "peer = 9", "another rank in 0..7", nothing_ran=True)
    alone = write_graphs(tmp_path / "c", [[ETNode(0, "send", SEND, comm_size_bytes=8, peer=1, tag=2)]]
                         + [[]] * 7)
    user_error(chakra_run(alone), "w.1.et", "receives from rank 0 with comm_tag 2 = 0",
               "as many as rank 0 sends there (1)", nothing_ran=True)


def test_two_nodes_of_one_id(tmp_path, chakra_run, user_error):
    folder = write_graphs(tmp_path / "et", [[ETNode(0, "x", COMP, (), 1.0), ETNode(0, "y", COMP, (), 1.0)]] * 8)
    user_error(chakra_run(folder), "node id 0 = 'y'", "node ids unique", nothing_ran=True)


def test_an_export_path_that_is_no_folder(tmp_path, cli, user_error):
    user_error(cli("export", TOPO, "workloads/moe-layer.yaml", "--chakra", " "), "--chakra", "it is empty",
               nothing_ran=True)
    (tmp_path / "file").write_text("")
    user_error(cli("export", TOPO, "workloads/moe-layer.yaml", "--chakra", tmp_path / "file"),
               "a folder (this is a file)", nothing_ran=True)
