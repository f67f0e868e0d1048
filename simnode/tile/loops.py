"""The loops of a tile program: the grid, the vector scope, pipelined loops and stages.

- ``Kernel(blocks, vector=False, sync="auto")``: ``for bx in T.Kernel(n)`` traces the body
  once per block (TileLang writes ``with T.Kernel(n) as bx``; a Python ``with`` runs its
  body once, so the grid is a loop here). A mixed kernel's block is one AI core (1 AIC + its
  AIVs); ``vector=True`` makes every block one AIV, as TileKernels' vector kernels run.
- ``Vector()``: ``for sid in T.Vector()`` runs the body once per AIV of the core, with the
  vector statements on that AIV only; outside it, a mixed kernel's UB statements run on
  every AIV, each on its own UB (TileLang's mixed-kernel SPMD).
- ``Pipelined(n, num_stages)``: a loop whose iterations overlap. Buffers loaded from GM in
  its body, or stored to GM from it, get ``num_stages`` versions (unless the program set
  their versions), so the load of iteration i + 1 does not wait for the consumers of
  iteration i. ``with T.stage(s):`` inside the body delays statements by s iterations, as
  TileLang's ``T.Stage`` in a manual schedule: at step t the loop issues stage s of
  iteration t - s, higher stages (older iterations) first, each in program order; a
  prologue and an epilogue fill and drain the pipeline.
- ``Persistent(domain, workers, worker, num_stages=1)``: the tiles ``worker, worker +
  workers, ...`` of a (row-major) domain, pipelined: TileLang's ``T.Persistent``.

Program order within a pipe is kept; the overlap between pipes is the engine's.
"""

from __future__ import annotations

import math

from simnode.tile.builder import KernelState, current
from simnode.tile.site import caller, fail


def Kernel(blocks, vector=False, sync="auto"):
    b = current()
    at = caller()
    if b.kernel is not None:
        fail("a program launches one T.Kernel", at)
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
        fail(f"T.Kernel({blocks!r}): expected a positive number of blocks", at)
    if sync not in ("auto", "manual"):
        fail(f"T.Kernel(sync={sync!r}): expected 'auto' or 'manual'", at)
    b.kernel = KernelState(blocks, bool(vector), sync, at)
    return _blocks(b, blocks)


def _blocks(b, blocks):
    for i in range(blocks):
        b.begin_block(i)
        yield i
        b.end_block()


def Vector():
    b = current()
    at = caller()
    blk = b.need_block("enter T.Vector()")
    if b.vec_explicit:
        fail("T.Vector() inside T.Vector()", at)
    return _vector(b, blk)


def _vector(b, blk):
    saved = b.scope
    try:
        for u in blk.aivs:
            b.scope = (u,)
            b.vec_explicit = True
            yield int(u[3:])
    finally:
        b.scope = saved
        b.vec_explicit = False


