"""A pipe's program and state: the op tuples its instructions become, and what it carries.

``Programs(chip, paths, flags).compile(pipe, ...)`` resolves a pipe's instruction records
into op tuples once per distinct record (records are shared, frozen objects, so a pipe of a
million instructions holds a few hundred): (WAIT, flag, setter), (SET, flag), (TIME, dur,
lat) for work that touches nothing shared (TIME_TRACED, dur, lat, name, args when traced),
(COPY, ins, path, size), (BARRIER,). The chip's op loop (``simnode.hardware.chip``) runs
them. Timing of work that touches nothing shared (facts 3.6): see ``Programs._time_op``.

``Pipe`` is one pipe's place in its program and its clocks; ``Flag`` one flag's pending sets
(a heap of times) and waiter; ``Path`` a copy path's rates; ``PipeStats`` what a pipe did.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from simnode.config.chip import DTYPE_BITS, GM_PATHS
from simnode.errors import ScheduleError
from simnode.instr import isa

#: the op kinds (first field of an op tuple); TIME and TIME_TRACED lead (the op loop tests
#: ``kind <= TIME_TRACED`` first)
TIME, TIME_TRACED, WAIT, SET, COPY, BARRIER = range(6)
_WRITE_PATHS = frozenset({"ub_to_gm", "l0c_to_gm"})


@dataclass
class PipeStats:
    busy_ns: float = 0.0       #: time the pipe spends at its own intrinsic rate
    stall_ns: float = 0.0      #: extra time GM copies took because L2/HBM were shared
    queue_full_ns: float = 0.0  #: time issue waited for a free MTE2 outstanding-request slot
    wait_ns: dict = field(default_factory=dict)  #: time idle on flags, by the pipe that sets them
    instructions: int = 0
    finish_ns: float = 0.0


class Path:
    """A copy path's rates in ns (from its spec and the clock), and a one-region GM copy's
    class in the share, made once per path."""
    __slots__ = ("bw", "base", "ii", "gm", "write", "hit", "miss")

    def __init__(self, spec, freq_GHz):
        self.bw = spec.bandwidth_B_per_cycle * freq_GHz              # bytes/ns
        self.base = spec.base_latency_cycles / freq_GHz
        self.ii = spec.min_issue_interval_cycles / freq_GHz
        self.gm = spec.name in GM_PATHS
        self.write = spec.name in _WRITE_PATHS
        self.hit = self.miss = None     #: (class key, weights) of a one-region copy (ChipSim)


class Flag:
    """One flag of one core (a pipe pair's event id, or a cross-core flag): the times of its
    sets not yet consumed (a heap), and the pipe waiting on it, if any."""
    __slots__ = ("key", "q", "waiter")

    def __init__(self, key):
        self.key = key
        self.q = []
        self.waiter = None

    def describe(self) -> str:
        """The flag as errors name it."""
        key = self.key
        if key[0] == "x":
            return f"cross-core flag {key[4]} ({key[2]} -> {key[3]})"
        return f"flag {key[2]}->{key[3]} event {key[4]}"


class Pipe:
    """One pipe's place in its instruction list and its clocks (``simnode.hardware.chip``)."""
    __slots__ = ("core", "unit", "pipe", "instrs", "i", "t", "done", "stats", "inflight",
                 "limit", "cyc", "tid", "qtrack", "busy", "stall", "queue_full", "waits",
                 "copy_parts", "copy_end", "finished", "name",
                 "group", "ops", "step", "bursts", "no_burst", "copy_m", "member", "shadows",
                 "weight")

    def __init__(self, core, unit, pipe, instrs, stats, cyc, limit, now):
        self.core, self.unit, self.pipe, self.instrs = core, unit, pipe, instrs
        self.name = f"core{core:02d}.{unit}.{pipe}"
        self.i = 0
        self.t = self.done = now
        self.stats = stats
        self.inflight = deque()
        self.limit = limit
        self.cyc = cyc
        self.tid = None
        self.qtrack = None
        self.busy = self.stall = self.queue_full = 0.0
        self.waits = {}
        self.copy_parts = 0
        self.copy_end = 0.0
        self.finished = False
        self.group = None           #: the launch it belongs to: {"left", "done", "run"}
        self.ops = None             #: the compiled program (``Programs.compile``)
        self.step = None            #: resumes its ``ChipSim._run`` generator
        self.bursts = False         #: its GM reads may go as bursts (``ChipSim._issue``)
        self.no_burst = 0           #: no burst starts before this op
        self.copy_m = 1             #: reads its latest GM issue started (1, or a burst's)
        self.member = None          #: (callback, pipe) of its GM copies in the share
        self.shadows = None         #: a representative's: its shadows' records (``lockstep``)
        self.weight = 1.0           #: the cores whose GM copies it streams (itself included)


class Programs:
    """Compiles pipes' instructions into ops for one chip: its spec ``chip``, its ``paths``
    (name -> ``Path``) and its ``flags`` (key -> ``Flag``, shared by its pipes)."""

    def __init__(self, chip, paths: dict, flags: dict):
        self.chip = chip
        self.paths = paths
        self.flags = flags

    def compile(self, p: Pipe, cache: dict, distinct: list, runs: list = ()) -> list:
        """The pipe's instructions as op tuples, resolved once per distinct record (records
        are shared, frozen objects, so a pipe of a million instructions holds a few hundred):
        (WAIT, flag, setter), (SET, flag), (TIME, dur, lat) for work that touches nothing
        shared, (COPY, ins, path, size), (BARRIER,). A TIME op moves the pipe's clock by
        ``dur`` and its latest completion to at least clock + ``lat``. ``runs``: the pipe's
        runs of records that repeat earlier ones (``repeat_runs``), whose ops are copied.
        An MTE2 pipe's copies are not among ``distinct``: their ops are made occurrence by
        occurrence (``resolve``)."""
        core, unit = p.core, p.unit
        traced = p.tid is not None
        local = cache.setdefault((core, unit, p.pipe, p.cyc, traced), {})
        Copy, paths, on_mte2 = isa.Copy, self.paths, p.pipe == "mte2"
        for ins in distinct:                # the pipe's distinct records (``KernelSchedule.check``)
            key = id(ins)
            if key in local:
                continue
            typ = type(ins)
            if typ is isa.Mmad or typ is isa.VecOp or typ is isa.Scalar or typ is isa.Delay or (
                    (typ is Copy or typ is isa.Fixpipe) and not on_mte2
                    and not paths[ins.path].gm):
                op = self._time_op(ins, typ, p.cyc, traced)
            elif typ is isa.WaitFlag:
                op = (WAIT, self.flag((core, unit, ins.src, ins.dst, ins.event)), ins.src)
            elif typ is isa.CrossWait:
                op = (WAIT, self.flag(("x", core, ins.from_unit, unit, ins.flag)), ins.from_unit)
            elif typ is isa.SetFlag:
                op = (SET, self.flag((core, unit, ins.src, ins.dst, ins.event)))
            elif typ is isa.CrossSet:
                op = (SET, self.flag(("x", core, unit, ins.to_unit, ins.flag)))
            elif typ is Copy or typ is isa.Fixpipe:
                op = (COPY, ins, paths[ins.path], ins.size_bytes if typ is Copy else fix_bytes(ins))
            elif typ is isa.Barrier:
                op = (BARRIER,)
            else:
                raise ScheduleError(f"{p.name}: cannot execute {ins!r}.")
            local[key] = op
        get, instrs = local.__getitem__, p.instrs
        if on_mte2:
            # its copies (not among ``distinct``: ``KernelSchedule.check``) are GM copies, whose
            # ops (COPY, ins, path, size) are made occurrence by occurrence by C-level maps
            def resolve(seg):           # (one pass, one look at each record)
                return [(COPY, ins, paths[ins.path], ins.size_bytes) if type(ins) is Copy
                        else get(id(ins)) for ins in seg]
        else:
            def resolve(seg):
                return list(map(get, map(id, seg)))
        if not runs:
            return resolve(instrs)
        # a run that repeats earlier records (``CoreProgram.repeats``, checked) repeats their ops
        ops, pos = [], 0
        for start, length, src in runs:
            if start > pos:
                ops.extend(resolve(instrs[pos:start]))
            ops.extend(ops[src:src + length])
            pos = start + length
        ops.extend(resolve(instrs[pos:]))
        return ops

    def flag(self, key) -> Flag:
        """The flag of ``key`` (a pipe pair's event id, or a cross-core flag), made once."""
        f = self.flags.get(key)
        if f is None:
            f = self.flags[key] = Flag(key)
        return f

    def _time_op(self, ins, typ, cyc, traced) -> tuple:
        chip = self.chip
        if typ is isa.Mmad:
            k0 = chip.cube.macs_per_cycle[ins.dtype] // 256
            dur = math.ceil(max(ins.m, chip.cube.saturating_m_rows) / 16) \
                * math.ceil(ins.n / 16) * math.ceil(ins.k / k0) * cyc
            lat = chip.cube.mmad_latency_cycles * cyc        # pipelined: completes later
            span = (ins.label or "mmad", {"m": ins.m, "n": ins.n, "k": ins.k, "dtype": ins.dtype})
        elif typ is isa.VecOp:
            # one VF streams through load, decoder, ALU and store at once: the slowest
            # stage sets its time (facts 1.2: decoder, VALU and VRF<->UB rates, S3/S8)
            dur = chip.vector.cycles(ins) * cyc
            lat = 0.0
            span = (ins.label or "vec", {"ops": ins.ops})
        elif typ is isa.Scalar or typ is isa.Delay:
            dur = ins.cycles * cyc if typ is isa.Scalar else ins.time_ns
            lat = 0.0
            span = (ins.label or typ.__name__.lower(), None)
        else:                                            # a copy that stays on the core
            path = self.paths[ins.path]
            size = ins.size_bytes if typ is isa.Copy else fix_bytes(ins)
            stream = size / path.bw
            dur = stream if stream > path.ii else path.ii    # the pipe issues again after this
            lat = stream + path.base - dur                   # it completes base latency later
            span = (ins.label or ins.path, {"bytes": size, "path": ins.path, "_comp": lat})
        # a traced TIME op is its own kind, so the untraced loop never asks for the tracer
        return (TIME_TRACED, dur, lat) + span if traced else (TIME, dur, lat)


def fix_bytes(ins: isa.Fixpipe) -> int:
    """FixPipe moves the converted output: m * n elements of ``out_dtype`` (facts 3.4, S1)."""
    return ins.m * ins.n * DTYPE_BITS[ins.out_dtype] // 8
