"""Manual synchronization: the flags an author places in a ``sync="manual"`` kernel.

``flag("set" | "wait", src, dst, event)`` is ``set_flag`` / ``wait_flag`` between two pipes
of one unit (8 event ids per pipe pair, facts 3.2), on the AIC when a pipe only the AIC has
is named (mte1, m, fix), on the AIVs in scope when an AIV-only pipe is (v, mte3);
``cross("set" | "wait", pipe, unit, id)`` is a cross-core flag between the AIC and one AIV
(16 ids per direction, facts 3.2); ``barrier(pipe)`` is ``pipe_barrier``. Nothing here is
checked against the data: ``simnode.tile.verify`` does that on the lowered program.
"""

from __future__ import annotations

from simnode.instr import isa
from simnode.tile.builder import current as _builder
from simnode.tile.site import caller, fail
from simnode.tile.sync import TileOp


_PIPES = {"mte2", "mte1", "m", "fix", "v", "mte3", "s"}
_AIC_ONLY = {"mte1", "m", "fix"}
_AIV_ONLY = {"v", "mte3"}


def _pipe_name(p, at) -> str:
    q = str(p).lower().replace("pipe_", "")
    if q not in _PIPES:
        fail(f"unknown pipe {p!r} (pipes: {', '.join(sorted(_PIPES))})", at)
    return q


def _flag_units(b, pipes, at) -> tuple:
    if any(p in _AIC_ONLY for p in pipes):
        if any(p in _AIV_ONLY for p in pipes):
            fail(f"pipes {pipes[0]} and {pipes[1]} are on different units: use T.cross_set / "
                 f"T.cross_wait between the AIC and an AIV", at)
        if b.kernel.vector:
            fail(f"pipe {pipes} in a vector kernel", at)
        return ("aic",)
    if any(p in _AIV_ONLY for p in pipes) or b.kernel.vector or b.vec_explicit:
        return b.scope
    return ("aic",)


def _split_pair(a, b_, event, at):
    if event is None:
        text = str(a)
        if "_" not in text:
            fail(f"flag {a!r}: expected 'SRC_DST' (as 'MTE2_MTE1') or two pipe names", at)
        s, d = text.split("_", 1)
        return _pipe_name(s, at), _pipe_name(d, at), b_
    return _pipe_name(a, at), _pipe_name(b_, at), event


def flag(kind: str, a, b_=None, event=None) -> None:
    """Manual ``set_flag`` / ``wait_flag`` between two pipes of one unit."""
    at = caller()
    b = _builder()
    blk = b.need_block(f"{kind}_flag")
    if b.kernel.sync != "manual":
        fail(f"T.{kind}_flag in an automatically synchronized kernel: flags are inserted for you; "
             f"use T.Kernel(..., sync='manual') to place them by hand", at)
    src, dst, event = _split_pair(a, b_, event, at)
    if isinstance(event, bool) or not isinstance(event, int) or not 0 <= event < b.chip.sync.pipe_events_per_pair:
        fail(f"event id {event!r} out of range 0..{b.chip.sync.pipe_events_per_pair - 1} (facts 3.2)", at)
    for u in _flag_units(b, (src, dst), at):
        if kind == "set":
            op = TileOp(blk.core, b.pipe_index[(u, src)], isa.SetFlag(src, dst, event), (), (), at, flag=True)
        else:
            op = TileOp(blk.core, b.pipe_index[(u, dst)], isa.WaitFlag(src, dst, event), (), (), at, flag=True)
        b.record(op)


def cross(kind: str, pipe, other: str, flag_id: int) -> None:
    """Manual cross-core flag: ``cross_set(pipe, to_unit, id)`` on this unit's ``pipe``, or
    ``cross_wait(pipe, from_unit, id)``; between the AIC and one of its AIVs (facts 3.2)."""
    at = caller()
    b = _builder()
    blk = b.need_block(f"cross_{kind}")
    if b.kernel.sync != "manual":
        fail(f"T.cross_{kind} in an automatically synchronized kernel: use T.Kernel(..., sync='manual')", at)
    p = _pipe_name(pipe, at)
    if isinstance(flag_id, bool) or not isinstance(flag_id, int) or not 0 <= flag_id < b.chip.sync.cross_core_flags:
        fail(f"cross-core flag id {flag_id!r} out of range 0..{b.chip.sync.cross_core_flags - 1} (facts 3.2)", at)
    units = ("aic",) if p in _AIC_ONLY or (p not in _AIV_ONLY and not b.vec_explicit and not b.kernel.vector) else b.scope
    for u in units:
        if other not in b.units or (u == "aic") == (other == "aic"):
            fail(f"cross-core flag from {u} to {other!r}: expected the AIC and one of its AIVs "
                 f"({', '.join(b.units)})", at)
        ins = isa.CrossSet(other, flag_id) if kind == "set" else isa.CrossWait(other, flag_id)
        b.record(TileOp(blk.core, b.pipe_index[(u, p)], ins, (), (), at, flag=True))


def barrier(pipe) -> None:
    """Manual ``pipe_barrier``: the pipe waits for its own earlier work (facts 3.2)."""
    at = caller()
    b = _builder()
    blk = b.need_block("barrier")
    p = _pipe_name(pipe, at)
    for u in _flag_units(b, (p, p), at):
        b.record(TileOp(blk.core, b.pipe_index[(u, p)], isa.Barrier(f"barrier (line {at[1]})"),
                        (), (), at, flag=True))