class Loop:
    """A pipelined loop being traced: its iterations' ops by stage, issued step by step."""

    def __init__(self, b, n, num_stages, at):
        b.loop_seq += 1
        self.b, self.n, self.num_stages, self.at = b, n, num_stages, at
        self.id = b.loop_seq
        self.parent = b.loops[-1] if b.loops else None
        self.iters: dict = {}
        self.cur: dict | None = None
        self.cur_stage = 0
        self.max_stage = 0
        self.token = None
        self.recorded = 0
        self.step = 0
        self.direct = False          #: no stages after the first iteration: ops pass straight on
        self.start_clock = b.alloc_clock

    def record(self, op) -> None:
        s = self.cur_stage
        op.stage = s
        if self.direct:
            if self.parent is not None:
                self.parent.record(op)
            else:
                self.b.cores[op.core].emit(op)
            return
        lst = self.cur.get(s)
        if lst is None:
            lst = self.cur[s] = []
            if s > self.max_stage:
                self.max_stage = s
        lst.append(op)

    def begin(self, i) -> None:
        self.cur_stage = 0
        self.token = (self.id, i)
        if not self.direct:
            self.cur = self.iters[i] = {}

    def end(self, i) -> None:
        self.recorded = i + 1
        if self.direct:
            self.step = i + 1
            return
        if i == 0:
            self._promote(self.iters[0])
        self._issue(i)
        if i == 0 and self.max_stage == 0:
            self.direct = True       # a stage-free body: later iterations issue as traced
            self.b.update_sink()

    def drain(self) -> None:
        for t in range(self.step, self.recorded + self.max_stage):
            self._issue(t)

    def _issue(self, t) -> None:
        out = self.parent.record if self.parent is not None else None
        cores = self.b.cores
        for s in range(self.max_stage, -1, -1):
            j = t - s
            if 0 <= j < self.recorded:
                ops = self.iters[j].get(s)
                if ops:
                    for op in ops:
                        if out is not None:
                            out(op)
                        else:
                            cores[op.core].emit(op)
        old = t - self.max_stage
        if old in self.iters:
            del self.iters[old]
        self.step = t + 1

    def _promote(self, first: dict) -> None:
        """Multi-buffer the GM staging buffers the first iteration touched."""
        if self.num_stages <= 1:
            return
        written = set()
        for ops in first.values():
            for op in ops:
                for w in op.writes:
                    written.add(id(w[0]))
        seen = set()
        for ops in first.values():
            for op in ops:
                if not op.dma:
                    continue
                for _kind, ph in op.dma:
                    if id(ph) in seen or ph.explicit or ph.implicit or id(ph) not in written:
                        continue
                    seen.add(id(ph))
                    if ph.clock > self.start_clock:
                        continue            # allocated inside the loop: one per iteration anyway
                    if ph.versions < self.num_stages:
                        ph.versions = self.num_stages
                        self.b.check_capacity(
                            self.b.block.core, ph.unit, ph.scope, self.at,
                            f" (T.Pipelined gives '{ph.name}' {self.num_stages} versions; set its "
                            f"versions with T.annotate_buffer_versions to choose fewer)")


def Pipelined(n, num_stages=1):
    b = current()
    at = caller()
    b.need_block("run a pipelined loop")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        fail(f"T.Pipelined({n!r}): expected a non-negative iteration count", at)
    if isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 1:
        fail(f"T.Pipelined(num_stages={num_stages!r}): expected an integer >= 1", at)
    return _pipelined(b, Loop(b, n, num_stages, at))


def _pipelined(b, loop: Loop):
    b.loops.append(loop)
    b.update_sink()
    ok = False
    try:
        for i in range(loop.n):
            loop.begin(i)
            yield i
            loop.end(i)
        ok = True
    finally:
        if b.loops and b.loops[-1] is loop:
            b.loops.pop()
            b.update_sink()
        if ok:
            loop.drain()


def Persistent(domain, num_workers, worker, num_stages=1, group_size=None):
    """Tiles ``worker, worker + num_workers, ...`` of ``domain`` (an int or a list of sizes,
    row-major); yields an int or a tuple of indices. ``group_size`` is accepted for
    TileLang compatibility; the walk is row-major either way."""
    at = caller()
    dims = tuple(domain) if isinstance(domain, (list, tuple)) else (domain,)
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims):
        fail(f"T.Persistent domain {domain!r}: expected non-negative integers", at)
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        fail(f"T.Persistent workers = {num_workers!r}: expected a positive integer", at)
    total = math.prod(dims)
    tiles = range(worker, total, num_workers)
    return _persistent(Pipelined(len(tiles), num_stages), tiles, dims, len(dims) > 1)


def _persistent(it, tiles, dims, multi):
    for i in it:
        lin = tiles[i]
        if not multi:
            yield lin
            continue
        idx = []
        for d in reversed(dims):
            lin, r = divmod(lin, d)
            idx.append(r)
        yield tuple(reversed(idx))


class stage:
    """``with T.stage(s):`` inside a pipelined loop (see the module docstring)."""
    __slots__ = ("s", "loop", "saved")

    def __init__(self, s: int):
        b = current()
        if not b.loops:
            fail("T.stage() outside a T.Pipelined / T.Persistent loop")
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            fail(f"T.stage({s!r}): expected a non-negative integer")
        loop = b.loops[-1]
        if loop.direct and s > 0:
            fail(f"T.stage({s}) first used after the loop's first iteration: stages must appear in "
                 f"every iteration (from the first)")
        self.s, self.loop = s, loop

    def __enter__(self):
        self.saved = self.loop.cur_stage
        self.loop.cur_stage = self.s
        return self

    def __exit__(self, *exc):
        self.loop.cur_stage = self.saved
        return False
