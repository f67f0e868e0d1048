"""``ChipSim``: runs a kernel schedule on one chip's AI cores, L2 and HBM.

Each (core, unit, pipe) is a SimPy process executing its instruction list in order
(facts 3.1). A pipe keeps a local issue time ``t`` and the completion time of its
latest work ``done``, and only yields to SimPy when it must observe other
processes: at a flag wait, or when a GM copy enters the shared L2/HBM. Work that
touches nothing shared (MMAD, vector ops, L1->L0, FixPipe to UB) is costed with
arithmetic and traced as a span, which keeps events per instruction low.

Timing rules (facts 3.6):
- copy: the pipe streams ``size / path bandwidth`` (at least the path's minimum
  issue interval), then may issue the next copy; the copy completes ``base latency``
  later. GM copies stream through the fluid share, capped by the path rate and
  sharing L2 (always) and HBM (on a miss, and for writes) max-min fairly.
- MTE2 copies hold one of the unit's outstanding-request slots from issue to
  completion (16 per AIV, facts 1.4, S1), so small requests are latency-bound.
- mmad: occupies the cube for ceil(max(m, saturating)/16) * ceil(n/16) * ceil(k/k0)
  cycles and completes ``mmad_latency_cycles`` later (pipelined, facts 1.2, S8).
- vector op: max(ops / op-class rate, UB bytes / UB bandwidth) cycles (FP4 decode: bytes
  / fp4_decode_B_per_cycle).
- a multi-region copy (``Copy.regions``) is one request: each region hits or misses in
  L2 on its own, and its hit and miss bytes stream concurrently within the path rate.
- a run of an MTE2 pipe's reads issued back to back that all hit in L2 (a KV gather) streams
  as one transfer of their bytes (``gm_bursts``; ``simnode.hardware.bursts``).
- set_flag / cross-core set: fires when every earlier instruction of the pipe has
  completed (facts 3.2); the pipe keeps issuing meanwhile, as a pipe's initiation
  interval and its latency are separate (facts 3.6, S8: latency and II per pipe).
  ``Barrier`` is the blocking form: the pipe waits for its own completions.
- wait_flag: consumes the earliest set of its flag and continues no earlier than it.

Flags hold the times of their sets (a heap per flag). Because every set is stamped
with its pipe's local time, a wait whose set is already known continues without
yielding; only a wait that precedes its set in program order blocks in SimPy.

Cores in lock step (``KernelSchedule.lockstep``: the same program on other GM regions, as a
GEMM's cores in every wave) run as one representative each (``lockstep=True``, untraced
runs): ``simnode.hardware.lockstep``.

A run whose event queue empties while pipes still wait is a deadlock: it raises
``DeadlockError`` naming every stuck pipe and the flag it waits on.

Here: ``ChipSim`` (launch, the op loop ``_run``, the start of GM copies); a pipe's program
and state in ``simnode.hardware.pipes``; bursts in ``simnode.hardware.bursts``.
"""

from __future__ import annotations

import gc
import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import simpy

from simnode.config.chip import ChipSpec
from simnode.engine.clock import Later
from simnode.engine.share import Share
from simnode.engine.trace import NULL_TRACER
from simnode.errors import DeadlockError, ScheduleError
from simnode.hardware import lockstep
from simnode.hardware.bursts import burst_len, burst_start
from simnode.hardware.memory import L2Cache
from simnode.hardware import pipes
from simnode.hardware.pipes import Path, Pipe, PipeStats, Programs
from simnode.instr import isa
from simnode.instr.schedule import KernelSchedule
from simnode.units import ns_to_us


