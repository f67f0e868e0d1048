"""The deadlock and race check of a lowered tile program (manual flags, and tests of the
automatic ones).

``check(builder)`` executes each core's pipe streams as a token game: every pipe runs in
order, a set adds a token to its flag (``SetFlag`` keyed by unit and pipe pair and event,
``CrossSet`` by direction and id), a wait takes the earliest token or blocks. Timing never
decides whether a wait is satisfied (every instruction completes), so the game ends exactly
where the engine would: all pipes done, or some blocked for good -- a deadlock, reported
with each stuck wait's program line and, when no remaining set could release it, as a flag
never set.

Along the way each pipe carries a vector clock (what it knows complete of every pipe,
passed on by the sets it waits for), and every buffer access is checked against the last
writer and the readers of its slot: an access that no chain of flags orders after a
conflicting one on another pipe is a race (the FastTrack rule), reported with both lines.
A cross-core flag set from two pipes of one unit is ambiguous (whichever fires first
releases the wait) and is reported too.
"""

from __future__ import annotations

from collections import deque

from simnode.instr import isa
from simnode.tile.site import fail, fmt


def check(b) -> None:
    for core in sorted(b.cores):
        em = b.cores[core]
        _check_core(core, em.pipes(), em.pipe_meta())


def _check_core(core: int, pipes: dict, metas: dict) -> None:
    keys = list(pipes)
    n = len(keys)
    pc = [0] * n
    vc = [[-1] * n for _ in range(n)]
    queues: dict = {}
    xsetter: dict = {}
    slots: dict = {}                 #: slot id -> [writers [(pipe, idx, at, lo, hi)], readers {pipe: [(idx, at, lo, hi)]}]
    names = [f"{u}.{p}" for u, p in keys]
    changed = True
    while changed:
        changed = False
        for i, (unit, pipe) in enumerate(keys):
            instrs, meta, mine = pipes[(unit, pipe)], metas[(unit, pipe)], vc[i]
            while pc[i] < len(instrs):
                ins = instrs[pc[i]]
                t = type(ins)
                if t is isa.SetFlag or t is isa.CrossSet:
                    key = _key(unit, ins)
                    if t is isa.CrossSet:
                        prev = xsetter.setdefault(key, i)
                        if prev != i:
                            fail(f"cross-core flag {ins.flag} from {unit} to {ins.to_unit} is set from "
                                 f"both {names[prev]} and {names[i]} (core {core}): a wait would take "
                                 f"whichever fires first; give each setting pipe its own id",
                                 meta[pc[i]][0])
                    mine[i] = pc[i] - 1
                    queues.setdefault(key, deque()).append(tuple(mine))
                elif t is isa.WaitFlag or t is isa.CrossWait:
                    q = queues.get(_key(unit, ins))
                    if not q:
                        break
                    snap = q.popleft()
                    for j, v in enumerate(snap):
                        if v > mine[j]:
                            mine[j] = v
                else:
                    at, reads, writes = meta[pc[i]]
                    if reads or writes:
                        _access(i, pc[i], at, reads, writes, mine, slots, names, core)
                mine[i] = pc[i]
                pc[i] += 1
                changed = True
    stuck = [i for i in range(n) if pc[i] < len(pipes[keys[i]])]
    if stuck:
        _deadlock(core, keys, pipes, metas, pc, stuck, names)


def _key(unit: str, ins):
    t = type(ins)
    if t is isa.SetFlag or t is isa.WaitFlag:
        return (unit, ins.src, ins.dst, ins.event)
    if t is isa.CrossSet:
        return ("x", unit, ins.to_unit, ins.flag)
    return ("x", ins.from_unit, unit, ins.flag)


def _access(i, idx, at, reads, writes, vc, slots, names, core) -> None:
    # a read races the slot's unordered writers; a write those and its unordered readers
    for verb, accesses, writing in (("reads", reads, False), ("overwrites", writes, True)):
        for sid, lo, hi, name in accesses:
            st = slots.get(sid)
            if st is None:
                st = slots[sid] = [[], {}]
            for w in st[0]:
                if w[0] != i and w[3] < hi and lo < w[4] and vc[w[0]] < w[1]:
                    _race(core, verb, name, at, names[i], w, names)
            if writing:
                for p, rs in st[1].items():
                    for r in rs:
                        if p != i and r[2] < hi and lo < r[3] and vc[p] < r[0]:
                            _race(core, verb, name, at, names[i], (p, r[0], r[1]), names, reader=True)
    for sid, lo, hi, _ in reads:
        rs = [r for r in slots[sid][1].get(i, ()) if not (lo <= r[2] and r[3] <= hi)]
        rs.append((idx, at, lo, hi))
        slots[sid][1][i] = rs
    for sid, lo, hi, _ in writes:
        st = slots[sid]
        st[0] = [w for w in st[0] if not (lo <= w[3] and w[4] <= hi)] + [(i, idx, at, lo, hi)]
        for p in list(st[1]):
            rs = [r for r in st[1][p] if not (lo <= r[2] and r[3] <= hi)]
            if rs:
                st[1][p] = rs
            else:
                del st[1][p]


def _race(core, verb, name, at, pipe_name, other, names, reader=False) -> None:
    what = "reading" if reader else "writing"
    fail(f"race on core {core}: {pipe_name} {verb} '{name}' while {names[other[0]]} may still be "
         f"{what} it ({fmt(other[2])}): no flag orders the two (a missing or misplaced "
         f"set_flag / wait_flag?)", at)


def _deadlock(core, keys, pipes, metas, pc, stuck, names) -> None:
    remaining = {}
    for i, k in enumerate(keys):
        unit = k[0]
        for j in range(pc[i], len(pipes[k])):
            ins = pipes[k][j]
            if type(ins) in (isa.SetFlag, isa.CrossSet):
                remaining.setdefault(_key(unit, ins), (i, j))
    never, cycle = [], []
    for i in stuck:
        k = keys[i]
        ins = pipes[k][pc[i]]
        at = metas[k][pc[i]][0]
        key = _key(k[0], ins)
        flag = (f"flag {ins.src}->{ins.dst} event {ins.event}" if type(ins) is isa.WaitFlag
                else f"cross-core flag {key[3]} ({key[1]} -> {key[2]})")
        setter = remaining.get(key)
        if setter is None:
            never.append((at, f"{names[i]} waits at {fmt(at)} for {flag}, a flag never set (no "
                              f"pipe sets it again)"))
        else:
            si, sj = setter
            cycle.append((at, f"{names[i]} waits at {fmt(at)} for {flag}, whose set "
                              f"({fmt(metas[keys[si]][sj][0])}) lies behind {names[si]}'s own "
                              f"blocked wait"))
    # the waits on flags nobody sets are the cause; without them, the stuck pipes form a cycle
    parts = never or cycle
    shown = parts[:3]
    more = len(stuck) - len(shown)
    text = "; ".join(p for _, p in shown) + (f" ({more} more pipes stuck behind them)" if more else "")
    fail(f"deadlock on core {core}: {text}", shown[0][0])
