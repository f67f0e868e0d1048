"""Automatic synchronization: flags from the producers and consumers of buffers.

``CoreEmitter`` receives one core's tile ops in program order (after a pipelined loop has
ordered its stages) and appends their instructions to the core's pipe streams. In automatic
mode it inserts, as TileLang's Ascend backend does (facts moe-layer 4, 3.2):

- a read waits for the last writer of the slot it reads (RAW), a write for the last writer
  and the readers of the slot it overwrites (WAW, WAR), when they run on another pipe;
  a pipe's own earlier work needs no flag (pipes are in order, facts 3.1);
- a dependency becomes ``set`` right after the producer and ``wait`` right before the
  consumer: ``SetFlag``/``WaitFlag`` between pipes of one unit, ``CrossSet``/``CrossWait``
  between the AIC and an AIV;
- vector clocks (per pipe: the last instruction of every other pipe known complete) skip a
  wait that an earlier one already implies; consecutive statements of one pipe that need
  consecutive copies of another (the loads of one stage) share one flag, its set moved to
  the later copy, as DeepGEMM sets one flag per stage; so do any two such statements when
  the pipe pair has no event id left;
- event ids are allocated within the hardware limits (facts 1.3/3.2: 8 per pipe pair, 16
  cross-core flags per direction and AIV): an id is reused once the producer knows the
  consumer has passed the wait of its previous use, so at most one set per id is pending;
  a cross-core id belongs to one (setter pipe, waiting pipe) pair while it lives, so a wait
  can only meet the sets meant for it. When every id is in use the op's line is named.

In manual mode ops and the author's flags are appended as written; ``simnode.tile.verify``
checks them. Buffers the lowering adds itself (a gemm from L1 staging through L0) are still
synchronized here: the author cannot name them.

Slots: a write of a new generation takes the buffer's next version (round robin); a read
finds the slot of the generation it expects, or the program reads data that a reordered
stage overwrote (or has not written yet), which is named with both lines.
"""

from __future__ import annotations

from bisect import bisect_right

from simnode.instr import isa
from simnode.tile.site import fail, fmt


class TileOp:
    """One instruction of one pipe with the buffer accesses that order it."""
    __slots__ = ("core", "pidx", "instr", "reads", "writes", "at", "stage", "flag", "dma")

    def __init__(self, core, pidx, instr, reads, writes, at, stage=0, flag=False, dma=None):
        self.core, self.pidx, self.instr = core, pidx, instr
        self.reads, self.writes = reads, writes     #: (Phys, row lo, row hi, generation)
        self.at, self.stage, self.flag, self.dma = at, stage, flag, dma


#: disjoint row ranges remembered per reading pipe and slot (older ones fold together)
MAX_READ_RANGES = 8


class Slot:
    __slots__ = ("writers", "readers")

    def __init__(self):
        self.writers = ()        #: (pipe, index, snapshot, lo, hi)
        self.readers = {}        #: pipe -> ((index, snapshot, lo, hi), ...) on disjoint rows


#: overwritten generations remembered per buffer, to tell "overwritten" from "not yet written"
EVICTED_KEPT = 64


class PhysState:
    """Emission-time state of one physical buffer: which generation sits in which slot."""
    __slots__ = ("slots", "slot_gen", "slot_at", "slot_of_gen", "next", "evicted")

    def __init__(self):
        self.slots, self.slot_gen, self.slot_at = [], [], []
        self.slot_of_gen = {}
        self.next = 0
        self.evicted = {}        #: recently overwritten generation -> the write that took its slot


class Pair:
    __slots__ = ("ids", "last", "sets", "waits")

    def __init__(self):
        self.ids, self.last = [], []
        self.sets, self.waits = [], []     #: the set / wait records of each id


_MEMO: dict = {}


def _flag(cls, *args):
    key = (cls, args)
    r = _MEMO.get(key)
    if r is None:
        r = _MEMO[key] = cls(*args)
    return r


def _after_writers(deps, writers, c: int, lo: int, hi: int):
    """``deps`` (producer pipe -> (index, snapshot) of its latest instruction pipe ``c``
    must wait for, or None while empty) with the writers of a slot on other pipes whose
    rows overlap [lo, hi)."""
    for w in writers:
        if w[0] != c and w[3] < hi and lo < w[4]:
            if deps is None:
                deps = {w[0]: (w[1], w[2])}
            else:
                d = deps.get(w[0])
                if d is None or d[0] < w[1]:
                    deps[w[0]] = (w[1], w[2])
    return deps


