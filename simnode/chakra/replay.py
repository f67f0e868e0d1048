"""Chakra ET graphs run on a supernode: every rank's nodes on one clock, messages on the Clos.

``check_graphs(graphs, files)`` refuses what cannot run, naming the file and node: a
dependency on a node the rank does not have, a dependency circle, ranks whose collectives
differ (the k-th collective of every rank is one collective of all ranks, as ASTRA-sim
matches them), a ``comm_peer_bytes`` list that is not one entry per rank, a send or receive
whose peer is not a rank or that has no partner. ``Replay(topology, graphs, comm_time).run()
-> ReplayRun``. A node starts when every node it depends on has ended (nodes without a
dependency between them run at once: the export writes a stream as a chain):

- a compute node (and a metadata node) takes its recorded time on its rank;
- a collective starts when every rank has reached it and ends, on every rank, when its last
  step has landed. Its messages are trains on the supernode's network and each rank's URMA
  engine and HBM (``simnode.ep.deepep.build_fabric``, the EP family's fabric): one doorbell
  per step, then one train per (source, destination) of the step, sharing links max-min
  fairly. Decompositions (N ranks, S = ``comm_size``):
  ``ALL_TO_ALL``: one step, ``comm_peer_bytes[d]`` to each rank d if given, else S / N to
  each other rank (the rank's own share stays); ``ALL_REDUCE``: a ring in rank order (on a
  Clos, neighbours in rank order share a leaf), 2 (N - 1) steps of S / N to the next rank
  (reduce-scatter, then all-gather; the reduction's arithmetic is not timed);
  ``REDUCE_SCATTER`` and ``ALL_GATHER``: the N - 1 steps of that ring; ``BARRIER``: every
  rank's zero-byte message to the next rank;
- a send is a train to its ``comm_dst`` and ends when it has landed; a receive ends when the
  matching send (same source, destination and ``comm_tag``, in order) has landed.

``comm_time = "recorded"``: every communication node takes its recorded time on its rank
instead (0 if the file records none), as a compute node does: a simnode export replayed as
it ran, waits for slower ranks included.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from simnode.chakra.etfile import COLL, COMP, META, RECV, SEND
from simnode.ep.deepep import build_fabric
from simnode.errors import ConfigError

COMM_TIMES = ("network", "recorded")


@dataclass
class ReplaySpan:
    name: str
    kind: str                       #: "compute" or "comm"
    start_ns: float
    end_ns: float


@dataclass
class Collective:
    """One collective of all ranks: its type, bytes per rank, and when it ran."""
    name: str
    comm_type: str
    size_bytes: float               #: payload bytes sent by all ranks
    start_ns: float = 0.0
    end_ns: float = 0.0


@dataclass
class ReplayRun:
    spans: list                     #: per rank: [ReplaySpan]
    end_ns: list                    #: per rank: when its last node ended
    collectives: list = field(default_factory=list)
    net: object = None              #: the FlowNetwork the messages ran on

    @property
    def step_ns(self) -> float:
        return max(self.end_ns, default=0.0)


def check_graphs(graphs: list, files: list) -> None:
    """Refuse graphs that cannot run (module docstring); ``files`` name each rank's file."""
    R = len(graphs)
    sends, recvs = defaultdict(int), defaultdict(int)
    for r, nodes in enumerate(graphs):
        ids = {}
        for n in nodes:
            if n.id in ids:
                raise ConfigError(str(files[r]), f"node id {n.id}", n.name, "node ids unique in a file")
            ids[n.id] = n
        for n in nodes:
            bad = [d for d in n.deps if d not in ids]
            if bad:
                raise ConfigError(str(files[r]), f"node {n.id} ({n.name!r}).deps", bad[0],
                                  "the id of a node in the same file")
            if n.peer_bytes and len(n.peer_bytes) != R:
                raise ConfigError(str(files[r]), f"node {n.id} ({n.name!r}).attr.comm_peer_bytes",
                                  f"{len(n.peer_bytes)} entries", f"one entry per rank ({R} ranks)")
            if n.kind in (SEND, RECV):
                if not 0 <= n.peer < R or n.peer == r:
                    raise ConfigError(str(files[r]), f"node {n.id} ({n.name!r}).peer", n.peer,
                                      f"another rank in 0..{R - 1}")
                key = (r, n.peer, n.tag) if n.kind == SEND else (n.peer, r, n.tag)
                (sends if n.kind == SEND else recvs)[key] += 1
        _order(nodes, files[r])
    colls = [[n for n in _order(nodes, files[r]) if n.kind == COLL] for r, nodes in enumerate(graphs)]
    for r in range(1, R):
        a, b = [c.comm_type for c in colls[0]], [c.comm_type for c in colls[r]]
        if a != b:
            k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            raise ConfigError(str(files[r]), f"collective {k}", b[k] if k < len(b) else "(none)",
                              f"the same collectives in the same order on every rank (rank 0 has "
                              f"{a[k] if k < len(a) else '(none)'} there: {len(a)} collectives, "
                              f"this rank {len(b)})")
    for key in sorted(set(sends) | set(recvs)):
        if sends[key] != recvs[key]:
            s, d, tag = key
            raise ConfigError(str(files[d]), f"receives from rank {s} with comm_tag {tag}", recvs[key],
                              f"as many as rank {s} sends there ({sends[key]})")


