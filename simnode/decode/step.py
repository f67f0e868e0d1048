"""One decode step of every rank on one clock: streams as processes, kernels as tasks.

``run_step(chip, program, profiles, moes, gaps) -> StepRun`` runs a ``Program``
(``simnode.decode.program``) on every rank at once. Each rank has its HBM, its AI cores'
cubes and its AIVs as resources of one sharing engine (``simnode.engine.share.Share``):
capacities the chip's HBM bandwidth, its AI cores, its AIVs. Each of a rank's streams is a
SimPy process that runs its ops in order; an op waits for the ops of other streams it
depends on (``Op.after``), then for its launch gap, then runs:

- a kernel as one task of its time alone (``timing.Profile.ns``) at a pace of at most 1
  (work-ns per ns) that holds ``aic`` cubes, ``aiv`` AIVs and its HBM bytes spread evenly
  over that time. Alone it takes exactly its time; beside a kernel of another stream, the
  engine shares the cores and the HBM max-min fairly, so two kernels that together want
  more cores than the chip has both slow, and two that fit beside each other (a small
  GEMM on 4 cores and a vector kernel) overlap for free: overlap is an outcome;
- a MoE block as its phases (``moe.MoePhase``) from the MoE run of its layer (``moes``:
  op index -> ``moe.MoeRun``; hash-routed layers route otherwise than the others): a
  collective phase (dispatch, combine)
  waits at a barrier until every rank of the EP group has arrived, then runs as a task; a
  compute phase runs after its launch gap;
- a host or metadata op as a wait of its gap.

Ranks whose MoE blocks are the same run the same program on the same resources and reach
every barrier together, so one process per stream serves the group (``StepRun.groups``).
Under balanced routing the low-latency kernels still differ by the order in which a rank's
peers' writes land (dispatch and the first GEMM trade ~1%, combine's tail differs by up to
~4%), so ranks whose every phase lies within ``GROUP_TOL`` of a group's first rank join it,
and a group replays each phase at its slowest member's time (``StepRun.group_phases``): never faster than any member, and
``GROUP_TOL = 0`` is the exact form (tests/decode hold the two within 0.1% of the step).

``StepRun`` holds, per group and op, when its stream reached it (``reach``), when its
dependencies were met (``ready``), when its work began (``start``: after the launch gap)
and ended (``end``); per group, MoE op and phase, (arrival, start, end).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from simnode.decode.program import HOST, KERNEL, METADATA, MOE, Gaps, Program
from simnode.engine.share import Share


#: a rank joins a group when each of its MoE phases is within this share of the group's first
#: rank's (module docstring); 0: only ranks with the same phases share a group
GROUP_TOL = 0.05

#: groups whose ends lie within this share of the step end with it (``slowest_group``): a
#: collective's tail (one row's flight, a few us) against a step of milliseconds
END_TIE = 0.005


@dataclass
class StepRun:
    """What the step did (module docstring)."""
    program: Program
    groups: tuple                  #: per group: the ranks it stands for
    reach: np.ndarray              #: [group, op] ns
    ready: np.ndarray
    start: np.ndarray
    end: np.ndarray
    phases: dict                   #: (group, op index) -> [(arrival, start, end) per phase]
    replayed: dict                 #: (group, MoE run index) -> the MoePhase tuple it replays
    moe_index: dict                #: MoE op index -> index into ``moes``
    profiles: dict                 #: op index -> timing.Profile of each kernel op
    moes: tuple                    #: the distinct moe.MoeRun replayed, the most replayed first
    hbm_bytes: np.ndarray          #: [group] HBM bytes its kernels moved

    @property
    def moe(self):
        """The MoE run most layers replay (V4: the gate-routed layers, not the hash-routed)."""
        return self.moes[0]

    def phases_of(self, g: int, i: int) -> tuple:
        """The MoePhase tuple group ``g`` replays for MoE op ``i`` (module docstring)."""
        return self.replayed[(g, self.moe_index[i])]

    def moe_of(self) -> dict:
        """MoE op index -> its MoeRun (what ``run_step`` was given)."""
        return {i: self.moes[j] for i, j in self.moe_index.items()}

    def rank_phases(self, r: int, i: int) -> tuple:
        """Rank ``r``'s own MoePhase tuple for MoE op ``i``."""
        return self.moes[self.moe_index[i]].phases[r]

    def group_end(self, g: int) -> float:
        return float(self.end[g].max())

    @property
    def step_ns(self) -> float:
        return float(self.end.max())

    def barrier_wait_ns(self, g: int) -> float:
        """Time group ``g`` waited at its collectives' barriers for other ranks."""
        return sum(s - a for (gg, i), recs in self.phases.items() if gg == g
                   for ph, (a, s, _) in zip(self.phases_of(g, i), recs) if ph.collective)

    def slowest_group(self) -> int:
        """The straggler the others wait for: among the groups that end with the step (within
        ``END_TIE`` of it: ranks released by one barrier finish alike, up to the tail of the
        last collective, whose rows the latest arrival sends last), the one that waited least."""
        ends = [self.group_end(g) for g in range(len(self.groups))]
        last = max(ends)
        tied = [g for g, e in enumerate(ends) if e >= last - END_TIE * last]
        return min(tied, key=lambda g: (round(self.barrier_wait_ns(g), 3), g))