class CoreEmitter:
    """One core's pipe streams and their synchronization (see the module docstring)."""

    def __init__(self, core: int, builder, keep_meta: bool):
        self.core = core
        self.builder = builder
        self.manual = builder.kernel.sync == "manual"
        pipes = builder.pipes
        n = len(pipes)
        self.unit_of = [u for u, _ in pipes]
        self.pipe_of = [p for _, p in pipes]
        self.streams = [[] for _ in range(n)]
        self.after = [{} for _ in range(n)]
        self.meta = [[] for _ in range(n)] if keep_meta else None
        self.vc = [[-1] * n for _ in range(n)]
        self.snaps = [None] * n
        self.active = []                 #: pipes with instructions (the vector clocks' live part)
        self.waitpos = [[] for _ in range(n)]
        self.pending = [[None] * n for _ in range(n)]   #: [consumer][producer] -> latest wait
        self.pairs = [[None] * n for _ in range(n)]     #: [producer][consumer] -> Pair
        self.xpool: dict = {}
        units = list(dict.fromkeys(self.unit_of))
        self.unit_index = [units.index(u) for u in self.unit_of]
        self.run_pipe = [-1] * len(units)
        self.run_start = [0] * len(units)
        self.seq = 0
        self.flag_pairs = 0
        self.events_limit = builder.chip.sync.pipe_events_per_pair
        self.cross_limit = builder.chip.sync.cross_core_flags
        self.op = None

    # -- slots ----------------------------------------------------------------------------
    @staticmethod
    def _state(ph) -> PhysState:
        st = ph.state
        if st is None:
            st = ph.state = PhysState()
        while len(st.slots) < ph.versions:
            st.slots.append(Slot())
            st.slot_gen.append(0)
            st.slot_at.append(None)
        return st

    def _write_slot(self, ph, gen) -> Slot:
        st = ph.state
        if st is None or len(st.slots) < ph.versions:
            st = self._state(ph)
        s = st.slot_of_gen.get(gen)
        if s is None:
            s = st.next % ph.versions
            st.next += 1
            old = st.slot_gen[s]
            if st.slot_of_gen.get(old) == s:
                del st.slot_of_gen[old]
                ev = st.evicted
                if len(ev) >= EVICTED_KEPT:
                    ev.clear()           # only an error message reads it: keep it small, cheaply
                ev[old] = self.op.at
            st.slot_of_gen[gen] = s
            st.slot_gen[s] = gen
            st.slot_at[s] = self.op.at
        return st.slots[s]

    def _read_slot(self, ph, gen) -> Slot:
        st = self._state(ph)
        if gen == 0:
            return st.slots[0]           # read before any write: no producer to wait for
        s = st.slot_of_gen.get(gen)
        if s is None:
            op = self.op
            if gen not in st.evicted:
                fail(f"reads '{ph.name}' before the write it depends on is issued: its stage "
                     f"({op.stage}) runs ahead of the stage that writes it", op.at)
            fail(f"reads '{ph.name}' after a later write ({fmt(st.evicted[gen])}) reused "
                 f"its slot: give '{ph.name}' more versions (T.annotate_buffer_versions, now "
                 f"{ph.versions}) or bring the two stages closer", op.at)
        return st.slots[s]

    # -- emission -------------------------------------------------------------------------
    def emit(self, op: TileOp) -> None:
        self.op = op
        c = op.pidx
        self.seq += 1
        ui = self.unit_index[c]
        if self.run_pipe[ui] != c:
            self.run_pipe[ui] = c
            self.run_start[ui] = self.seq
        stream = self.streams[c]
        if not stream:
            self.active.append(c)
        if op.flag:
            if self.meta is not None:
                self.meta[c].append((op.at, (), ()))
            stream.append(op.instr)
            return
        manual = self.manual
        deps = None
        reads = []
        for ph, lo, hi, gen in op.reads:
            st = ph.state
            if st is None or len(st.slots) < ph.versions:
                st = self._state(ph)
            if gen == 0:
                s = st.slots[0]
            else:
                sl = st.slot_of_gen.get(gen)
                if sl is None:
                    self._read_slot(ph, gen)
                s = st.slots[sl]
            reads.append((s, lo, hi, ph))
            if not manual or ph.implicit:
                deps = _after_writers(deps, s.writers, c, lo, hi)
        writes = []
        for ph, lo, hi, gen in op.writes:
            s = self._write_slot(ph, gen)
            writes.append((s, lo, hi, ph))
            if not manual or ph.implicit:
                deps = _after_writers(deps, s.writers, c, lo, hi)
                if s.readers:
                    for p, rs in s.readers.items():
                        if p != c:
                            for r in rs:
                                if r[2] < hi and lo < r[3]:
                                    if deps is None:
                                        deps = {p: (r[0], r[1])}
                                    else:
                                        d = deps.get(p)
                                        if d is None or d[0] < r[0]:
                                            deps[p] = (r[0], r[1])
        if deps is not None:
            vcc = self.vc[c]
            for p, (idx, snap) in deps.items():
                if vcc[p] < idx:
                    self._edge(p, idx, snap, c)
                    vcc = self.vc[c]
        i = len(stream)
        stream.append(op.instr)
        if self.meta is not None:
            self.meta[c].append((op.at, tuple((id(s), lo, hi, ph.name) for s, lo, hi, ph in reads),
                                 tuple((id(s), lo, hi, ph.name) for s, lo, hi, ph in writes)))
        snap = self.snaps[c]
        if snap is None:
            snap = self.snaps[c] = tuple(self.vc[c])
        for s, lo, hi, _ in reads:
            rd = s.readers
            rs = rd.get(c)
            if rs is None or (len(rs) == 1 and lo <= rs[0][2] and rs[0][3] <= hi):
                rd[c] = ((i, snap, lo, hi),)
            else:
                rs = [r for r in rs if not (lo <= r[2] and r[3] <= hi)]
                rs.append((i, snap, lo, hi))
                if len(rs) > MAX_READ_RANGES:    # keep the record small: fold the oldest two
                    a, b2 = rs[0], rs[1]
                    rs[:2] = [(b2[0], b2[1], min(a[2], b2[2]), max(a[3], b2[3]))]
                rd[c] = tuple(rs)
        for s, lo, hi, _ in writes:
            ws = s.writers
            rec = (c, i, snap, lo, hi)
            if not ws or (len(ws) == 1 and lo <= ws[0][3] and ws[0][4] <= hi):
                s.writers = (rec,)
            else:
                s.writers = tuple(w for w in ws if not (lo <= w[3] and w[4] <= hi)) + (rec,)
            rd = s.readers
            if rd:
                for p, rs in list(rd.items()):
                    if len(rs) == 1:
                        r = rs[0]
                        if lo <= r[2] and r[3] <= hi:
                            del rd[p]
                    else:
                        rs = tuple(r for r in rs if not (lo <= r[2] and r[3] <= hi))
                        if rs:
                            rd[p] = rs
                        else:
                            del rd[p]

    def _merge(self, c: int, p: int, idx: int, snap) -> None:
        vcc = self.vc[c]
        for q in self.active:            # only pipes that ran anything can be known
            v = snap[q]
            if v > vcc[q]:
                vcc[q] = v
        if vcc[p] < idx:
            vcc[p] = idx
        self.snaps[c] = None

    def _edge(self, p: int, idx: int, snap, c: int) -> None:
        """Order pipe c's next instruction after instruction ``idx`` of pipe p."""
        unit_c = self.unit_of[c]
        pend = self.pending[c][p]
        movable = False
        if pend is not None and pend[3] >= self.run_start[self.unit_index[c]]:
            wp = self.waitpos[p]
            k = bisect_right(wp, pend[2])
            movable = k == len(wp) or wp[k] > idx
        stream_p = self.streams[p]
        if movable and type(stream_p[idx]) is isa.Copy and type(stream_p[pend[2]]) is isa.Copy:
            # copies of one burst complete close together: the previous wait of this run
            # covers this dependency too (one flag per stage, as DeepGEMM's), its set moves
            self._move(pend, p, c, idx, snap)
            return
        unit_p = self.unit_of[p]
        pair = self.pairs[p][c]
        if pair is None:
            pair = self.pairs[p][c] = Pair()
        known = snap[c]
        k = None
        for j, lw in enumerate(pair.last):
            if lw < 0 or known >= lw:
                k = j
                break
        if k is None:
            if movable and not self._id_left(pair, unit_p, unit_c):
                self._move(pend, p, c, idx, snap)     # no id left: share the previous flag
                return
            k = self._new_id(pair, p, c, unit_p, unit_c)
        set_ins, wait_ins = pair.sets[k], pair.waits[k]
        self.after[p].setdefault(idx, []).append(set_ins)
        w = len(self.streams[c])
        self.streams[c].append(wait_ins)
        if self.meta is not None:
            self.meta[c].append((None, (), ()))
        self.waitpos[c].append(w)
        pair.last[k] = w
        self.flag_pairs += 1
        self._merge(c, p, idx, snap)
        self.pending[c][p] = [w, set_ins, idx, self.seq]

    def _move(self, pend, p, c, idx, snap) -> None:
        lst = self.after[p][pend[2]]
        lst.remove(pend[1])
        if not lst:
            del self.after[p][pend[2]]
        self.after[p].setdefault(idx, []).append(pend[1])
        pend[2] = idx
        self._merge(c, p, idx, snap)

    def _id_left(self, pair: Pair, unit_p: str, unit_c: str) -> bool:
        if unit_p == unit_c:
            return len(pair.ids) < self.events_limit
        return self.xpool.get((unit_p, unit_c), 0) < self.cross_limit

    def _new_id(self, pair: Pair, p: int, c: int, unit_p: str, unit_c: str) -> int:
        if unit_p == unit_c:
            if len(pair.ids) < self.events_limit:
                e = len(pair.ids)
                pair.ids.append(e)
                pair.last.append(-1)
                pair.sets.append(_flag(isa.SetFlag, self.pipe_of[p], self.pipe_of[c], e))
                pair.waits.append(_flag(isa.WaitFlag, self.pipe_of[p], self.pipe_of[c], e))
                return e
            what = (f"{self.events_limit} event ids of the pipe pair {unit_p}.{self.pipe_of[p]} -> "
                    f"{unit_c}.{self.pipe_of[c]} (facts 3.2: 8 per pair)")
        else:
            nxt = self.xpool.get((unit_p, unit_c), 0)
            if nxt < self.cross_limit:
                self.xpool[(unit_p, unit_c)] = nxt + 1
                pair.ids.append(nxt)
                pair.last.append(-1)
                pair.sets.append(_flag(isa.CrossSet, unit_c, nxt))
                pair.waits.append(_flag(isa.CrossWait, unit_p, nxt))
                return len(pair.ids) - 1
            what = (f"{self.cross_limit} cross-core flags {unit_p} -> {unit_c} (facts 3.2: 16 "
                    f"per direction and AIV)")
        fail(f"needs one more flag from {unit_p}.{self.pipe_of[p]} to {unit_c}.{self.pipe_of[c]} "
             f"while all {what} are pending: fewer stages or buffer versions in flight would fit",
             self.op.at)

    # -- results --------------------------------------------------------------------------
    def pipes(self) -> dict:
        """(unit, pipe) -> instruction list, sets placed after their producers."""
        out = {}
        for i, stream in enumerate(self.streams):
            if not stream:
                continue
            aft = self.after[i]
            if not aft:
                lst = list(stream)
            else:
                lst = []
                for j, ins in enumerate(stream):
                    lst.append(ins)
                    extra = aft.get(j)
                    if extra:
                        lst.extend(extra)
            out[(self.unit_of[i], self.pipe_of[i])] = lst
        return out

    def pipe_meta(self) -> dict:
        """(unit, pipe) -> [(at, reads, writes)] aligned with ``pipes()`` (keep_meta only)."""
        out = {}
        none = (None, (), ())
        for i, stream in enumerate(self.streams):
            if not stream:
                continue
            aft = self.after[i]
            meta = self.meta[i]
            lst = []
            for j in range(len(stream)):
                lst.append(meta[j])
                extra = aft.get(j)
                if extra:
                    lst.extend([none] * len(extra))
            out[(self.unit_of[i], self.pipe_of[i])] = lst
        return out
