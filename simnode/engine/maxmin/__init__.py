"""The one max-min fair rate solver (progressive filling), for every shared rate in simnode.

``max_min(links, weights, mult, cap, capacity, fcfs)`` returns the rate of each class.
A class stands for ``mult`` identical transfers; each of them crosses the resources of
its row of ``links`` (resource ids, padded with -1) and uses ``weight x rate`` of each
(e.g. HBM bytes per byte of a message); it may not exceed ``cap`` (inf: uncapped).
Resource r serves at most ``capacity[r]``. All classes rise together; a class stops when
a resource it crosses fills or it reaches its cap. The answer is unique.

First come, first served (``fcfs[r]``): such a resource serves overloaded users in
proportion to the load they offer, as a memory controller that queues requests in
arrival order (``memory.hbm_arbitration: fcfs``). Offered rates are the max-min rates
with FCFS resources unlimited; each overloaded FCFS resource scales its classes'
offered rates down to fit (a class on two takes the smaller factor), and these become
caps of a second max-min fill under the real capacities, which therefore never
over-uses a resource. Without overload this is plain max-min.

One algorithm, two speeds. ``rates`` and ``fill`` are written once, in the subset of
Python that numba compiles; they run interpreted on Python lists (small problems: a
chip's few transfer classes, one solve of a network) or compiled on numpy arrays
(``compiled()``, once a run has many large solves; numba is imported only then). Same
code, same floating-point operations in the same order: identical results
(tests/engine/test_maxmin.py checks bit equality).

One exception, for speed: a single large solve while a run is still interpreted (say one
all-to-all of 16 k classes, too few solves to repay numba) runs ``vector_rates``, the
same filling in numpy, many freezes a step. Its sums run in another order, so it is NOT
bit-identical to the sequential fill: it agrees with it to 1e-12 relative
(tests/engine/test_maxmin.py). It is deterministic. And a solve of a few classes runs
``small_rates``: the sequential fill without its index, bit-identical to it.

The solvers, one module each, all behind this driver:

- ``fill``: ``rates`` / ``fill``, the progressive fill with an index (both speeds); its
  index in ``index`` (built, sorted, pruned);
- ``small``: ``small_rates``, for a handful of classes (no index);
- ``vector``: ``vector_rates``, numpy, for one large interpreted solve;
- here: ``Scratch`` (the fill's buffers, by name) and ``scratch``, ``solve`` (runs
  ``rates`` or its compiled form, growing the scratch as a fill asks), ``compiled`` (the
  numba form) and ``max_min`` (one solve from plain lists, for tests and one-off use).
"""

from __future__ import annotations

from simnode.engine.maxmin.fill import (INF, REL_TOL, fill, freeze, load, load_fcfs, rates,
                                        sift)
from simnode.engine.maxmin.index import (GEN, INFO_LEN, KIND, MOST, N_VIS, N_ZERO, NEED_BLOCKS,
                                         NEED_SLOTS, OWN, PRUNE_SLACK, index_count, index_prune,
                                         index_sort, keep_live)
from simnode.engine.maxmin.small import small_rates
from simnode.engine.maxmin.vector import vector_rates

__all__ = ["INF", "REL_TOL", "Scratch", "compiled", "max_min", "rates", "scratch",
           "small_rates", "solve", "vector_rates"]


def _field(i: int, doc: str) -> property:
    return property(lambda s: s.buffers[i], doc=doc)


