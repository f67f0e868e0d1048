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
- set_flag / cross-core set: fires when every earlier instruction of the pipe has
  completed (facts 3.2); the pipe keeps issuing meanwhile, as a pipe's initiation
  interval and its latency are separate (facts 3.6, S8: latency and II per pipe).
  ``Barrier`` is the blocking form: the pipe waits for its own completions.
- wait_flag: consumes the earliest set of its flag and continues no earlier than it.

Flags hold the times of their sets (a heap per flag). Because every set is stamped
with its pipe's local time, a wait whose set is already known continues without
yielding; only a wait that precedes its set in program order blocks in SimPy.

A run whose event queue empties while pipes still wait is a deadlock: it raises
``DeadlockError`` naming every stuck pipe and the flag it waits on.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import simpy

from simnode.config.chip import DTYPE_BITS, GM_PATHS, ChipSpec
from simnode.engine.fluid import FluidShare
from simnode.engine.trace import NULL_TRACER
from simnode.errors import DeadlockError, ScheduleError
from simnode.hardware.memory import L2Cache
from simnode.kernels import isa
from simnode.kernels.schedule import KernelSchedule
from simnode.units import ns_to_us

_WRITE_PATHS = frozenset({"ub_to_gm", "l0c_to_gm"})


@dataclass
class PipeStats:
    busy_ns: float = 0.0       #: time the pipe spends at its own intrinsic rate
    stall_ns: float = 0.0      #: extra time GM copies took because L2/HBM were shared
    queue_full_ns: float = 0.0  #: time issue waited for a free MTE2 outstanding-request slot
    wait_ns: dict = field(default_factory=dict)  #: time idle on flags, by the pipe that sets them
    instructions: int = 0
    finish_ns: float = 0.0


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

    @property
    def makespan_ns(self) -> float:
        return self.end_ns - self.start_ns


class _Path:
    __slots__ = ("bw", "base", "ii", "gm", "write")

    def __init__(self, spec, freq_GHz):
        self.bw = spec.bandwidth_B_per_cycle * freq_GHz              # bytes/ns
        self.base = spec.base_latency_cycles / freq_GHz
        self.ii = spec.min_issue_interval_cycles / freq_GHz
        self.gm = spec.name in GM_PATHS
        self.write = spec.name in _WRITE_PATHS


