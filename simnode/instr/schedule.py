"""Schedules as data: per-core, per-pipe instruction lists plus a buffer plan.

``KernelSchedule`` holds one ``CoreProgram`` per AI core used. ``check(chip)``
rejects what the real compiler would: a buffer plan over capacity (naming the
buffer, its capacity and the demand), a flag id out of range, a copy on the wrong
pipe, a unit the chip does not have. ``to_records`` / ``from_records`` turn a
schedule into plain dicts (for files); ``format_core`` prints one core's program.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections import defaultdict
from dataclasses import dataclass, field

from simnode.errors import ScheduleError
from simnode.instr import isa

BUFFERS = ("l0a", "l0b", "l0c", "l1", "ub")
_BUFFER_UNIT = {"l0a": "aic", "l0b": "aic", "l0c": "aic", "l1": "aic", "ub": "aiv"}


@dataclass(frozen=True)
class BufferUse:
    unit: str          #: "aic", "aiv0" or "aiv1"
    buffer: str        #: one of BUFFERS
    label: str         #: what it holds, e.g. "A tile x 4 stages"
    size_bytes: int


@dataclass
class CoreProgram:
    core: int
    pipes: dict = field(default_factory=dict)        #: (unit, pipe) -> list of instructions
    buffers: list = field(default_factory=list)      #: BufferUse records
    #: (unit, pipe) -> [(start, length, src), ...]: a generator's notes that the pipe's records
    #: at [start, start + length) are the very objects at [src, src + length), placed again
    #: (``place``). Hints for whoever walks every record: ``repeat_runs`` keeps only the
    #: notes that hold, so a note made stale by a later edit of the list is ignored
    repeats: dict = field(default_factory=dict)

    def pipe(self, unit: str, pipe: str) -> list:
        key = (unit, pipe)
        if key not in self.pipes:
            self.pipes[key] = []
        return self.pipes[key]

    def place(self, unit: str, pipe: str, seq: list, placed: dict, key) -> None:
        """Append ``seq`` (a generator's memoized run of records, named ``key``) to a pipe;
        ``placed`` (the caller's, per pipe) remembers where ``key`` went first, and a run
        placed again is noted in ``repeats``."""
        self.placer(unit, pipe, placed)(seq, key)

    def placer(self, unit: str, pipe: str, placed: dict | None = None):
        """``place`` for one pipe, with its list, its notes and ``placed`` (its own if None)
        looked up once: a function (seq, key) for a generator placing thousands of runs there."""
        instrs = self.pipe(unit, pipe)
        placed = {} if placed is None else placed
        extend, where = instrs.extend, placed.get

        def place(seq: list, key) -> None:
            src = where(key)
            if src is None:
                placed[key] = len(instrs)
            elif seq:
                self.repeats.setdefault((unit, pipe), []).append((len(instrs), len(seq), src))
            extend(seq)
        return place

    def num_instructions(self) -> int:
        return sum(len(v) for v in self.pipes.values())


@dataclass
class KernelSchedule:
    name: str
    cores: list                                       #: CoreProgram per AI core used
    flops: float = 0.0                                #: useful floating-point operations
    meta: dict = field(default_factory=dict)          #: tile sizes and other generator choices
    #: groups of core ids (tuples, the representative first) whose programs are the same but
    #: for the GM regions their copies name: the same pipes, the same records elsewhere, and a
    #: GM copy of the same path and size at the same places. A generator declares them where
    #: the cores run in step (every core of a GEMM wave works on a block of the same shape);
    #: the engine may then run one core per group (``ChipSim(lockstep=True)``)
    lockstep: list = field(default_factory=list)

    def num_instructions(self) -> int:
        return sum(c.num_instructions() for c in self.cores)

    def check(self, chip, distinct: dict | None = None, runs: dict | None = None,
              shadows: frozenset = frozenset()) -> None:
        """Raise ScheduleError for anything the hardware cannot run; ``shadows``: cores of
        lock-step groups that will not run (their representative's records are theirs but for
        the GM regions, ``lockstep``; only their pipes' shape is checked). ``distinct``, if given,
        receives id(a pipe's instruction list) -> its distinct records (by identity, in order
        of first use): what the check went through, for a caller that resolves each once;
        on an MTE2 pipe, its records other than copies (checked by their path and size); ``runs`` the same
        pipe's repeats that hold (``repeat_runs``)."""
        if len(self.cores) > chip.num_ai_cores:
            raise ScheduleError(f"schedule '{self.name}' uses {len(self.cores)} AI cores; "
                                f"chip '{chip.name}' has {chip.num_ai_cores}.")
        units = ["aic"] + [f"aiv{i}" for i in range(chip.aiv_per_core)]
        self.check_buffers(chip)
        self.check_lockstep()
        for prog in self.cores:
            if prog.core in shadows:
                continue
            for (unit, pipe), instrs in prog.pipes.items():
                if unit not in units:
                    raise ScheduleError(f"schedule '{self.name}' core {prog.core}: unit '{unit}' "
                                        f"does not exist on '{chip.name}' (units: {', '.join(units)}).")
                if pipe not in isa.pipes_of(unit):
                    raise ScheduleError(f"schedule '{self.name}' core {prog.core}: {unit} has no pipe "
                                        f"'{pipe}' (pipes: {', '.join(isa.pipes_of(unit))}).")
                # generators share identical records: check each distinct one once per pipe
                # (a run noted as a repeat holds only records seen before it: skipped)
                kind = isa.unit_kind(unit)
                rep = repeat_runs(instrs, prog.repeats.get((unit, pipe), ())) if prog.repeats else []
                fresh = instrs if not rep else list(itertools.chain.from_iterable(
                    instrs[a:b] for a, b in fresh_spans(rep, len(instrs))))
                if pipe == "mte2":
                    # a copy's check reads its path and size only: each (path, size) is checked
                    # once (a pipe's KV gathers are thousands of distinct records of a few
                    # sizes), after the pipe's other records; one pass, one look at each record
                    seen, classes, Copy = {}, set(), isa.Copy
                    for ins in fresh:
                        if type(ins) is Copy:
                            classes.add((ins.path, ins.size_bytes))
                        else:
                            seen[id(ins)] = ins
                    once = list(seen.values())
                else:
                    once, classes = list(dict(zip(map(id, fresh), fresh)).values()), ()
                for ins in once:
                    self._check_instr(prog.core, unit, pipe, ins, chip, units, kind)
                for path, size in sorted(classes, key=repr):
                    self._check_copy(prog.core, unit, pipe, path, size, kind)
                if distinct is not None:
                    distinct[id(instrs)] = once
                if runs is not None:
                    runs[id(instrs)] = rep

    def check_lockstep(self) -> None:
        """Raise ScheduleError if a lock-step group names a core the schedule lacks, names a
        core twice, or holds a core whose pipes differ from its representative's in name or
        length (the records themselves are the generator's promise: tests/hardware/
        test_lockstep.py runs each generator's groups against the detailed form)."""
        progs = {prog.core: prog for prog in self.cores}
        seen = set()
        for group in self.lockstep:
            if len(group) < 2 or any(c not in progs or c in seen for c in group) \
                    or len(set(group)) < len(group):
                raise ScheduleError(f"schedule '{self.name}': lock-step group {tuple(group)} names a "
                                    f"core that is not in the schedule or is in another group; expected "
                                    f"groups of two or more distinct cores among "
                                    f"{sorted(progs)}.")
            seen.update(group)
            rep = progs[group[0]]
            shape = [(key, len(v)) for key, v in rep.pipes.items()]
            for c in group[1:]:
                other = [(key, len(v)) for key, v in progs[c].pipes.items()]
                if other != shape:
                    raise ScheduleError(f"schedule '{self.name}': core {c} cannot run in lock step "
                                        f"with core {group[0]}: its pipes (name, records) are {other}, "
                                        f"its representative's {shape}.")

    def check_buffers(self, chip) -> None:
        """Raise ScheduleError if any core's buffer plan exceeds a capacity."""
        for prog in self.cores:
            self._check_buffers(prog, chip)

    def _check_buffers(self, prog: CoreProgram, chip) -> None:
        demand = defaultdict(int)
        parts = defaultdict(list)
        for use in prog.buffers:
            if use.buffer not in BUFFERS:
                raise ScheduleError(f"schedule '{self.name}': unknown buffer '{use.buffer}' "
                                    f"(buffers: {', '.join(BUFFERS)}).")
            demand[(use.unit, use.buffer)] += use.size_bytes
            parts[(use.unit, use.buffer)].append(f"{use.label} {use.size_bytes} B")
        for (unit, buf), need in sorted(demand.items()):
            cap = chip.buffers.capacity_bytes(buf)
            if need > cap:
                raise ScheduleError(
                    f"schedule '{self.name}' core {prog.core}: {buf.upper()} of {unit} overflows: "
                    f"demand {need} B ({'; '.join(parts[(unit, buf)])}) exceeds the capacity "
                    f"{cap} B ({cap // 1024} KiB) of '{chip.name}'. Use smaller tiles or fewer stages.")

    def _check_instr(self, core, unit, pipe, ins, chip, units, unit_kind) -> None:
        at = self._where      # the errors' prefix, built only for an error: this runs per record
        t = type(ins)
        if t is isa.Copy:
            self._check_copy(core, unit, pipe, ins.path, ins.size_bytes, unit_kind)
        elif t is isa.Fixpipe:
            self._check_copy(core, unit, pipe, ins.path, None, unit_kind)
        elif t is isa.VecOp:
            if ins.op_class != "fp4_decode" and ins.op_class not in chip.vector.ops_per_cycle:
                raise ScheduleError(f"{at(core, unit, pipe)}: vector op class '{ins.op_class}' unknown (classes: "
                                    f"{', '.join(chip.vector.ops_per_cycle)}, fp4_decode).")
        elif t is isa.Mmad:
            if pipe != "m":
                raise ScheduleError(f"{at(core, unit, pipe)}: mmad runs on aic.m only.")
            if ins.dtype not in chip.cube.macs_per_cycle:
                raise ScheduleError(f"{at(core, unit, pipe)}: mmad dtype '{ins.dtype}' not supported "
                                    f"(supported: {', '.join(chip.cube.macs_per_cycle)}).")
        elif t is isa.SetFlag or t is isa.WaitFlag:
            if not 0 <= ins.event < chip.sync.pipe_events_per_pair:
                raise ScheduleError(f"{at(core, unit, pipe)}: event id {ins.event} out of range 0.."
                                    f"{chip.sync.pipe_events_per_pair - 1} for pipe pair "
                                    f"{ins.src}->{ins.dst}.")
            mine = ins.src if t is isa.SetFlag else ins.dst
            if mine != pipe:
                raise ScheduleError(f"{at(core, unit, pipe)}: {t.__name__}({ins.src}->{ins.dst}) must run on "
                                    f"pipe '{mine}'.")
        elif t is isa.CrossSet or t is isa.CrossWait:
            other = ins.to_unit if t is isa.CrossSet else ins.from_unit
            if other not in units or other == unit or "aic" not in (unit, other):
                raise ScheduleError(f"{at(core, unit, pipe)}: cross-core flag between {unit} and '{other}'; "
                                    f"expected the AIC and one of its AIVs.")
            if not 0 <= ins.flag < chip.sync.cross_core_flags:
                raise ScheduleError(f"{at(core, unit, pipe)}: cross-core flag id {ins.flag} out of range 0.."
                                    f"{chip.sync.cross_core_flags - 1}.")
        elif t not in isa.INSTRUCTION_TYPES:
            raise ScheduleError(f"{at(core, unit, pipe)}: unknown instruction {ins!r}.")

    def _check_copy(self, core, unit, pipe, path, size, unit_kind) -> None:
        """A copy along ``path`` of ``size`` bytes (None: a FixPipe's, sized by its tile)."""
        if path not in isa.PATH_PIPE:
            raise ScheduleError(f"{self._where(core, unit, pipe)}: unknown copy path '{path}'.")
        kind, want = isa.PATH_PIPE[path]
        if kind != unit_kind or want != pipe:
            raise ScheduleError(f"{self._where(core, unit, pipe)}: path '{path}' is issued by the "
                                f"{kind} {want} pipe, not {unit}.{pipe}.")
        if size is not None and size <= 0:
            raise ScheduleError(f"{self._where(core, unit, pipe)}: copy of {size} B; expected > 0.")

    def _where(self, core, unit, pipe) -> str:
        return f"schedule '{self.name}' core {core} {unit}.{pipe}"


def lockstep_groups(shapes: dict, k: int = 0) -> list:
    """Lock-step groups (``KernelSchedule.lockstep``) from a generator's ``shapes``: a key of a
    core's program -> the cores (ids, in order) whose programs have that key, which differ only
    in the GM regions they name. Each key's cores are dealt round-robin into ``k`` groups (0:
    one), the first core of a group its representative; a group of one core is left out."""
    out = []
    for cores in shapes.values():
        n = min(k, len(cores)) if k else 1
        for j in range(n):
            if len(cores[j::n]) > 1:
                out.append(tuple(cores[j::n]))
    return out


def repeat_runs(instrs: list, notes) -> list:
    """The notes (start, length, src) of ``CoreProgram.repeats`` that hold for ``instrs``, in
    order: not overlapping each other, each after its source (src + length <= start), and each
    record at start + j the same object as at src + j (checked at C speed)."""
    out, end, n = [], 0, len(instrs)
    for start, length, src in sorted(notes):
        if length <= 0 or src < 0 or start < end or src + length > start or start + length > n:
            continue
        if all(map(operator.is_, instrs[start:start + length], instrs[src:src + length])):
            out.append((start, length, src))
            end = start + length
    return out


def fresh_spans(runs: list, n: int) -> list:
    """The spans [a, b) of a list of ``n`` records that no run of ``runs`` (``repeat_runs``)
    covers, in order."""
    spans, pos = [], 0
    for start, length, _src in runs:
        if start > pos:
            spans.append((pos, start))
        pos = start + length
    if pos < n:
        spans.append((pos, n))
    return spans


def to_records(schedule: KernelSchedule) -> dict:
    """A plain-dict form of a schedule (JSON-serializable when gm_keys are)."""
    cores = []
    for prog in schedule.cores:
        pipes = {f"{u}.{p}": [{"op": type(i).__name__, **dataclasses.asdict(i)} for i in instrs]
                 for (u, p), instrs in prog.pipes.items()}
        cores.append({"core": prog.core, "pipes": pipes,
                      "buffers": [dataclasses.asdict(b) for b in prog.buffers]})
    out = {"name": schedule.name, "flops": schedule.flops, "meta": dict(schedule.meta),
           "cores": cores}
    if schedule.lockstep:
        out["lockstep"] = [list(g) for g in schedule.lockstep]
    return out


_BY_NAME = {t.__name__: t for t in isa.INSTRUCTION_TYPES}


def _from_record(rec: dict):
    rec = dict(rec)
    cls = _BY_NAME.get(rec.pop("op", None))
    if cls is None:
        raise ScheduleError(f"unknown instruction record {rec!r}; "
                            f"expected op one of {', '.join(_BY_NAME)}.")
    for field in ("gm_key", "regions", "chain", "mix"):  # VecOp.chain / mix: counts per kind
        if isinstance(rec.get(field), list):
            rec[field] = _tuplify(rec[field])
    return cls(**rec)


def _tuplify(value):
    """JSON turns tuples into lists; region keys and chains are tuples again on the way back."""
    return tuple(_tuplify(v) for v in value) if isinstance(value, list) else value


def from_records(data: dict) -> KernelSchedule:
    """Inverse of ``to_records``."""
    cores = []
    for c in data["cores"]:
        prog = CoreProgram(c["core"])
        for name, instrs in c["pipes"].items():
            unit, pipe = name.split(".")
            prog.pipes[(unit, pipe)] = [_from_record(r) for r in instrs]
        prog.buffers = [BufferUse(**b) for b in c["buffers"]]
        cores.append(prog)
    return KernelSchedule(data["name"], cores, data.get("flops", 0.0), data.get("meta", {}),
                          [tuple(g) for g in data.get("lockstep", ())])


def format_core(schedule: KernelSchedule, core: int = 0, max_per_pipe: int = 20) -> str:
    """Human-readable listing of one core's pipes (first ``max_per_pipe`` records each)."""
    prog = schedule.cores[core]
    lines = [f"# {schedule.name}: core {prog.core}"]
    for use in prog.buffers:
        lines.append(f"#   {use.unit}.{use.buffer}: {use.label} ({use.size_bytes} B)")
    for (unit, pipe), instrs in prog.pipes.items():
        lines.append(f"{unit}.{pipe} ({len(instrs)} records)")
        for ins in instrs[:max_per_pipe]:
            lines.append(f"  {ins}")
        if len(instrs) > max_per_pipe:
            lines.append(f"  ... {len(instrs) - max_per_pipe} more")
    return "\n".join(lines)