def _order(nodes: list, file) -> list:
    """The nodes in an order that respects their dependencies (Kahn); a circle is an error."""
    by_id = {n.id: n for n in nodes}
    waits = {n.id: len(set(n.deps)) for n in nodes}
    users = defaultdict(list)
    for n in nodes:
        for d in set(n.deps):
            users[d].append(n.id)
    ready = deque(n.id for n in nodes if waits[n.id] == 0)
    out = []
    while ready:
        i = ready.popleft()
        out.append(by_id[i])
        for u in users[i]:
            waits[u] -= 1
            if waits[u] == 0:
                ready.append(u)
    if len(out) != len(nodes):
        stuck = next(n for n in nodes if waits[n.id] > 0)
        raise ConfigError(str(file), f"node {stuck.id} ({stuck.name!r}).deps", list(stuck.deps),
                          "dependencies without a circle (this node waits, through them, for itself)")
    return out


def ring_steps(comm_type: str, N: int, size_bytes: float) -> list:
    """A ring collective's steps: per step, (sources, destinations, bytes per message)."""
    src = np.arange(N)
    dst = (src + 1) % N
    steps = {"ALL_REDUCE": 2 * (N - 1), "REDUCE_SCATTER": N - 1, "ALL_GATHER": N - 1}.get(comm_type, 1)
    per = 0.0 if comm_type == "BARRIER" else size_bytes / N
    return [(src, dst, np.full(N, per))] * steps


