"""A simnode run as Chakra ET graphs, one per rank (``write_dir`` writes them).

``ep_graphs(plan, runs)``: a ``deepep`` run, each rank's dispatch then combine.
``step_graphs(step_run)``: a ``decode_step`` run, each rank's streams.

``layer_graphs(layer_run)`` reads a MoE layer run (``simnode.moe.layer.LayerRun``: every
rank's ``RankRecord.spans``, the DeepEP instances' plans) through its public fields and
turns each span into one node:

- a DeepEP kernel (``dispatch``, ``combine``, ``mb0.dispatch`` ..., the fused kernel's
  ``dispatch chunk j`` / ``combine chunk j``) is a ``COMM_COLL_NODE`` of type ``ALL_TO_ALL``
  whose ``comm_size`` is the payload bytes the rank sends and whose ``comm_peer_bytes`` holds
  them per destination rank (the variable all-to-all: the schema's collectives are uniform;
  docs/chakra.md); the fused kernel's exit barrier is a ``BARRIER``;
- everything else (the expert GEMMs, SwiGLU, the shared experts, epilogues, the fused
  prologue) is a ``COMP_NODE``.

Every node carries the time simnode computed for it (``duration_ns``; ``duration_micros``
rounded). Dependencies (``ctrl_deps``) are the schedule's: on each stream, the span that
ended last before this one started; on the rank's other streams, a span that ended at the
instant this one started (an event or a released lock handed over); and the data
dependencies of the overlap modes, which hold even where timing hid them: a micro-batch's
or a fused chunk's expert kernels wait for its tokens (``mbK.dispatch epilogue``,
``dispatch chunk j``), and its combine for its last expert kernel.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from simnode.chakra.etfile import COLL, COMP, ET_NAME, ETNode, write_rank
from simnode.errors import ConfigError
from simnode.moe.layer import Span

#: spans that end within this of another's start are a hand-over (float ns of one clock)
TOUCH_NS = 1e-6
_CHUNK = re.compile(r"^(dispatch|combine) chunk (\d+)$")
_PART = re.compile(r"^(mb\d+|chunk\d+)\.")


def _kernel_kind(name: str) -> str:
    return "dispatch" if name.endswith("dispatch") else "combine"


def _peer_bytes(lr, r: int) -> dict:
    """Span name -> bytes rank ``r`` sends to each rank, for every communication span."""
    out = {}
    for name, (sim, _) in lr.kernels.items():
        if name == "fused":
            S = lr.params.fused_chunks
            for kind in ("dispatch", "combine"):
                row = np.asarray(lr.plans[0].traffic(kind)[r], dtype=np.int64)
                for j in range(S):         # integer shares that sum to the row
                    out[f"{kind} chunk {j}"] = tuple(int(b) for b in row * (j + 1) // S - row * j // S)
        else:
            out[name] = tuple(int(b) for b in np.asarray(sim.plan.traffic(_kernel_kind(name))[r],
                                                         dtype=np.int64))
    return out


def _data_deps(spans: list) -> dict:
    """index -> indices it waits for by data (micro-batches and fused chunks)."""
    first, last, deliver = {}, {}, {}
    for i, sp in enumerate(spans):
        m = _PART.match(sp.name)
        if m and sp.stream != "comm":
            first.setdefault(m[1], i)
            last[m[1]] = i
        c = _CHUNK.match(sp.name)
        if c and c[1] == "dispatch":
            deliver[f"chunk{c[2]}"] = i
        elif sp.name.endswith(".dispatch epilogue"):
            deliver[sp.name.split(".")[0]] = i
    deps: dict = {}
    for part, i in first.items():
        if part in deliver:
            deps.setdefault(i, set()).add(deliver[part])
    for i, sp in enumerate(spans):
        c = _CHUNK.match(sp.name)
        part = f"chunk{c[2]}" if c and c[1] == "combine" else (
            sp.name.split(".")[0] if sp.name.endswith(".combine") else None)
        if part in last:
            deps.setdefault(i, set()).add(last[part])
    return deps


def rank_graph(spans: list, peer_bytes: dict) -> list[ETNode]:
    """One rank's spans (``stream``, ``name``, ``start_ns``, ``end_ns``) as ET nodes."""
    spans = sorted(spans, key=lambda s: (s.start_ns, s.end_ns, s.stream, s.name))
    data = _data_deps(spans)
    nodes = []
    for i, sp in enumerate(spans):
        deps = set(data.get(i, ()))
        same = [j for j in range(i) if spans[j].stream == sp.stream
                and spans[j].end_ns <= sp.start_ns + TOUCH_NS]
        if same:
            deps.add(max(same, key=lambda j: (spans[j].end_ns, j)))
        deps.update(j for j in range(i) if spans[j].stream != sp.stream
                    and abs(spans[j].end_ns - sp.start_ns) <= TOUCH_NS)
        dur = sp.end_ns - sp.start_ns
        if sp.name in peer_bytes:
            pb = peer_bytes[sp.name]
            node = ETNode(i, sp.name, COLL, tuple(sorted(deps)), dur, "ALL_TO_ALL", sum(pb), pb,
                          stream=sp.stream)
        elif sp.name == "exit barrier":
            node = ETNode(i, sp.name, COLL, tuple(sorted(deps)), dur, "BARRIER", stream=sp.stream)
        else:
            node = ETNode(i, sp.name, COMP, tuple(sorted(deps)), dur, stream=sp.stream)
        nodes.append(node)
    return nodes


