"""One rank's Chakra ET file <-> plain ``ETNode`` records, through mlc-chakra.

mlc-chakra owns the format: the protobuf schema (``chakra.schema.protobuf.et_def_pb2``:
``GlobalMetadata``, ``Node``, ``AttributeProto``, the node types and collective types) and
the length-prefixed framing (``chakra.src.third_party.utils.protolib``: ``encodeMessage``,
``decodeMessage``, ``openFileRd``, which reads gzip transparently). Nothing of either is
copied here; this module maps them to ``ETNode``. The attributes read are the ones
ASTRA-sim's feeder reads (``comm_type``, ``comm_size``, ``comm_src``, ``comm_dst``,
``comm_tag``) and simnode's own two: ``duration_ns`` (the exact recorded time; the schema's
``duration_micros`` is whole microseconds) and ``comm_peer_bytes`` (a variable all-to-all's
bytes to each destination rank, in rank order; docs/chakra.md).

``rank_files(folder, source)``: the ``<prefix>.<rank>.et`` files of a folder by rank
(ConfigError on none, on a missing rank, on two prefixes). ``read_rank(path)`` and
``write_rank(path, nodes, attrs)``. Without mlc-chakra installed, either is a ConfigError
saying how to install it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from simnode import units
from simnode.errors import ConfigError

COMP, COLL, SEND, RECV, META = "comp", "coll", "send", "recv", "metadata"
#: the schema's node types simnode runs, by their enum name
NODE_KINDS = {"COMP_NODE": COMP, "COMM_COLL_NODE": COLL, "COMM_SEND_NODE": SEND,
              "COMM_RECV_NODE": RECV, "METADATA_NODE": META}
#: the collectives the replay decomposes (``simnode.chakra.replay``)
COLLECTIVES = ("ALL_TO_ALL", "ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "BARRIER")
#: the version written into each file's GlobalMetadata (mlc-chakra's generator writes "1.0.0")
ET_VERSION = "1.0.0"
INSTALL = "pip install 'simnode[chakra]' (the mlc-chakra package)"
#: a rank's file name: <prefix>.<rank>.et
ET_NAME = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et$")


@dataclass(frozen=True)
class ETNode:
    """One node of a rank's graph, as simnode runs it."""
    id: int
    name: str
    kind: str                         #: COMP, COLL, SEND, RECV or META
    deps: tuple = ()                  #: ids of this rank's nodes it waits for (ctrl and data)
    duration_ns: float = 0.0          #: the recorded time (0: none recorded)
    comm_type: str = ""               #: a collective's type: "ALL_TO_ALL", "ALL_REDUCE", ...
    comm_size_bytes: int = 0          #: a collective's bytes per rank; a send's or recv's bytes
    peer_bytes: tuple = ()            #: a variable all-to-all: bytes to each destination rank
    peer: int = -1                    #: a send's destination rank, a recv's source rank
    tag: int = 0                      #: matches a send with its recv
    stream: str = ""                  #: simnode's stream the node ran on (written, not read)


def _schema():
    try:
        from chakra.schema.protobuf import et_def_pb2 as pb
        from chakra.src.third_party.utils import protolib
    except ImportError:
        raise ConfigError("chakra", "mlc-chakra", "not installed",
                          f"the mlc-chakra package to read or write Chakra ET files: {INSTALL}") from None
    return pb, protolib


def rank_files(folder, source: str = "workload", key: str = "et_dir") -> list[Path]:
    """The folder's ``<prefix>.<rank>.et`` files in rank order (ranks 0..N-1, all present)."""
    path = Path(folder)
    if not path.is_dir():
        raise ConfigError(source, key, str(folder), "a folder of Chakra ET files (<name>.<rank>.et)")
    found: dict[str, dict[int, Path]] = {}
    for f in sorted(path.iterdir()):
        m = ET_NAME.match(f.name)
        if m:
            found.setdefault(m["prefix"], {})[int(m["rank"])] = f
    if not found:
        raise ConfigError(source, key, str(folder), "a folder holding Chakra ET files named "
                          "<name>.<rank>.et (as ASTRA-sim reads them); it holds none")
    if len(found) > 1:
        raise ConfigError(source, key, str(folder), "one workload's files (one <name> prefix); it "
                          f"holds {len(found)}: {', '.join(sorted(found))}")
    (prefix, by_rank), = found.items()
    missing = [r for r in range(max(by_rank) + 1) if r not in by_rank]
    if missing:
        which = f"ranks {_ranks_text(missing)} are" if len(missing) > 1 else f"rank {missing[0]} is"
        raise ConfigError(source, key, str(folder), f"one file per rank 0..{max(by_rank)}; {which} "
                          f"missing ({prefix}.<rank>.et)")
    return [by_rank[r] for r in range(len(by_rank))]