def rank_groups(moes, num_ranks: int, tol: float = GROUP_TOL) -> tuple:
    """Ranks whose MoE blocks (in every run of ``moes``) agree within ``tol`` (module
    docstring), in order of their first rank; a rank joins the first group it agrees with."""
    out: list = []                          # (the first rank's signature, members)
    for r in range(num_ranks):
        sig = tuple(x for moe in moes for x in moe.signature(r))
        for first, members in out:
            if len(sig) == len(first) and all(
                    a[0] == b[0] and a[2:] == b[2:] and abs(a[1] - b[1]) <= tol * max(a[1], b[1])
                    for a, b in zip(sig, first)):
                members.append(r)
                break
        else:
            out.append((sig, [r]))
    return tuple(tuple(members) for _, members in out)


def group_phases(moes, groups: tuple) -> dict:
    """(group, MoE run index) -> each MoE phase at the group's slowest member's time."""
    from dataclasses import replace
    out = {}
    for g, members in enumerate(groups):
        for j, moe in enumerate(moes):
            per = [moe.phases[r] for r in members]
            out[(g, j)] = tuple(replace(ph, ns=max(p[k].ns for p in per)) for k, ph in enumerate(per[0]))
    return out


def run_step(chip, program: Program, profiles: dict, moes: dict, gaps: Gaps, tol: float = GROUP_TOL) -> StepRun:
    """Run ``program`` on every rank (module docstring); ``profiles``: op index -> Profile of
    each kernel op (every rank's attention-side work is the same); ``moes``: MoE op index ->
    its layer's MoeRun; ``tol``: ``GROUP_TOL``."""
    ops = program.ops
    runs: list = []                                     # distinct runs, the most replayed first
    for i in sorted(moes):
        if not any(moes[i] is x for x in runs):
            runs.append(moes[i])
    runs.sort(key=lambda x: -sum(1 for v in moes.values() if v is x))
    moe_index = {i: next(j for j, x in enumerate(runs) if x is moes[i]) for i in moes}
    R = len(runs[0].phases) if runs else 1              # a program without MoE: one rank
    groups = rank_groups(runs, R, tol)
    replayed = group_phases(runs, groups)
    G, N = len(groups), len(ops)
    env = simpy.Environment()
    share = Share(env)
    aivs = chip.num_ai_cores * chip.aiv_per_core
    res = [share.add_resources([f"g{g}.hbm", f"g{g}.aic", f"g{g}.aiv"],
                               [chip.memory.hbm_bandwidth_GBps, chip.num_ai_cores, aivs]) for g in range(G)]
    reach, ready, start, end = (np.zeros((G, N)) for _ in range(4))
    waited_on = {a for op in ops for a in op.after}
    done = [{i: env.event() for i in waited_on} for _ in range(G)]
    barriers: dict = {}
    phases: dict = {}

    def task(g: int, ns: float, hbm_bytes: float, aic: int, aiv: int):
        pairs = [(r, w) for r, w in zip(res[g], (hbm_bytes / ns if ns else 0.0, aic, aiv)) if w > 0]
        if not pairs:
            return env.timeout(ns)
        return share.start(ns, tuple(r for r, _ in pairs), tuple(float(w) for _, w in pairs), cap=1.0)

    def barrier(key, g: int):
        b = barriers.get(key)
        if b is None:
            b = barriers[key] = [0, env.event()]
        b[0] += len(groups[g])
        if b[0] == R:
            b[1].succeed()
        return b[1]

    def moe_block(g: int, i: int):
        recs = []
        for k, ph in enumerate(replayed[(g, moe_index[i])]):
            arrive = env.now
            if ph.collective:
                yield barrier((i, k), g)
            elif gaps.launch_gap_ns:
                yield env.timeout(gaps.launch_gap_ns)
            s = env.now
            if ph.ns > 0:
                yield task(g, ph.ns, ph.hbm_bytes, ph.aic, ph.aiv)
            recs.append((arrive, s, env.now))
        phases[(g, i)] = recs

    def stream(g: int, idxs: tuple):
        for i in idxs:
            op = ops[i]
            reach[g, i] = env.now
            for a in op.after:
                yield done[g][a]
            ready[g, i] = env.now
            if op.kind == KERNEL:
                if gaps.launch_gap_ns:
                    yield env.timeout(gaps.launch_gap_ns)
                start[g, i] = env.now
                p = profiles[i]
                if p.ns > 0:
                    yield task(g, p.ns, p.hbm_bytes, p.aic, p.aiv)
            elif op.kind == MOE:
                start[g, i] = env.now
                yield from moe_block(g, i)
            else:
                start[g, i] = env.now
                wait = gaps.host_gap_ns if op.kind == HOST else gaps.metadata_ns if op.kind == METADATA else 0.0
                if wait:
                    yield env.timeout(wait)
            end[g, i] = env.now
            if i in done[g]:
                done[g][i].succeed()

    procs = [env.process(stream(g, idxs)) for g in range(G) for _, idxs in program.streams]
    env.run()
    if not all(p.triggered for p in procs):
        raise RuntimeError("decode step: a stream did not finish (a dependency or barrier never completed)")
    share.sync()
    hbm = np.array([share.bytes_by_resource[res[g][0]] for g in range(G)])
    return StepRun(program, groups, reach, ready, start, end, phases, replayed, moe_index, dict(profiles),
                   tuple(runs), hbm)