class Replay:
    """Graphs run on ``topology``'s supernode; see the module docstring."""

    def __init__(self, topology, graphs: list, comm_time: str = "network", batch_window_ns: float = 0.0):
        self.topo, self.graphs, self.comm_time = topology, graphs, comm_time
        self.batch_window_ns = batch_window_ns

    def _recorded(self, n) -> bool:
        return n.kind in (COMP, META) or self.comm_time == "recorded"

    def _node(self, r: int, n, done: dict):
        env = self.env
        deps = [done[(r, d)] for d in n.deps]
        if deps:
            yield env.all_of(deps)
        s = env.now
        if self._recorded(n):
            yield env.timeout(n.duration_ns)
        elif n.kind == COLL:
            k = self.coll_index[(r, n.id)]
            self.arrived[k] += 1
            if self.arrived[k] == len(self.graphs):
                env.process(self._collective(k, n))
            yield self.coll_done[k]
        elif n.kind == SEND:
            key = (r, n.peer, n.tag)
            i = self.sent[key]
            self.sent[key] += 1
            yield from self._trains(np.array([r]), np.array([n.peer]), np.array([float(n.comm_size_bytes)]))
            self._landed(key, i).succeed()
        else:                                               # RECV
            key = (n.peer, r, n.tag)
            i = self.received[key]
            self.received[key] += 1
            yield self._landed(key, i)
        kind = "compute" if n.kind in (COMP, META) else "comm"
        self.spans[r].append(ReplaySpan(n.name, kind, s, env.now))
        self.end_ns[r] = max(self.end_ns[r], env.now)
        done[(r, n.id)].succeed()

    def _landed(self, key, i: int):
        ev = self.landings.get((key, i))
        if ev is None:
            ev = self.landings[(key, i)] = self.env.event()
        return ev

    def _trains(self, src, dst, payload):
        """One step: a doorbell, then one train per (source, destination) of payload, until
        all have landed; a step of zero bytes (a barrier) is a flag over the farthest path."""
        yield self.env.timeout(self.topo.supernode.doorbell_ns)
        keep = (src != dst) & (payload > 0)
        if not keep.any():
            yield self.env.timeout(self.fab.max_latency_ns)
            return
        src, dst, payload = src[keep], dst[keep], payload[keep]
        peers = np.bincount(src, minlength=len(self.graphs))[src]
        yield self.fab.ends.send_many(src, dst, payload, self.topo.supernode.wqebb_bytes,
                                      np.ones(len(src)), peers)

    def _collective(self, k: int, n):
        env, N = self.env, len(self.graphs)
        c = self.collectives[k]
        c.start_ns = env.now
        if n.comm_type == "ALL_TO_ALL":
            rows = [self.first_of[k][r] for r in range(N)]
            mat = np.array([m.peer_bytes if m.peer_bytes else
                            [0.0 if d == r else m.comm_size_bytes / N for d in range(N)]
                            for r, m in enumerate(rows)], dtype=float)
            np.fill_diagonal(mat, 0.0)
            src, dst = np.nonzero(mat > 0)
            steps = [(src, dst, mat[src, dst])] if len(src) else [
                (np.arange(N), (np.arange(N) + 1) % N, np.zeros(N))]
        else:
            steps = ring_steps(n.comm_type, N, float(n.comm_size_bytes))
        for src, dst, payload in steps:
            c.size_bytes += float(payload[src != dst].sum())
            yield from self._trains(src, dst, payload)
        c.end_ns = env.now
        self.coll_done[k].succeed()

    def run(self) -> ReplayRun:
        N = len(self.graphs)
        chip = self.topo.chip
        self.fab = build_fabric(self.topo, chip.num_ai_cores * chip.aiv_per_core, self.batch_window_ns)
        self.env = env = self.fab.env
        self.spans = [[] for _ in range(N)]
        self.end_ns = [0.0] * N
        self.sent, self.received, self.landings = defaultdict(int), defaultdict(int), {}
        self.coll_index, self.first_of = {}, defaultdict(dict)
        for r, nodes in enumerate(self.graphs):
            colls = [n for n in _order(nodes, r) if n.kind == COLL]
            for k, n in enumerate(colls):
                self.coll_index[(r, n.id)] = k
                self.first_of[k][r] = n
        K = len(self.first_of)
        self.collectives = [Collective(self.first_of[k][0].name, self.first_of[k][0].comm_type, 0.0)
                            for k in range(K)]
        self.arrived = [0] * K
        self.coll_done = [env.event() for _ in range(K)]
        done = {(r, n.id): env.event() for r, nodes in enumerate(self.graphs) for n in nodes}
        for r, nodes in enumerate(self.graphs):
            for n in nodes:
                env.process(self._node(r, n, done))
        env.run()
        stuck = [key for key, ev in done.items() if not ev.triggered]
        if stuck:
            raise RuntimeError(f"chakra replay: {len(stuck)} nodes never ran (first: rank {stuck[0][0]}, "
                               f"node {stuck[0][1]})")
        for r in range(N):
            self.spans[r].sort(key=lambda s: (s.start_ns, s.end_ns, s.name))
        ran = [c for c in self.collectives if c.end_ns > 0 or c.start_ns > 0]
        return ReplayRun(self.spans, self.end_ns, ran, self.fab.net)