def _ranks_text(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")


def _attr_value(a):
    which = a.WhichOneof("value")
    if which is None:
        return None
    v = getattr(a, which)
    return list(v.values) if which.endswith("_list") else v


def _unknown(message) -> bool:
    """Whether a decoded record holds fields the schema does not know (bytes that are not
    an ET often decode as a record of unknown fields)."""
    from google.protobuf.unknown_fields import UnknownFieldSet
    return len(UnknownFieldSet(message)) > 0


def read_rank(path, source: str = "workload") -> list[ETNode]:
    """The nodes of one rank's ET file, in file order."""
    pb, protolib = _schema()
    from google.protobuf.message import DecodeError
    where = str(path)
    meta, nodes = pb.GlobalMetadata(), []
    try:
        with protolib.openFileRd(where) as f:
            if not protolib.decodeMessage(f, meta) or not meta.version or _unknown(meta):
                raise DecodeError("no GlobalMetadata record with a version first")
            while True:
                node = pb.Node()
                if not protolib.decodeMessage(f, node):
                    break
                if _unknown(node):
                    raise DecodeError(f"record {len(nodes) + 1} is not a Node")
                nodes.append(node)
    except (DecodeError, OSError, EOFError, ValueError) as exc:
        raise ConfigError(where, "(file)", Path(where).name, "a Chakra ET file (length-prefixed "
                          f"protobuf records: GlobalMetadata, then Node): {exc}") from None
    type_names = {v: k for k, v in pb.NodeType.items()}
    comm_names = {v: k for k, v in pb.CollectiveCommType.items()}
    out = []
    for i, n in enumerate(nodes):
        key = f"node[{i}] (id {n.id}, {n.name!r})"
        tname = type_names.get(n.type, str(n.type))
        if tname not in NODE_KINDS:
            raise ConfigError(where, f"{key}.type", tname, "a node type simnode runs: "
                              + ", ".join(NODE_KINDS))
        attrs = {a.name: _attr_value(a) for a in n.attr}
        kind = NODE_KINDS[tname]
        comm_type = ""
        if kind == COLL:
            code = attrs.get("comm_type")
            comm_type = comm_names.get(code, str(code))
            if comm_type not in COLLECTIVES:
                raise ConfigError(where, f"{key}.attr.comm_type", comm_type,
                                  "a collective simnode decomposes: " + ", ".join(COLLECTIVES))
        dur = attrs.get("duration_ns")
        dur_ns = float(dur) if dur is not None else n.duration_micros * units.NS_PER_US
        peer = attrs.get("comm_dst" if kind == SEND else "comm_src", -1)
        if kind in (SEND, RECV) and (peer is None or peer < 0):
            raise ConfigError(where, f"{key}.attr.{'comm_dst' if kind == SEND else 'comm_src'}",
                              peer, "the peer rank of a point-to-point node")
        size = attrs.get("comm_size", attrs.get("tensor_size", 0)) or 0
        deps = tuple(dict.fromkeys([*n.ctrl_deps, *n.data_deps]))       # both kinds, each once
        per_peer = tuple(int(b) for b in attrs.get("comm_peer_bytes") or ())
        out.append(ETNode(int(n.id), n.name, kind, deps, dur_ns, comm_type, int(size), per_peer,
                          int(peer), int(attrs.get("comm_tag", 0) or 0)))
    return out


def write_rank(path, nodes: list[ETNode], attrs: dict | None = None) -> None:
    """Write one rank's nodes (``attrs``: string attributes of the file's GlobalMetadata)."""
    pb, protolib = _schema()
    kinds = {v: k for k, v in NODE_KINDS.items()}
    meta = pb.GlobalMetadata(version=ET_VERSION)
    meta.attr.extend(pb.AttributeProto(name=k, string_val=str(v)) for k, v in (attrs or {}).items())
    with open(path, "wb") as f:
        protolib.encodeMessage(f, meta)
        for n in nodes:
            node = pb.Node(id=n.id, name=n.name, type=pb.NodeType.Value(kinds[n.kind]),
                           duration_micros=int(round(n.duration_ns / units.NS_PER_US)))
            node.ctrl_deps.extend(n.deps)
            a = [pb.AttributeProto(name="is_cpu_op", bool_val=False),
                 pb.AttributeProto(name="duration_ns", double_val=float(n.duration_ns))]
            if n.stream:
                a.append(pb.AttributeProto(name="stream", string_val=n.stream))
            if n.kind == COLL:
                a.append(pb.AttributeProto(name="comm_type",
                                           int64_val=pb.CollectiveCommType.Value(n.comm_type)))
                a.append(pb.AttributeProto(name="comm_size", int64_val=int(n.comm_size_bytes)))
            if n.peer_bytes:
                a.append(pb.AttributeProto(name="comm_peer_bytes",
                                           int64_list=pb.Int64List(values=[int(b) for b in n.peer_bytes])))
            if n.kind in (SEND, RECV):
                a += [pb.AttributeProto(name="comm_dst" if n.kind == SEND else "comm_src", int64_val=n.peer),
                      pb.AttributeProto(name="comm_size", int64_val=int(n.comm_size_bytes)),
                      pb.AttributeProto(name="comm_tag", int64_val=n.tag)]
            node.attr.extend(a)
            protolib.encodeMessage(f, node)