def layer_graphs(lr) -> list[list[ETNode]]:
    """Every rank's graph of a MoE layer run (``simnode.moe.layer.LayerRun``)."""
    return [rank_graph(rec.spans, _peer_bytes(lr, r)) for r, rec in enumerate(lr.ranks)]


def ep_graphs(plan, runs: dict) -> list[list[ETNode]]:
    """Every rank's graph of an EP kernel run (kind ``deepep``: ``{kind: PhaseRun}`` of one
    ``TrafficPlan``): its kernels in order, each an ``ALL_TO_ALL`` with the rank's kernel
    time. The kind runs dispatch and combine as two simulations of their own; the graph
    puts combine after dispatch, as a layer runs them."""
    graphs = []
    for r in range(len(plan.pair)):
        spans, at = [], 0.0
        for kind, pr in runs.items():
            t = pr.ranks[r]
            spans.append(Span("comm", kind, at, at + t.end_ns - t.start_ns))
            at = spans[-1].end_ns
        peer = {k: tuple(int(b) for b in np.asarray(plan.traffic(k)[r], dtype=np.int64)) for k in runs}
        graphs.append(rank_graph(spans, peer))
    return graphs


def step_graphs(run) -> list[list[ETNode]]:
    """Every rank's graph of a decode step (``simnode.decode.step.StepRun``): each kernel a
    ``COMP_NODE`` from when its dependencies were met (its launch gap is its own), each MoE
    block's dispatch and combine an ``ALL_TO_ALL`` from when the EP group's barrier let it
    start (the replayer's collective waits for every rank), its expert kernels and SwiGLU
    compute nodes, host turns and metadata builds that take time compute nodes too. A node
    is named ``<segment>: <kernel>``; the streams are the step's (main, kv, indexer, shared,
    metadata), their fork / join edges the hand-overs at equal instants."""
    from simnode.decode.program import HOST, KERNEL, METADATA, MOE
    ops, segs = run.program.ops, run.program.segments
    graphs = []
    for g, members in enumerate(run.groups):
        for r in members:
            spans, peer = [], {}
            for i, op in enumerate(ops):
                name = f"{segs[op.segment].name}: {op.name}"
                if op.kind == KERNEL or (op.kind in (HOST, METADATA) and run.end[g, i] > run.start[g, i]):
                    spans.append(Span(op.stream, name, run.ready[g, i], run.end[g, i]))
                elif op.kind == MOE:
                    moe = run.moes[run.moe_index[i]]
                    for ph, (arrive, s, e) in zip(run.rank_phases(r, i), run.phases[(g, i)]):
                        pname = f"{segs[op.segment].name}: {ph.name}"
                        spans.append(Span(op.stream, pname, s if ph.collective else arrive, e))
                        if ph.collective and moe.peer_bytes:
                            peer[pname] = moe.peer_bytes[r][ph.name]
            graphs.append((r, rank_graph(spans, peer)))
    return [nodes for _, nodes in sorted(graphs, key=lambda x: x[0])]


def check_dir(folder, prefix: str, option: str = "--chakra") -> None:
    """Refuse, before a run, an output folder that holds another workload's ET files (the
    folder must stay one workload's, as the ``chakra`` kind reads it)."""
    out = Path(folder)
    if out.exists() and not out.is_dir():
        raise ConfigError(option, option.lstrip("-"), str(folder), "a folder (this is a file)")
    others = sorted({m["prefix"] for f in (out.iterdir() if out.is_dir() else ())
                     if (m := ET_NAME.match(f.name)) and m["prefix"] != prefix})
    if others:
        raise ConfigError(option, option.lstrip("-"), str(folder), f"a folder without other ET files "
                          f"(it holds {', '.join(o + '.<rank>.et' for o in others)}; the chakra kind "
                          f"reads one workload per folder)")


def write_dir(folder, prefix: str, graphs: list, attrs: dict) -> list[Path]:
    """Write ``<prefix>.<rank>.et`` per rank into ``folder`` (made if missing), removing the
    files of ranks beyond these that an earlier export of ``prefix`` left; ``attrs``: the
    GlobalMetadata's string attributes. Returns the paths written."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for f in out.iterdir():
        m = ET_NAME.match(f.name)
        if m and m["prefix"] == prefix and int(m["rank"]) >= len(graphs):
            f.unlink()
    paths = []
    for r, nodes in enumerate(graphs):
        p = out / f"{prefix}.{r}.et"
        write_rank(p, nodes, {**attrs, "rank": r, "num_ranks": len(graphs)})
        paths.append(p)
    return paths