class Scratch:
    """The buffers of ``rates`` (its arguments from ``unl`` on, in this order), kept between
    solves: they hold the fills' index. Lists for the interpreted form, numpy arrays for the
    compiled one. ``buffers`` is their plain tuple, which ``rates(*problem, *s.buffers)``
    takes as it is (a tuple subclass would be copied at every call); each is also read by
    name."""
    __slots__ = ("buffers",)

    def __init__(self, *buffers):
        self.buffers = buffers

    unl = _field(0, "per resource: left out of the first fill (FCFS, skipped)")
    cap2 = _field(1, "per class row: caps of the second fill (FCFS overload)")
    factor = _field(2, "per resource: its FCFS overload factor")
    info = _field(3, "INFO_LEN ints: sizes asked for, list lengths, layout")
    wsum = _field(4, "per resource: unfrozen demand")
    cnt = _field(5, "per resource: unfrozen classes")
    used = _field(6, "per resource: capacity taken by frozen classes")
    ver = _field(7, "per resource: version of its level")
    ptr = _field(8, "per resource + 1: its first slot in the index")
    hl = _field(9, "the level heap: each entry's level,")
    hr = _field(10, "resource")
    hv = _field(11, "and version")
    frozen = _field(12, "per class row: frozen (or not in the solve)")
    vis = _field(13, "per class row: the classes visiting an FCFS resource")
    zero = _field(14, "per class row: the classes crossing no limited resource")
    slot_cls = _field(15, "per incidence (slot): its class,")
    slot_dw = _field(16, "its mult x weight")
    slot_blk = _field(17, "and its block")
    blk_res = _field(18, "per block entry: a resource")
    blk_dw = _field(19, "and its mult x weight")

    def sizes(self) -> tuple[int, int, int, int]:
        """(resources, class rows, slots, block entries) these buffers have room for."""
        return len(self.unl), len(self.cap2), len(self.slot_cls), len(self.blk_res)

    def fits(self, resources: int, rows: int, arrays: bool) -> bool:
        """Whether these buffers serve a problem of ``resources`` and up to ``rows`` class
        rows in the given form (arrays: the compiled one)."""
        return (len(self.unl) == resources and len(self.cap2) >= rows
                and (type(self.unl) is not list) == arrays)


def scratch(nres: int, rows: int, slots: int = 0, blocks: int = 0,
            arrays: bool = False) -> Scratch:
    """Scratch buffers of ``rates`` for ``nres`` resources, ``rows`` class rows, ``slots``
    incidences and ``blocks`` block entries (``solve`` grows the last two when a fill needs
    more); numpy arrays for the compiled form, else lists."""
    slots, blocks = max(1, slots), max(1, blocks)
    if arrays:
        import numpy as np
        z, i32, i64, b8 = np.zeros, np.int32, np.int64, np.bool_
        # class and resource ids of the index in int32: prunes and fills stream them
        return Scratch(z(nres, dtype=b8), z(rows), z(nres), np.full(INFO_LEN, -1, dtype=i64),
                       z(nres), z(nres, dtype=i64), z(nres), z(nres, dtype=i64),
                       z(nres + 1, dtype=i64), z(nres), z(nres, dtype=i64), z(nres, dtype=i64),
                       z(rows, dtype=b8), z(rows, dtype=i64), z(rows, dtype=i64),
                       z(slots, dtype=i32), z(slots), z(slots, dtype=i64), z(blocks, dtype=i32),
                       z(blocks))
    return Scratch([False] * nres, [0.0] * rows, [0.0] * nres, [-1] * INFO_LEN,
                   [0.0] * nres, [0] * nres, [0.0] * nres, [0] * nres, [0] * (nres + 1),
                   [0.0] * nres, [0] * nres, [0] * nres,
                   [False] * rows, [0] * rows, [0] * rows,
                   [0] * slots, [0.0] * slots, [0] * slots, [0] * blocks, [0.0] * blocks)