class ChipSim:
    """One chip. Several may share an ``env`` and a ``share`` (a supernode)."""

    def __init__(self, chip: ChipSpec, env: simpy.Environment | None = None, share=None,
                 tracer=NULL_TRACER, name: str = "chip0"):
        self.chip = chip
        self.env = env if env is not None else simpy.Environment()
        self.share = share if share is not None else FluidShare(self.env)
        self.name = name
        self.tracer = tracer
        self.r_l2 = self.share.add_resource(f"{name}.l2", chip.memory.l2_bandwidth_GBps)
        self.r_hbm = self.share.add_resource(f"{name}.hbm", chip.memory.hbm_bandwidth_GBps)
        self.l2 = L2Cache(chip.memory.l2_capacity_bytes)
        self._paths = {n: _Path(p, chip.aic_freq_GHz) for n, p in chip.paths.items()}
        self._aic_cycle_ns = 1.0 / chip.aic_freq_GHz
        self._aiv_cycle_ns = 1.0 / chip.aiv_freq_GHz
        self._flags: dict = {}
        self._waiters: dict = {}
        self._blocked: dict = {}
        self._pid = tracer.process(name) if tracer.enabled else 0
        self._hbm_read = 0.0
        self._hbm_write = 0.0

    # -- public ---------------------------------------------------------------------------
    def launch(self, schedule: KernelSchedule) -> tuple[simpy.Event, ChipRun]:
        """Start every pipe of ``schedule``; the event fires when all have finished."""
        schedule.check(self.chip)
        run = ChipRun(schedule, self.env.now, self.env.now)
        procs = []
        for prog in schedule.cores:
            for (unit, pipe), instrs in prog.pipes.items():
                if not instrs:
                    continue
                stats = run.pipe_stats[(prog.core, unit, pipe)] = PipeStats()
                procs.append(self.env.process(self._pipe(prog.core, unit, pipe, instrs, stats)))
        self._l2_base = (self.share.bytes_by_resource[self.r_l2], self.l2.hits, self.l2.misses)
        self._hbm_base = self.share.bytes_by_resource[self.r_hbm]
        done = self.env.all_of(procs)
        done.callbacks.append(lambda _e: self._finish(run))
        return done, run

    def run(self, schedule: KernelSchedule) -> ChipRun:
        """Run ``schedule`` alone to completion; raise DeadlockError if it cannot finish."""
        self._flags.clear()         # sets left unconsumed by an earlier run do not leak into this one
        done, run = self.launch(schedule)
        self.env.run()
        if not done.triggered:
            self.raise_deadlock(schedule.name)
        return run

    def raise_deadlock(self, what: str) -> None:
        stuck = [f"core{c:02d}.{u}.{p} waits on {self._flag_name(k)}"
                 for (c, u, p), k in sorted(self._blocked.items(), key=lambda kv: kv[0])]
        raise DeadlockError(f"'{what}' deadlocked at t = {self.env.now:.1f} ns: no pending "
                            f"set can release {len(stuck)} waiting pipe(s): " + "; ".join(stuck))

    # -- internals ------------------------------------------------------------------------
    def _finish(self, run: ChipRun) -> None:
        run.end_ns = max((s.finish_ns for s in run.pipe_stats.values()), default=run.start_ns)
        b = self.share.bytes_by_resource
        run.l2_bytes = b[self.r_l2] - self._l2_base[0]
        run.hbm_bytes = b[self.r_hbm] - self._hbm_base
        run.l2_hits = self.l2.hits - self._l2_base[1]
        run.l2_misses = self.l2.misses - self._l2_base[2]

    @staticmethod
    def _flag_name(key) -> str:
        if key[0] == "x":
            return f"cross-core flag {key[4]} ({key[2]} -> {key[3]})"
        return f"flag {key[2]}->{key[3]} event {key[4]}"

    def _gm_start(self, ins, path: _Path, size: float):
        """Start the streaming of a GM copy; returns the event of its last byte."""
        regions = ins.regions if type(ins) is isa.Copy else ()
        if not regions:
            return self.share.start(size, self._gm_resources(ins, path), path.bw)
        # one descriptor over several regions: hit bytes stream from L2, miss bytes from HBM,
        # both inside the descriptor's path rate (split by their byte shares)
        part = size / len(regions)
        allocate = ins.l2_hint == "normal"
        hits = sum(self.l2.read(key, part, allocate) for key in regions)
        misses = len(regions) - hits
        events = []
        if hits:
            events.append(self.share.start(part * hits, (self.r_l2,), path.bw * hits / len(regions)))
        if misses:
            events.append(self.share.start(part * misses, (self.r_l2, self.r_hbm),
                                           path.bw * misses / len(regions)))
        return events[0] if len(events) == 1 else self.env.all_of(events)

    def _gm_resources(self, ins, path: _Path) -> tuple:
        """Decide L2 hit/miss for a GM copy and return the resources it streams through."""
        allocate = ins.l2_hint == "normal"
        size = ins.size_bytes if type(ins) is isa.Copy else _fix_bytes(ins)
        if path.write:
            self.l2.write(ins.gm_key, size, allocate)
            return (self.r_l2, self.r_hbm)
        if self.l2.read(ins.gm_key, size, allocate):
            return (self.r_l2,)
        return (self.r_l2, self.r_hbm)

    def _pipe(self, core: int, unit: str, pipe: str, instrs: list, st: PipeStats):
        env = self.env
        chip = self.chip
        tracer = self.tracer
        tid = tracer.thread(self._pid, f"core{core:02d}.{unit}.{pipe}") if tracer.enabled else None
        pid = self._pid
        cyc = self._aic_cycle_ns if unit == "aic" else self._aiv_cycle_ns
        macs = chip.cube.macs_per_cycle
        sat_m = chip.cube.saturating_m_rows
        mmad_lat = chip.cube.mmad_latency_cycles * cyc
        vops = chip.vector.ops_per_cycle
        ub_bw = chip.vector.ub_bandwidth_B_per_cycle
        fp4_rate = chip.vector.fp4_decode_B_per_cycle
        paths = self._paths
        limit = (chip.sync.mte2_outstanding_per_aic if unit == "aic"
                 else chip.sync.mte2_outstanding_per_aiv) if pipe == "mte2" else 1 << 30
        inflight = deque()
        # counter track of the MTE2 queue (facts 1.4, S1): the issued-but-incomplete requests
        # at each issue, the new one included (one event per request keeps traces lean)
        qtrack = f"core{core:02d}.{unit} MTE2 outstanding" if tid is not None and pipe == "mte2" else None
        flags = self._flags
        busy = stall = queue_full = 0.0
        waits = {}
        t = done = env.now
        for ins in instrs:
            typ = type(ins)
            if typ is isa.WaitFlag or typ is isa.CrossWait:
                key = ((core, unit, ins.src, ins.dst, ins.event) if typ is isa.WaitFlag
                       else ("x", core, ins.from_unit, unit, ins.flag))
                q = flags.get(key)
                if q:
                    ts = heapq.heappop(q)
                else:
                    if key in self._waiters:
                        raise ScheduleError(f"core{core:02d}.{unit}.{pipe}: two pipes wait on "
                                            f"{self._flag_name(key)} at once.")
                    ev = self._waiters[key] = env.event()
                    self._blocked[(core, unit, pipe)] = key
                    ts = yield ev
                    del self._blocked[(core, unit, pipe)]
                if ts > t:
                    src = ins.src if typ is isa.WaitFlag else ins.from_unit
                    waits[src] = waits.get(src, 0.0) + (ts - t)
                    t = ts
            elif typ is isa.SetFlag or typ is isa.CrossSet:
                key = ((core, unit, ins.src, ins.dst, ins.event) if typ is isa.SetFlag
                       else ("x", core, unit, ins.to_unit, ins.flag))
                fire = done if done > t else t
                ev = self._waiters.pop(key, None)
                if ev is not None:
                    ev.succeed(fire)
                else:
                    q = flags.get(key)
                    if q is None:
                        q = flags[key] = []
                    heapq.heappush(q, fire)
            elif typ is isa.Mmad:
                k0 = macs[ins.dtype] // 256
                dur = math.ceil(max(ins.m, sat_m) / 16) * math.ceil(ins.n / 16) \
                    * math.ceil(ins.k / k0) * cyc
                if tid is not None:
                    tracer.span(pid, tid, ins.label or "mmad", t, dur,
                                {"m": ins.m, "n": ins.n, "k": ins.k, "dtype": ins.dtype})
                t += dur
                busy += dur
                if t + mmad_lat > done:
                    done = t + mmad_lat
            elif typ is isa.Copy or typ is isa.Fixpipe:
                p = paths[ins.path]
                size = ins.size_bytes if typ is isa.Copy else _fix_bytes(ins)
                while inflight and inflight[0] <= t:
                    inflight.popleft()
                if len(inflight) >= limit:
                    free = inflight.popleft()
                    if free > t:
                        queue_full += free - t
                        t = free
                stream = size / p.bw
                if p.gm:
                    if t > env.now:
                        yield env.timeout(t - env.now)
                    start = t
                    yield self._gm_start(ins, p, size)
                    end = env.now
                    occ = max(end - start, p.ii)
                    stall += (end - start) - stream
                    comp = end + p.base
                else:
                    start = t
                    occ = max(stream, p.ii)
                    comp = start + stream + p.base
                if tid is not None:
                    tracer.span(pid, tid, ins.label or ins.path, start, occ,
                                {"bytes": size, "path": ins.path, "done_us": round(ns_to_us(comp), 4)})
                t = start + occ
                busy += max(stream, p.ii)
                if pipe == "mte2":
                    inflight.append(comp)
                    if qtrack is not None:
                        tracer.counter(pid, qtrack, start, {"requests": len(inflight)})
                if comp > done:
                    done = comp
            elif typ is isa.VecOp:
                rate = fp4_rate if ins.op_class == "fp4_decode" else vops[ins.op_class]
                # one VF streams through load, decoder, ALU and store at once: the slowest
                # stage sets its time (facts 1.2: decoder, VALU and VRF<->UB rates, S3/S8)
                dur = max(ins.ops / rate, ins.ub_bytes / ub_bw, ins.decode_bytes / fp4_rate) * cyc
                if tid is not None:
                    tracer.span(pid, tid, ins.label or "vec", t, dur, {"ops": ins.ops})
                t += dur
                busy += dur
                if t > done:
                    done = t
            elif typ is isa.Scalar or typ is isa.Delay:
                dur = ins.cycles * cyc if typ is isa.Scalar else ins.time_ns
                if tid is not None:
                    tracer.span(pid, tid, ins.label or typ.__name__.lower(), t, dur)
                t += dur
                busy += dur
                if t > done:
                    done = t
            elif typ is isa.Barrier:
                if done > t:
                    t = done
            else:
                raise ScheduleError(f"core{core:02d}.{unit}.{pipe}: cannot execute {ins!r}.")
        st.busy_ns = busy
        if qtrack is not None and inflight:     # empty once the last request completes
            tracer.counter(pid, qtrack, max(inflight), {"requests": 0})
        st.stall_ns = stall
        st.queue_full_ns = queue_full
        st.wait_ns = waits
        st.instructions = len(instrs)
        st.finish_ns = max(t, done)


def _fix_bytes(ins: isa.Fixpipe) -> int:
    """FixPipe moves the converted output: m * n elements of ``out_dtype`` (facts 3.4, S1)."""
    return ins.m * ins.n * DTYPE_BITS[ins.out_dtype] // 8
