"""Workload kind ``chakra``: a folder of Chakra execution traces run on a supernode.

The folder holds one ``<name>.<rank>.et`` file per rank (MLCommons Chakra, as ASTRA-sim
reads them; simnode writes them with ``simnode export --chakra``). Each rank's graph runs
on the topology's supernode (``simnode.chakra.replay``): compute nodes for their recorded
time, collectives and sends as message trains on the Clos, every rank's URMA engine and HBM
(all-to-all with per-peer bytes, all-reduce as a ring in rank order: docs/chakra.md).
``comm_time: recorded`` gives the communication nodes their recorded times instead (a
simnode export run as it ran). The files' rank count must be the run's (``num_ranks``, 0 = the
topology's). Needs the mlc-chakra package (``pip install 'simnode[chakra]'``).

Result: ``step_ns`` (the last rank's end, the makespan), per rank its compute and
communication busy time and its exposed communication (communication while none of its
compute ran), one kernel record per collective type (its mean time, bytes, GB/s per rank),
the hottest links, and link utilization series.
"""

from __future__ import annotations

import numpy as np

from simnode.chakra.etfile import rank_files, read_rank
from simnode.chakra.replay import COMM_TIMES, Replay, check_graphs
from simnode.ep import fields
from simnode.ep.size import with_num_ranks
from simnode.errors import ConfigError
from simnode.moe.layer import union_ns
from simnode.report.result import KernelRecord, Result, fig
from simnode.workloads.registry import Field, WorkloadKind
from simnode.workloads.supernode import link_series, link_util

FIELDS = (
    Field("et_dir", "str", doc="folder of Chakra ET files, <name>.<rank>.et (relative to the "
          "workload file)"),
    fields.NUM_RANKS,
    Field("comm_time", "str", "network", "communication nodes: on the network, or for the time "
          "recorded in the file (a simnode export replayed as it ran)", COMM_TIMES),
    fields.BATCH_WINDOW_NS,
)


def load(topology, params: dict, source: str = "workload"):
    """(topology at the run's rank count, graphs, files), checked (``replay.check_graphs``)."""
    files = rank_files(params["et_dir"], source, "et_dir")
    topology = with_num_ranks(topology, params["num_ranks"], "chakra", source)
    R = topology.supernode.num_ranks
    if len(files) != R:
        where, key = (source, "num_ranks") if params["num_ranks"] else (topology.source, "supernode.num_ranks")
        raise ConfigError(where, key, R, f"the ranks of the Chakra files in {params['et_dir']} ({len(files)} "
                          f"files, one per rank): set num_ranks: {len(files)} (--set num_ranks={len(files)}) "
                          f"to run them on {len(files)} ranks of this topology")
    graphs = [read_rank(f, source) for f in files]
    check_graphs(graphs, files)
    return topology, graphs, files


def check(topology, params: dict, source: str = "workload"):
    return load(topology, params, source)[0]


def run(topology, params: dict, options=None, name: str = "chakra"):
    topology, graphs, files = load(topology, params)
    out = Replay(topology, graphs, params["comm_time"], params["batch_window_ns"]).run()
    if options is not None and getattr(options, "trace_path", None):
        _trace(options, out)
    return _result(name, topology, params, out, files)


def _trace(options, out) -> None:
    from simnode.engine.trace import Tracer
    tr = Tracer(options.trace_path, options.trace_scopes or None)
    try:
        for r, spans in enumerate(out.spans):
            pid = tr.process(f"rank{r:03d}")
            tids = {k: tr.thread(pid, f"rank{r:03d}.{k}") for k in ("compute", "comm")}
            for sp in spans:
                if tids[sp.kind] is not None:
                    tr.span(pid, tids[sp.kind], sp.name, sp.start_ns, sp.end_ns - sp.start_ns)
    finally:
        tr.close()


def per_rank(out) -> list[dict]:
    """Each rank's compute and communication busy time and exposed communication (ns)."""
    rows = []
    for r, spans in enumerate(out.spans):
        comp = [(s.start_ns, s.end_ns) for s in spans if s.kind == "compute"]
        comm = [(s.start_ns, s.end_ns) for s in spans if s.kind == "comm"]
        both = union_ns(comp + comm)
        rows.append({"rank": r, "compute_ns": union_ns(comp), "comm_ns": union_ns(comm),
                     "exposed_comm_ns": both - union_ns(comp), "end_ns": out.end_ns[r]})
    return rows


def _result(name: str, topology, params: dict, out, files) -> Result:
    step = out.step_ns
    rows = per_rank(out)
    slow = max(range(len(rows)), key=lambda r: (rows[r]["end_ns"], -r))
    hottest = out.net.hottest_links(5)
    kernels = []
    for ctype in sorted({c.comm_type for c in out.collectives}):
        cs = [c for c in out.collectives if c.comm_type == ctype]
        t = np.array([c.end_ns - c.start_ns for c in cs])
        size = np.array([c.size_bytes for c in cs])
        R = len(rows)
        kernels.append(KernelRecord(ctype.lower(), float(t.mean()), figures=(
            fig("count", len(cs), "collectives", "how many ran on the network", digits=0),
            fig("bytes", float(size.sum()), "B", "payload sent by all ranks, all of them", digits=0),
            fig("GBps", float(size.sum() / R / t.sum()) if t.sum() > 0 else 0.0, "GB/s",
                "payload per rank / time", headline=True),
            fig("max_ns", float(t.max()), doc="the longest one"))))
    r = rows[slow]
    figures = (
        fig("num_ranks", len(rows), "ranks", "ranks (one Chakra file each)"),
        fig("et_files", str(files[0].parent / files[0].name.rsplit(".", 2)[0]) + ".<rank>.et", "",
            "the files run"),
        fig("comm_time", params["comm_time"], "", "communication on the network or as recorded"),
        fig("step_ns", step, doc="the last rank's end"),
        fig("compute_ns", r["compute_ns"], doc="the slowest rank's compute busy time"),
        fig("comm_ns", r["comm_ns"], doc="the slowest rank's communication busy time"),
        fig("exposed_comm_ns", r["exposed_comm_ns"], doc="the slowest rank's communication while none "
            "of its compute ran", headline=True),
        fig("slowest_rank", slow, "rank", "the rank that ends last", digits=0),
        fig("hottest_links", [{"link": n, "bytes": b, "util_frac": round(u, 4)} for n, b, u in hottest], "",
            "the busiest links: bytes and busy fraction of the run"),
        fig("per_rank", [{k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()}
                         for row in rows], "", "every rank's compute, communication and exposed communication"),
    )
    label = f"link {hottest[0][0]}" if hottest and hottest[0][2] > 0 else f"rank {slow}'s graph"
    util = hottest[0][2] if hottest and hottest[0][2] > 0 else None
    return Result(name, "chakra", step, label, tuple(kernels), figures,
                  tuple(link_series("chakra", link_util(out.net))), bottleneck_util_frac=util)


KIND = WorkloadKind("chakra", FIELDS, run, "a folder of Chakra execution traces (one per rank) on a "
                    "supernode", needs_supernode=True, check=check, path_fields=("et_dir",))