@dataclass
class ChipRun:
    """What one schedule did on one chip; ``report.result`` turns it into a Result."""
    schedule: KernelSchedule
    start_ns: float
    end_ns: float
    pipe_stats: dict = field(default_factory=dict)   #: (core, unit, pipe) -> PipeStats
    l2_bytes: float = 0.0
    hbm_bytes: float = 0.0
    l2_hits: int = 0
    l2_misses: int = 0
    lockstep_groups: int = 0    #: lock-step groups run as one representative core each

    @property
    def makespan_ns(self) -> float:
        return self.end_ns - self.start_ns

    def busy_frac(self) -> dict[str, float]:
        """Mean busy fraction per pipe kind ("aic.m", "aiv.mte2", ...) over the units that
        ran it, plus "l2" and "hbm": the share of their bandwidth the run used."""
        total, count = {}, {}
        span = self.makespan_ns or 1.0
        for (_core, unit, pipe), st in self.pipe_stats.items():
            k = f"{isa.unit_kind(unit)}.{pipe}"
            total[k] = total.get(k, 0.0) + st.busy_ns
            count[k] = count.get(k, 0) + 1
        return {k: total[k] / (count[k] * span) for k in sorted(total)}


class ChipSim:
    """One chip. Several may share an ``env`` and a ``share`` (a supernode)."""

    def __init__(self, chip: ChipSpec, env: simpy.Environment | None = None, share=None,
                 tracer=NULL_TRACER, name: str = "chip0", hbm: int | None = None,
                 gm_bursts: bool = True, lockstep: bool = True):
        """``share``: the engine its GM traffic runs on (its own if None; a supernode's, so
        the chip's copies and the rank's messages share one clock and one HBM); ``hbm``:
        that HBM's resource id on ``share`` if it exists already (e.g. ``rankR.hbm``);
        ``gm_bursts``: stream an MTE2 pipe's back-to-back GM reads as bursts (the reduced
        form, ``simnode.hardware.bursts``); False: every read on its own (the detailed form);
        ``lockstep``: run a schedule's lock-step groups as one core each (the reduced form of
        ``simnode.hardware.lockstep``; not with a tracer); False: every core (the detailed form)."""
        self.chip = chip
        self.gm_bursts = gm_bursts
        self.lockstep = lockstep
        self.env = env if env is not None else simpy.Environment()
        self.share = share if share is not None else Share(self.env)
        self.name = name
        self.tracer = tracer
        self.r_l2 = self.share.add_resource(f"{name}.l2", chip.memory.l2_bandwidth_GBps)
        self.r_hbm = hbm if hbm is not None else self.share.add_resource(
            f"{name}.hbm", chip.memory.hbm_bandwidth_GBps)
        self.l2 = L2Cache(chip.memory.l2_capacity_bytes)
        self._paths = {n: Path(p, chip.aic_freq_GHz) for n, p in chip.paths.items()}
        self._aic_cycle_ns = 1.0 / chip.aic_freq_GHz
        self._aiv_cycle_ns = 1.0 / chip.aiv_freq_GHz
        self._flags: dict = {}
        self._programs = Programs(chip, self._paths, self._flags)
        self._ready: deque = deque()
        self._draining = False
        self._pipes: list = []
        self._later = Later(self.env, self._issue_later)   # GM copies due later
        self._pid = tracer.process(name) if tracer.enabled else 0
        # every GM read crosses L2, a miss or a write HBM as well (facts 1.1/1.4)
        self.res_hit = (self.r_l2,)
        self.res_miss = (self.r_l2, self.r_hbm)
        # a one-region copy's class in the share ((cap, resources), weights), made once per
        # path: ``_issue`` hands them over ready-made (``Share.start_keyed``)
        for path in self._paths.values():
            path.hit = ((path.bw, self.res_hit), (1.0,))
            path.miss = ((path.bw, self.res_miss), (1.0, 1.0))

    # -- public ---------------------------------------------------------------------------
    def launch(self, schedule: KernelSchedule) -> tuple[simpy.Event, ChipRun]:
        """Start every pipe of ``schedule``; the event fires when all have finished."""
        # lock-step groups (``simnode.hardware.lockstep``): a representative core runs for its
        # group; the others' statistics are its own (copied when it ends, ``_run``), in their
        # own places of ``pipe_stats``
        groups = schedule.lockstep if self.lockstep and not self.tracer.enabled else ()
        shadow_of = {c: group[0] for group in groups for c in group[1:]}
        distinct: dict = {}                 # each pipe's distinct records, found by the check
        runs: dict = {}                     # and its repeated runs that hold (``repeat_runs``)
        schedule.check(self.chip, distinct, runs, frozenset(shadow_of))
        progs = {prog.core: prog for prog in schedule.cores}
        reps = {group[0]: [progs[c] for c in group[1:]] for group in groups}
        now = self.env.now
        run = ChipRun(schedule, now, now, lockstep_groups=len(reps))
        chip = self.chip
        pipes = []
        copies = []                         # (representative's stats, shadow's stats, records)
        rep_stats = {}
        for prog in schedule.cores:
            rep = shadow_of.get(prog.core)
            for (unit, pipe), instrs in prog.pipes.items():
                if not instrs:
                    continue
                stats = run.pipe_stats[(prog.core, unit, pipe)] = PipeStats()
                if rep is not None:
                    copies.append(((rep, unit, pipe), stats, len(instrs)))
                    continue
                rep_stats[(prog.core, unit, pipe)] = stats
                cyc = self._aic_cycle_ns if unit == "aic" else self._aiv_cycle_ns
                limit = (chip.sync.mte2_outstanding_per_aic if unit == "aic"
                         else chip.sync.mte2_outstanding_per_aiv) if pipe == "mte2" else 1 << 30
                p = Pipe(prog.core, unit, pipe, instrs, stats, cyc, limit, now)
                if self.tracer.enabled:
                    p.tid = self.tracer.thread(self._pid, p.name)
                    if p.tid is not None and pipe == "mte2":
                        # counter track of the MTE2 queue (facts 1.4, S1): issued-but-incomplete
                        # requests at each issue, the new one included
                        p.qtrack = f"core{prog.core:02d}.{unit} MTE2 outstanding"
                if prog.core in reps:
                    p.shadows = [q.pipes[(unit, pipe)] for q in reps[prog.core]]
                    p.weight = float(len(p.shadows) + 1)
                pipes.append(p)
        copies = [(rep_stats[key], stats, n) for key, stats, n in copies]
        self._pipes.extend(pipes)
        self.share.sync()
        self._l2_base = (self.share.bytes_by_resource[self.r_l2], self.l2.hits, self.l2.misses)
        self._hbm_base = self.share.bytes_by_resource[self.r_hbm]
        done = self.env.event()
        state = {"left": len(pipes), "done": done, "run": run, "copies": copies}
        # op caches keyed by record id: valid while the schedule (which holds the records) is
        # being compiled, so they live only in this call
        cache: dict = {}
        for _, stats, _ in copies:
            stats.finish_ns = now
        for p in pipes:
            p.stats.finish_ns = now
            p.group = state
            p.ops = self._programs.compile(p, cache, distinct.pop(id(p.instrs)), runs.pop(id(p.instrs)))
            p.step = self._run(p).__next__
        if not pipes:
            self._finish(run)
            done.succeed()
        else:
            self._ready.extend(pipes)
            self._drain()
        return done, run

    def run(self, schedule: KernelSchedule) -> ChipRun:
        """Run ``schedule`` alone to completion; raise DeadlockError if it cannot finish."""
        self._flags.clear()         # sets left unconsumed by an earlier run do not leak into this one
        # the schedule's instructions and the pipes' programs (millions of objects, built
        # by launch without reference cycles) live for the whole run: the cyclic collector
        # is off while launch builds them and need not traverse them during the run
        enabled = gc.isenabled()
        gc.disable()
        try:
            done, run = self.launch(schedule)
            gc.freeze()
            if enabled:
                gc.enable()
            self.env.run()
        finally:
            gc.unfreeze()
            if enabled:
                gc.enable()
        if not done.triggered:
            self.raise_deadlock(schedule.name)
        return run

    def raise_deadlock(self, what: str) -> None:
        stuck = [f"{f.waiter.name} waits on {f.describe()}"
                 for f in sorted((f for f in self._flags.values() if f.waiter is not None),
                                 key=lambda f: (f.waiter.core, f.waiter.unit, f.waiter.pipe))]
        raise DeadlockError(f"'{what}' deadlocked at t = {self.env.now:.1f} ns: no pending "
                            f"set can release {len(stuck)} waiting pipe(s): " + "; ".join(stuck))

    # -- internals ------------------------------------------------------------------------
    def _finish(self, run: ChipRun) -> None:
        run.end_ns = max((s.finish_ns for s in run.pipe_stats.values()), default=run.start_ns)
        self.share.sync()
        b = self.share.bytes_by_resource
        run.l2_bytes = float(b[self.r_l2] - self._l2_base[0])
        run.hbm_bytes = float(b[self.r_hbm] - self._hbm_base)
        run.l2_hits = self.l2.hits - self._l2_base[1]
        run.l2_misses = self.l2.misses - self._l2_base[2]

    def _drain(self) -> None:
        """Run ready pipes until each blocks (a trampoline: a pipe that releases another
        queues it instead of calling it, so stacks stay flat and the order is fixed)."""
        if self._draining:
            return
        self._draining = True
        ready = self._ready
        try:
            while ready:
                ready.popleft().step()
        finally:
            self._draining = False

    def _resume_at(self, p: Pipe) -> None:
        """A pipe whose next GM copy starts at ``p.t`` > now: start that copy then
        (``_issue_later``), in the order a Timeout of that delay would run in
        (``simnode.engine.clock.Later``); the pipe stays suspended until the copy has streamed."""
        self._later.call_at(p.t, p)

    def _issue_later(self, p: Pipe) -> None:
        """The clock reached the issue time of the GM copy at ``p.ops[p.i]``: start it (the
        pipe itself is resumed once it has streamed)."""
        p.copy_m = self._issue(p, p.ops, p.i)

    def _issue(self, p: Pipe, ops: list, i: int) -> int:
        """Start the GM copy at ``ops[i]``, issued at ``p.t``; an MTE2 read with reads after it
        goes as one burst with them if they can go as one (``bursts``).
        Returns how many reads it started. A copy of one region starts here (this runs once
        per GM copy); one descriptor over several regions in ``_gm_regions``; a lock-step
        group's representative's copies in ``lockstep`` (its group's)."""
        _, ins, path, size = ops[i]
        if p.bursts and i >= p.no_burst and not path.write and i + 4 <= len(ops) \
                and pipes.COPY == ops[i + 1][0] == ops[i + 2][0] == ops[i + 3][0]:
            m = burst_len(ops, i, len(ops), path, size, p.t, p.inflight, p.limit)
            if m > 1:
                got = burst_start(self, ops, i, m, path, size, p) if p.shadows is None \
                    else lockstep.burst(self, p, ops, i, m, path, size)
                if got > 1:
                    return got
                # read i - got - 1 may miss: read by read up to it; the whole run if the
                # first may (a cold or not-allocated run: the rest would mostly miss too)
                p.no_burst = i + m if got == -1 else i - got
        if p.shadows is not None:
            lockstep.issue_group(self, p, ins, path, size, i)
        elif type(ins) is not isa.Copy or not ins.regions:
            # L2 hit or miss: a miss and a write also stream through HBM
            p.copy_end = -math.inf
            p.copy_parts = 1
            if path.write:
                self.l2.write(ins.gm_key, size, ins.l2_hint == "normal")
                key, weights = path.miss
            else:
                key, weights = path.hit if self.l2.read(ins.gm_key, size,
                                                        ins.l2_hint == "normal") else path.miss
            self.share.start_keyed(size, key, weights, p.member)
        else:
            self._gm_regions(ins, path, size, p)
        return 1

    def copy_done(self, served_ns: float, p: Pipe) -> None:
        """The Share served the last byte of (one part of) the pipe's GM copy."""
        if served_ns > p.copy_end:
            p.copy_end = served_ns
        p.copy_parts -= 1
        if p.copy_parts == 0:
            ready = self._ready
            ready.append(p)
            if not self._draining:              # ``_drain`` written out: once per GM copy
                self._draining = True
                try:
                    while ready:
                        ready.popleft().step()
                finally:
                    self._draining = False

    def _gm_regions(self, ins: isa.Copy, path: Path, size: float, p: Pipe) -> None:
        """Start the streaming of a GM copy whose descriptor covers several regions (a
        gather); the pipe is resumed by ``_copy_done`` once every part has streamed."""
        share = self.share
        regions = ins.regions
        p.copy_end = -math.inf
        # one descriptor over several regions: hit bytes stream from L2, miss bytes from HBM,
        # both inside the descriptor's path rate (split by their byte shares)
        part = size / len(regions)
        allocate = ins.l2_hint == "normal"
        hits = self.l2.read_many(regions, part, allocate)
        misses = len(regions) - hits
        p.copy_parts = (hits > 0) + (misses > 0)
        if hits:
            share.start_cb(part * hits, self.res_hit, None, path.bw * hits / len(regions),
                           self.copy_done, p)
        if misses:
            share.start_cb(part * misses, self.res_miss, None,
                           path.bw * misses / len(regions), self.copy_done, p)

    def _run(self, p: Pipe):
        """Pipe ``p`` as a generator: it executes ops until it blocks, yields, and goes on when
        the drain calls it again (``p.step``). Blocking points: a wait on a flag not yet set
        (resumed by the set, which moves ``p.i`` past the wait and ``p.t`` to the set's time)
        and a GM copy, started now or, if its issue time is still ahead of the clock, then
        (``_resume_at``), resumed once it has streamed (``_copy_done``). Between them
        its clocks and program counter stay in local variables: a resumption costs no reload.
        The ops are walked by one list iterator that the generator keeps across its yields (a
        wait's set moves ``p.i`` on by one, as the iterator does), so an op costs no index
        arithmetic: an op's index is asked of the iterator (what is left of the list) only where
        it is needed, at a wait that blocks and at a GM copy; a burst moves it past its reads."""
        env = self.env
        tracer = self.tracer
        tid = p.tid
        p.member = (self.copy_done, p)     # its GM copies' callback in the share (``_issue``)
        pid = self._pid
        ready = self._ready
        heappop, heappush = heapq.heappop, heapq.heappush
        ops = p.ops
        i = p.i
        t, done = p.t, p.done
        busy = p.busy
        inflight = p.inflight
        popleft, push = inflight.popleft, inflight.append
        on_mte2 = p.pipe == "mte2"
        limit = p.limit
        waits = p.waits
        wake = ready.append
        # a traced run goes read by read: its trace (the bandwidth counters' order among the
        # spans included) stays that of the detailed form, even for pipes out of its scope
        p.bursts = self.gm_bursts and on_mte2 and not tracer.enabled
        TIME_TRACED, WAIT, SET, COPY = pipes.TIME_TRACED, pipes.WAIT, pipes.SET, pipes.COPY
        n = len(ops)
        walk = iter(ops)
        walk.__setstate__(i)
        left = walk.__length_hint__         # ops after the current one: n - 1 - its index
        for op in walk:
            kind = op[0]
            if kind <= TIME_TRACED:                 # work that touches nothing shared
                if kind:                            # traced: its span first
                    args = op[4]
                    if args is not None and "_comp" in args:
                        args = {k: v for k, v in args.items() if k != "_comp"}
                        args["done_us"] = round(ns_to_us(t + op[1] + op[2]), 4)
                    tracer.span(pid, tid, op[3], t, op[1], args)
                dur = op[1]
                t += dur
                busy += dur
                comp = t + op[2]
                if comp > done:
                    done = comp
            elif kind == WAIT:
                f = op[1]
                q = f.q
                if q:
                    ts = heappop(q)
                else:
                    if f.waiter is not None:
                        raise ScheduleError(f"{p.name}: two pipes wait on "
                                            f"{f.describe()} at once.")
                    f.waiter = p
                    p.i, p.t = n - 1 - left(), t
                    yield                           # resumed by the matching set
                    t = p.t                         # (and ``p.i`` moved past the wait)
                    continue
                if ts > t:
                    waits[op[2]] = waits.get(op[2], 0.0) + (ts - t)
                    t = ts
            elif kind == SET:
                f = op[1]
                fire = done if done > t else t
                w = f.waiter
                if w is not None:
                    # the waiter consumes this set: it continues no earlier than ``fire``
                    f.waiter = None
                    if fire > w.t:
                        src = w.ops[w.i][2]
                        w.waits[src] = w.waits.get(src, 0.0) + (fire - w.t)
                        w.t = fire
                    w.i += 1
                    wake(w)
                else:
                    heappush(f.q, fire)
            elif kind == COPY:
                _, ins, path, size = op
                while inflight and inflight[0] <= t:
                    popleft()
                if len(inflight) >= limit:
                    free = popleft()
                    if free > t:
                        p.queue_full += free - t
                        t = free
                if path.gm:
                    p.t = t
                    i = n - 1 - left()
                    if t > env.now:
                        # started when the clock reaches ``t`` (``_issue_later``); the pipe
                        # stays suspended until the copy has streamed
                        p.i = i
                        self._resume_at(p)
                    else:
                        p.copy_m = self._issue(p, ops, i)
                    yield                           # resumed by ``_copy_done``
                    m = p.copy_m
                    if m > 1:
                        # m reads issued back to back, all hitting in L2: one transfer
                        start = t
                        end = p.copy_end
                        span = end - start
                        stream = size / path.bw
                        p.stall += span - m * stream
                        busy += m * stream
                        # the m reads' completions, their ends spread evenly over the
                        # burst (exact while its rate stays constant; the MTE2 queue and
                        # nothing else reads them)
                        base = path.base
                        for x in range(1, m + 1):
                            push(start + span * x / m + base)
                        comp = end + base
                        if comp > done:
                            done = comp
                        t = end
                        walk.__setstate__(i + m)    # past the burst's other reads
                        continue
                    # the copy finished streaming: account for it, then go on
                    start = t
                    end = p.copy_end
                    stream = size / path.bw
                    occ = end - start if end - start > path.ii else path.ii
                    p.stall += (end - start) - stream
                    comp = end + path.base
                    if tid is not None:
                        tracer.span(pid, tid, ins.label or ins.path, start, occ,
                                    {"bytes": size, "path": ins.path, "done_us": round(ns_to_us(comp), 4)})
                    t = start + occ
                    busy += stream if stream > path.ii else path.ii
                    if on_mte2:
                        push(comp)
                        if p.qtrack is not None:
                            tracer.counter(pid, p.qtrack, start, {"requests": len(inflight)})
                    if comp > done:
                        done = comp
                    continue
                stream = size / path.bw
                occ = stream if stream > path.ii else path.ii
                comp = t + stream + path.base
                if tid is not None:
                    tracer.span(pid, tid, ins.label or ins.path, t, occ,
                                {"bytes": size, "path": ins.path, "done_us": round(ns_to_us(comp), 4)})
                t += occ
                busy += occ
                if on_mte2:
                    push(comp)
                if comp > done:
                    done = comp
            else:                                   # BARRIER
                if done > t:
                    t = done
        # the pipe has run its last op
        p.i, p.t, p.done, p.busy = len(ops), t, done, busy
        st = p.stats
        if p.qtrack is not None and inflight:     # empty once the last request completes
            tracer.counter(pid, p.qtrack, max(inflight), {"requests": 0})
        st.busy_ns = busy
        st.stall_ns = p.stall
        st.queue_full_ns = p.queue_full
        st.wait_ns = p.waits
        st.instructions = len(p.instrs)
        st.finish_ns = max(t, done)
        p.finished = True
        p.ops = None
        p.step = None
        state = p.group
        state["left"] -= 1
        if state["left"] == 0:
            for src, st, n in state["copies"]:      # a lock-step group's other cores
                st.busy_ns, st.stall_ns, st.queue_full_ns = src.busy_ns, src.stall_ns, src.queue_full_ns
                st.wait_ns = dict(src.wait_ns)
                st.instructions = n
                st.finish_ns = src.finish_ns
            self._finish(state["run"])
            state["done"].succeed()
        yield                                       # never resumed: the drain holds it no more