def solve(fn, problem: tuple, s: Scratch, arrays: bool) -> tuple[int, Scratch]:
    """``fn(*problem, *s)`` (``rates`` or its compiled form), growing the scratch ``s``
    while a fill asks for more; returns (0 or 1 as ``rates``, the scratch to keep)."""
    while True:
        err = fn(*problem, *s.buffers)
        if err != 2:
            return err, s
        nres, rows, slots, blocks = s.sizes()
        slots = max(int(s.info[NEED_SLOTS]), slots)
        blocks = max(int(s.info[NEED_BLOCKS]), blocks)
        s = None                    # freed before the larger buffers are made (memory peak)
        # room to grow: a fill that needs more asks again, each time for at least 1/4 more
        s = scratch(nres, rows, slots + slots // 4, blocks + blocks // 4, arrays)


def compiled():
    """``rates`` compiled with numba (cached on disk; ``simnode.engine.jit``), or None if
    numba is not installed."""
    from simnode.engine.jit import compile_functions
    fns = compile_functions((freeze, sift, index_count, index_sort, keep_live, index_prune, load,
                             load_fcfs, fill, rates),
                            {"INF": INF, "REL_TOL": REL_TOL, "N_VIS": N_VIS, "N_ZERO": N_ZERO,
                             "MOST": MOST, "OWN": OWN, "GEN": GEN, "KIND": KIND,
                             "NEED_SLOTS": NEED_SLOTS, "NEED_BLOCKS": NEED_BLOCKS,
                             "PRUNE_SLACK": PRUNE_SLACK})
    return fns["rates"] if fns else None


def max_min(links, capacity, cap=None, weights=None, mult=None, fcfs=None, use_compiled=False,
            skip=None, vector=False):
    """Rates (list) of the classes in ``links`` (rows of resource ids, -1 padded). ``cap``,
    ``weights`` (like ``links``), ``mult`` (per class), ``fcfs`` and ``skip`` (per
    resource) default to uncapped, 1, 1, all False and all False. ``use_compiled``: run
    the numba form; ``vector``: ``vector_rates`` (for tests)."""
    import numpy as np
    n = len(links)
    nres = len(capacity)
    width = max((len(r) for r in links), default=1) or 1
    rows = [tuple(r) + (-1,) * (width - len(r)) for r in links]
    wts = [tuple(float(x) for x in w) + (0.0,) * (width - len(w)) for w in weights] if weights \
        else [(1.0,) * width for _ in range(n)]
    mult = [float(x) for x in mult] if mult is not None else [1.0] * n
    cap = [float(x) for x in cap] if cap is not None else [INF] * n
    fcfs = [bool(x) for x in fcfs] if fcfs is not None else [False] * nres
    res_cap = [float(x) for x in capacity]
    skip = [bool(x) for x in skip] if skip is not None else [False] * nres
    if any(skip):                           # skipped resources to the end of each row
        rows = [tuple([r for r in row if r >= 0 and not skip[r]]
                      + [r for r in row if r >= 0 and skip[r]] + [r for r in row if r < 0])
                for row in rows]
        wts = [tuple([w for r, w in zip(row, wr) if r >= 0 and not skip[r]]
                     + [w for r, w in zip(row, wr) if r >= 0 and skip[r]]
                     + [w for r, w in zip(row, wr) if r < 0])
               for row, wr in zip([tuple(r) + (-1,) * (width - len(r)) for r in links], wts)]
    sw = [sum(1 for r in row if r >= 0 and not skip[r]) for row in rows]
    if vector:
        rate = [0.0] * n
        err = vector_rates(list(range(n)), rows, wts, sw, mult, cap, res_cap, fcfs, any(fcfs),
                           skip, rate, [0.0] * nres)
    elif use_compiled:
        fn = compiled()
        if fn is None:
            raise RuntimeError("numba is not installed")
        rate = np.zeros(n)
        problem = (np.arange(n, dtype=np.int64), np.array(rows, dtype=np.int64).reshape(n, width),
                   np.array(wts, dtype=float).reshape(n, width), np.array(sw, dtype=np.int64),
                   np.array(mult), np.array(cap),
                   np.array(res_cap), np.array(fcfs, dtype=np.bool_), any(fcfs),
                   np.array(skip, dtype=np.bool_), rate, np.zeros(nres), -1)
        err, _ = solve(fn, problem, scratch(nres, n, arrays=True), True)
        rate = rate.tolist()
    else:
        rate = [0.0] * n
        problem = (list(range(n)), rows, wts, sw, mult, cap, res_cap, fcfs, any(fcfs),
                   skip, rate, [0.0] * nres, -1)
        err, _ = solve(rates, problem, scratch(nres, n), False)
    if err:
        raise ValueError("unbounded rates: a class crosses no limited resource and has no cap")
    return rate