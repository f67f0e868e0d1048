"""``Share``: the one engine for every shared rate in simnode (max-min fair, event-driven).

Everything that shares a rate goes through it: a chip's GM copies against its L2 and HBM,
messages against network links and URMA ceilings, a kernel task against the HBM its
rank's URMA traffic also reads. One interface:

- ``add_resource(name, capacity, policy)`` / ``add_resources``: a resource serves at most
  ``capacity`` units per ns (GB/s = bytes/ns for bandwidth; 1.0 for an engine's time);
  ``policy`` "fair" (max-min, default) or "fcfs" (first come, first served: overloaded
  users are served in proportion to the load they offer, ``simnode.engine.maxmin``);
- ``start(size, resources, weights, cap, latency_ns, tag) -> Transfer``: a transfer of
  ``size`` units that uses ``weight x rate`` of each resource and at most ``cap``; the
  SimPy event fires ``latency_ns`` after its last unit was served;
- ``start_cb(...)``: the same, calling ``fn(served_ns, arg)`` instead of firing an event
  (the chip's pipes: no SimPy event per copy);
- ``start_group(sizes, rows, weights, caps, latency_ns) -> Group``: many transfers at
  once (arrays), one event when the last has arrived (a rank's message trains);
- utilization: ``bytes_by_resource``, ``busy_ns``, ``current_rate``, ``series`` (per
  resource over time, bounded memory) and an ``on_rates(now, rates)`` hook.

Model. Transfers with the same (cap, resources, weights) form a class and always get the
same rate, so rates are solved over classes (``simnode.engine.maxmin``). Within a class a
virtual clock (units served per member) and a heap of finish tags order completions.

Batching (``batch_window_ns`` = W). Rates are recomputed when transfers start or end, at
most about once per W, and never so that a resource serves more than its capacity:
- ends: at the first completion t1 after a solve, every transfer that finishes in
  [t1, t1 + W] at the current rates forms a group; each member is served at its own
  exact time, but the group is retired, and rates recomputed, only at its last finish:
  until then members keep their share (it idles);
- starts: a start is solved at once if it comes at the instant of the last solve or more
  than W after it; otherwise it waits (at most W; during a group, for its end) at rate 0.
So a transfer may start up to W late and hold its share up to W after its end: the error
is bounded by W per event and pessimistic. W = 0 is exact: every start or end is solved at
its own instant (starts at one instant together).

Speed. A share begins with its classes in Python lists and runs the inner loops
(``_advance``, ``_accrue``, ``_due``, ``_next`` here, the solver in maxmin) interpreted: the
fastest form for a chip's few classes and for short runs. Once the solves of a run have
touched more than ``COMPILE_AFTER`` class-resource incidences, it moves its classes into
numpy arrays and runs the same loops compiled by numba (``simnode.engine.jit``); results
are identical either way. Exception: an interpreted solve of at least ``VECTOR_SOLVE``
incidences runs ``maxmin.vector_rates`` (numpy; equal to the sequential fill to 1e-12
relative, not to the bit).
"""

from __future__ import annotations

import heapq
import math
from operator import itemgetter
from typing import Callable

import numpy as np
import simpy

from simnode.engine import maxmin, mix
from simnode.engine.clock import Delayed
from simnode.engine.series import BinnedSeries

INF = math.inf
EPS_UNITS = 1e-6          # completion tolerance: a transfer within this many units is done
EPS_REL = 1e-12           # ... plus this share of the units its class has served
POLICIES = ("fair", "fcfs")
#: incidences (class x resource) solved interpreted before a share compiles its loops: about
#: a second of interpreted solving (~2.5 us each), against ~0.8 s to import numba and load
#: its cached code
COMPILE_AFTER = 400_000
#: only solves of at least this many incidences count towards ``COMPILE_AFTER``: a chip's
#: few classes (a handful of pipes' copies against its L2 and HBM) solve faster interpreted,
#: where each wake's bookkeeping is plain Python on lists rather than on numpy scalars
COMPILE_MIN = 64
#: at most this many active classes (interpreted, no FCFS resource): ``maxmin.small_rates``
#: (same rates, no index to build)
SMALL_SOLVE = 8
#: interpreted solves of at least this many incidences run ``maxmin.vector_rates`` (numpy,
#: resources at one fill level frozen together: equal to the sequential fill up to rounding)
VECTOR_SOLVE = 20_000
#: small solves remembered by their inputs (``Share._memo_solve``; cleared when full)
SMALL_MEMO = 4096
#: an interpreted commit of at most this many due classes tests them for group members
#: in plain Python (a chip's few keyed classes: no arrays per wake)
SMALL_DUE = 32
#: dtype of the class rows' resource ids once compiled: every solve streams them (half the
#: bytes of int64)
LINK = np.int32
#: interpreted wakes with at least this many active classes advance them and find the next
#: and the due finishes in numpy (``_advance_vec``, ``_due_vec``, ``_next_vec``: the same
#: operations element by element, so the same results); fewer stay plain loops
VECTOR_LOOPS = 2048


def _odd_multipliers(n: int, seed: int = 17) -> np.ndarray:
    """``n`` odd 63-bit multipliers from splitmix64 (any fixed odd numbers would do: the
    hash only filters, ``_has_repeats`` checks meeting hashes exactly; numpy.random is not
    imported for them, ~25 ms of a short run's start)."""
    return np.array([(z >> 2) * 2 + 1 for z in mix.sequence(seed, n)], dtype=np.int64)


_HASH = _odd_multipliers(64)


def _has_repeats(key: np.ndarray) -> bool:
    """Whether two rows of ``key`` (int64) are equal. Rows whose hashes all differ differ;
    only hashes that meet are checked exactly."""
    n, width = key.shape
    if n < 2:
        return False
    if width <= _HASH.shape[0]:
        h = (key * _HASH[:width]).sum(axis=1)               # wraps around: a hash
        order = np.argsort(h)
        hs = h[order]
        meet = np.flatnonzero(hs[1:] == hs[:-1])
        if not meet.size:
            return False
        if (key[order[meet]] == key[order[meet + 1]]).all(axis=1).any():
            return True                                     # two rows are equal
        # (only rows that differ met: rare; decided exactly below)
    return np.unique(key, axis=0).shape[0] < n


def _gather(lst: list, idx: list) -> tuple:
    """``lst[i]`` for each i of ``idx``, as a tuple (``itemgetter``: one C call, not a loop)."""
    return itemgetter(*idx)(lst) if len(idx) > 1 else tuple(lst[i] for i in idx)


def _fill(lst: list, idx: list, value) -> None:
    """``lst[i] = value`` for each i of ``idx`` (distinct ids, ascending): one slice
    assignment when they are a range (a group's solo classes usually are)."""
    span = _span(idx)
    if span:
        lst[span[0]:span[1]] = [value] * len(idx)
    else:
        for i in idx:
            lst[i] = value


# -- inner loops (numba-compatible: run interpreted on lists or compiled on arrays) ---------------
def _advance(act, V, crate, dt):
    """Serve every active class for ``dt``: its virtual clock moves by rate x dt."""
    for i in range(len(act)):
        c = act[i]
        V[c] += crate[c] * dt


def _accrue(res_rate, res_bytes, res_busy, dt):
    """Units served and busy time per resource over ``dt`` at the current rates."""
    for r in range(len(res_rate)):
        x = res_rate[r]
        if x > 0.0:
            res_bytes[r] += x * dt
            res_busy[r] += dt


def _due(act, top, V, crate, window, out):
    """Classes whose first member finishes within ``window``; their ids into ``out``,
    returns how many."""
    k = 0
    for i in range(len(act)):
        c = act[i]
        v = V[c]
        if top[c] - v <= crate[c] * window + EPS_UNITS + EPS_REL * v:
            out[k] = c
            k += 1
    return k


def _next(act, top, V, crate):
    """Time from now to the first finish among the active classes (inf if none moves)."""
    best = INF
    for i in range(len(act)):
        c = act[i]
        r = crate[c]
        if r > 0.0:
            t = (top[c] - V[c]) / r
            if t < best:
                best = t
    return best


def _release(cs, tags, mw, V, links, w, res_bytes, n, over):
    """Drop finished members (class ``cs[i]``, finish tag ``tags[i]``, weights ``mw[i]`` in
    the order of its class's row) from their classes: their weights leave the class's sum,
    and the units they were credited with after their finish are taken back (``over[i]``,
    units of the member, is written out for the series)."""
    for i in range(len(cs)):
        c = cs[i]
        o = V[c] - tags[i]
        if o < 0.0:
            o = 0.0
        over[i] = o
        row = links[c]
        wr = w[c]
        mwr = mw[i]
        for j in range(len(row)):
            r = row[j]
            if r < 0:
                break
            if o > 0.0:
                res_bytes[r] -= mwr[j] * o
            wr[j] -= mwr[j]
        n[c] -= 1


def _note_covers(ids, links, w, keys, nres, has, covering, ratio, uncov, unc, delta):
    """For each class in ``ids`` and each covered resource X on it: the largest weight on X
    / weight on Y over its covering resources Y (pair key X * nres + Y in the sorted
    ``keys``; ``covering[Y]``: Y covers some resource) into ``ratio`` (when ``delta`` > 0);
    ``uncov[X] += delta`` if the class crosses none of them (delta = +1 for a new class, -1
    for one that left, 0: ratios only). ``unc[c]``: whether class c crosses such an X (set
    when it comes; a class that leaves without one is skipped: its resources do not change).
    Returns whether a ratio grew."""
    npairs = len(keys)
    grew = False
    for t in range(len(ids)):
        c = ids[t]
        if delta < 0 and not unc[c]:
            continue
        if delta > 0:
            unc[c] = False
        row = links[c]
        wr = w[c]
        for j in range(len(row)):
            x = row[j]
            if x < 0:
                break
            if not has[x]:
                continue
            found = False
            for i in range(len(row)):
                y = row[i]
                if y < 0:
                    break
                if i == j or not covering[y]:
                    continue
                key = x * nres + y
                lo = 0
                hi = npairs
                while lo < hi:
                    mid = (lo + hi) // 2
                    if keys[mid] < key:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < npairs and keys[lo] == key:
                    found = True
                    if delta >= 0:
                        q = wr[j] / wr[i]
                        if q > ratio[lo]:
                            ratio[lo] = q
                            grew = True
            if not found:
                uncov[x] += delta
                if delta > 0:
                    unc[c] = True
    return grew


def _relayout(ids, links, w, skip, sw):
    """Move each class's skipped resources to the end of its row (order otherwise kept) and
    set ``sw[c]``: how many of its resources the solver's fills visit."""
    for t in range(len(ids)):
        c = ids[t]
        row = links[c]
        wr = w[c]
        n = 0
        while n < len(row) and row[n] >= 0:
            n += 1
        k = 0
        for j in range(n):                      # keep: the unskipped, in order, to the front
            if not skip[row[j]]:
                if k != j:
                    r = row[j]
                    x = wr[j]
                    for i in range(j, k, -1):   # shift the skipped ones between right by one
                        row[i] = row[i - 1]
                        wr[i] = wr[i - 1]
                    row[k] = r
                    wr[k] = x
                k += 1
        sw[c] = k


# -- the same three loops for many classes, interpreted (lists in, numpy inside) ------------------
def _column(lst: list, act: list, span) -> np.ndarray:
    """``lst[c]`` for c in ``act`` (a slice when they are the range ``span``)."""
    return np.array(lst[span[0]:span[1]] if span else _gather(lst, act), dtype=float)


def _span(act: list):
    """(first, stop) if the ascending distinct ids ``act`` are one range, else None."""
    return (act[0], act[-1] + 1) if act and act[-1] - act[0] + 1 == len(act) else None


def _advance_vec(act, V, crate, dt):
    """``_advance``: V[c] + crate[c] x dt, the same two roundings per class."""
    span = _span(act)
    v = (_column(V, act, span) + _column(crate, act, span) * dt).tolist()
    if span:
        V[span[0]:span[1]] = v
    else:
        for c, x in zip(act, v):
            V[c] = x


def _due_vec(act, top, V, crate, window, out):
    """``_due``: the loop's test, term by term in its order."""
    span = _span(act)
    v = _column(V, act, span)
    due = np.flatnonzero(_column(top, act, span) - v
                         <= _column(crate, act, span) * window + EPS_UNITS + EPS_REL * v)
    k = due.shape[0]
    out[:k] = (due + span[0]).tolist() if span else _gather(act, due.tolist())
    return k


def _next_vec(act, top, V, crate):
    """``_next``: the least (top - V) / rate over moving classes; as the loop, a time that is
    not below inf (inf, nan) is never the answer."""
    span = _span(act)
    r = _column(crate, act, span)
    moving = r > 0.0
    with np.errstate(invalid="ignore"):         # (inf - inf: nan, never the answer)
        t = (_column(top, act, span)[moving] - _column(V, act, span)[moving]) / r[moving]
    t = t[t < INF]
    return float(t.min()) if t.shape[0] else INF


_KERNELS = (_advance, _accrue, _due, _next, _release, _note_covers, _relayout)
_KERNEL_CONSTANTS = {"INF": INF, "EPS_UNITS": EPS_UNITS, "EPS_REL": EPS_REL}


# -- events -----------------------------------------------------------------------------------------
class Transfer(Delayed):
    """A transfer's completion event: fires ``latency_ns`` after its last unit is served.

    ``value`` is the ``tag`` given at start. ``injected`` fires when the last unit has been
    served (left the sender); it is created only if asked for.
    """

    def __init__(self, env: simpy.Environment, size: float, latency_ns: float, tag=None,
                 src=None, dst=None, payload_bytes=None):
        super().__init__(env)
        self.size = size                    #: units the resources serve (wire bytes for a send)
        self.payload_bytes = size if payload_bytes is None else payload_bytes
        self.src = src                      #: sending rank (None for a plain ``start``)
        self.dst = dst                      #: receiving rank
        self.latency_ns = latency_ns        #: delay from last unit served to the event firing
        self.tag = tag
        self.start_ns = env.now             #: time it was started
        self.served_ns: float | None = None   #: time its last unit was served
        self._injected: Delayed | None = None

    @property
    def injected(self) -> simpy.Event:
        if self._injected is None:
            self._injected = Delayed(self.env)
            if self.served_ns is not None:      # already finished: fire at its served time
                self._injected.fire_in(max(self.served_ns - self.env.now, 0.0), self.tag)
        return self._injected

    def _finish(self, served_in_ns: float) -> None:
        served_in_ns = float(served_in_ns)
        self.served_ns = self.env.now + served_in_ns
        self.fire_in(served_in_ns + self.latency_ns, self.tag)
        if self._injected is not None:
            self._injected.fire_in(served_in_ns, self.tag)


class Group(Delayed):
    """Transfers started together by ``Share.start_group``: fires when the last has arrived
    (served + its latency); ``served_ns[k]`` and ``arrival_ns[k]`` per member afterwards.
    While it runs, its members' state lives in the share's arrays (so that completions of
    many groups are handled at once); it takes a copy when its last member is served."""

    def __init__(self, env, latency_ns: np.ndarray, tag=None):
        super().__init__(env)
        self.tag = tag
        self.start_ns = env.now
        self.latency_ns = latency_ns
        self.gid = -1                       #: its index in the share
        self._on_served = None
        self._share = None
        self._served = np.full(latency_ns.shape[0], np.nan)   # own copy once done
        self._last = env.now

    @property
    def on_served(self):
        """callback(member indices, served ns) as members are served (e.g. to note arrivals)."""
        return self._on_served

    @on_served.setter
    def on_served(self, fn) -> None:
        self._on_served = fn
        if self._share is not None:
            self._share._g_watched[self.gid] = fn is not None
            self._share._watched = True

    @property
    def served_ns(self) -> np.ndarray:
        sh = self._share
        if sh is None:
            return self._served
        o = sh._g_off[self.gid]
        return sh._m_served[o:o + self.latency_ns.shape[0]]

    @property
    def left(self) -> int:
        """Members not served yet."""
        return 0 if self._share is None else int(self._share._g_left[self.gid])

    @property
    def last_ns(self) -> float:
        """Latest arrival so far."""
        return self._last if self._share is None else float(self._share._g_last[self.gid])

    @property
    def arrival_ns(self) -> np.ndarray:
        return self.served_ns + self.latency_ns


# -- the engine ---------------------------------------------------------------------------------------
class Share:
    """Transfers sharing resources max-min fairly; see the module docstring."""

    def __init__(self, env: simpy.Environment, batch_window_ns: float = 0.0,
                 series_bins: int = 0, series_bin_ns: float = 1000.0,
                 on_rates: Callable | None = None):
        """``series_bins`` > 0 keeps per-resource units served over time in that many bins
        (``series``); ``on_rates(now_ns, rates)`` is called after every solve."""
        if not batch_window_ns >= 0:
            raise ValueError(f"batch_window_ns must be >= 0, not {batch_window_ns}")
        self.env = env
        self.batch_window_ns = float(batch_window_ns)
        self.on_rates = on_rates
        self.on_served: Callable | None = None  #: callback(transfer) once its finish is known
        self.last_served_ns = 0.0           #: latest time a last unit was served
        self.names: list[str] = []
        self.series = BinnedSeries(0, series_bins, series_bin_ns) if series_bins else None
        self.recomputes = 0                 #: solver runs
        self.transfers_started = 0
        self.transfers_done = 0
        self.compiled = False               #: True once the loops run compiled on arrays
        # resources
        self._cap: list = []
        self._fcfs: list = []
        self._any_fcfs = False
        self._bytes: list = []
        self._busy: list = []
        self._rate: list = []
        self._skip: list = []               # resource cannot fill: left out of solves (``cover``)
        self._cover_of: dict = {}           # X -> [Y, ...] (``cover``)
        self._covering: set = set()         # every Y of some cover
        self._cover_arrays = None
        self._cover_bound = None            # per covered resource: sum over Y of cap(Y) x ratio
        # classes: rows of per-class state, a row reused once its class empties. A class is
        # either keyed (transfers with equal (cap, resources) merge, weights summed; members in a
        # heap of (finish tag, seq, member)) or solo: one member of a group (``_sg`` = the
        # group's index, ``_sk`` = the member's), whose finish tag is ``_top``
        self._key2cls: dict = {}
        self._cls_key: list = []
        self._heaps: list = []
        # a keyed class's members from groups, as arrays sorted by (finish tag, seq): class ->
        # [tags, seqs, group indices, member indices, weights]; its other members are in its heap
        self._bulk: dict = {}
        self._free: list = []
        self._links: list = []              # resource ids per class (-1 padded when arrays)
        self._w: list = []                  # weight per resource
        # interpreted: solo rows of groups still held as the group's arrays, [first class row,
        # rows, weights, how many of them are live]; their ``_links`` / ``_w`` entries are None
        # until ``_materialize`` makes them lists (only the vector solve reads them as arrays,
        # ``_solve``); a block whose rows all left is dropped (its None rows are free rows)
        self._lazy: list = []
        self._sw: list = []                 # resources the solver visits (skipped ones last)
        self._ccap: list = []
        self._n: list = []                  # members (the class's multiplicity in the solve)
        self._V: list = []                  # units served per member at self._t
        self._crate: list = []              # rate per member
        self._top: list = []                # smallest finish tag (inf if none)
        self._sg: list = []
        self._sk: list = []
        self._act: set = set()              # active classes (n > 0), interpreted mode
        self._act_arr = None                # the active classes in row order (cached)
        self._width = 1
        self._groups: list = []             # Group per group index (None once done)
        # per group index: its first row in the member arrays, members not served yet,
        # latest arrival, whether it has an on_served callback (``Group`` reads them)
        self._g_off = np.zeros(0, dtype=np.int64)
        self._g_left = np.zeros(0, dtype=np.int64)
        self._g_last = np.zeros(0)
        self._g_watched = np.zeros(0, dtype=np.bool_)
        self._watched = False
        self._live_groups = 0
        # per member of a running group: served time (nan until then) and latency
        self._m_served = np.zeros(0)
        self._m_lat = np.zeros(0)
        self._m_used = 0
        self._pending: list = []            # (key, weights, size, member) waiting for the next solve
        self._pending_groups: list = []     # (group index, sizes, rows, weights, caps)
        self._ghosts: list = []             # (class, tag, served_ns): done, still holding a share
        self._solo_ghosts: list = []        # compiled mode: (classes, tags, served_ns) arrays
        self._hold_until: float | None = None
        self._t = 0.0                       # time V and the counters are advanced to
        self._last_solve_ns = -INF
        self._wake_at: float | None = None
        self._in_wake = False
        self._deferred: list = []           # callbacks of finished start_cb transfers
        self._memo: dict = {}               # small solves' inputs -> their rates (``_memo_solve``)
        # uncontended fast path (``fast_path``): every live transfer runs at its cap, so no
        # sharing is solved; (finish ns, seq, member, key, weights) per transfer in a heap, and
        # per resource how many of them cross it
        self.fast_path = True               #: allow the fast path (False: always solve)
        self._fast = False
        self._fq: list = []
        self._fcnt: list = []
        self._group_batch: dict = {}        # group index -> (group, [member arrays], [served arrays])
        self._gen = 0
        self._seq = 0
        self._work = 0                      # incidences solved so far (interpreted)
        self._k = {f.__name__: f for f in _KERNELS}
        self._solve_fn = maxmin.rates
        self._scratch = None
        self._due_scratch = None
        self._one = None
        #: changes whenever a live class is added or changes its row, weights or ``sw``, or a
        #: resource's skip flag changes: the solver's index is reused while it stays (classes
        #: that only left are dropped from it, ``maxmin._prune``)
        self._layout = 0

    # -- resources -----------------------------------------------------------------------------
    def add_resource(self, name: str, capacity: float, policy: str = "fair") -> int:
        """Add a resource serving ``capacity`` units/ns (GB/s for bytes); returns its id."""
        return self.add_resources([name], [capacity], policy)[0]

    def add_resources(self, names: list[str], capacities, policy: str = "fair") -> list[int]:
        """Add several resources at once; returns their ids (see ``add_resource``)."""
        caps = [float(c) for c in capacities]
        if len(caps) != len(names):
            raise ValueError("one capacity per resource name is needed")
        if policy not in POLICIES:
            raise ValueError(f"policy {policy!r}: expected one of {POLICIES}")
        for name, c in zip(names, caps):
            if not c > 0:
                raise ValueError(f"resource {name!r}: capacity must be > 0, not {c}")
        first = len(self.names)
        self.names.extend(names)
        fcfs = policy == "fcfs"
        self._any_fcfs = self._any_fcfs or fcfs
        if self.compiled:
            self._cap = np.concatenate([self._cap, caps])
            self._fcfs = np.concatenate([self._fcfs, np.full(len(caps), fcfs)])
            self._skip = np.concatenate([self._skip, np.zeros(len(caps), dtype=np.bool_)])
            for name in ("_bytes", "_busy", "_rate"):
                setattr(self, name, np.concatenate([getattr(self, name), np.zeros(len(caps))]))
        else:
            self._cap.extend(caps)
            self._fcfs.extend([fcfs] * len(caps))
            self._skip.extend([False] * len(caps))
            for lst in (self._bytes, self._busy, self._rate):
                lst.extend([0.0] * len(caps))
        if self.series is not None:
            self.series.grow(len(self.names))
        return list(range(first, len(self.names)))

    def cover(self, resource: int, by) -> None:
        """Declare that every transfer crossing ``resource`` (X) also crosses at least one of
        ``by`` (the Ys: max-min resources without covers of their own). Once the loops run
        compiled, the engine watches each transfer's weights: when the sum over Y of
        capacity(Y) x the largest (weight on X / weight on Y) seen is within X's capacity,
        X can never fill before its Ys, so its constraint is redundant and solves leave it
        out (exact; its load is still counted). A transfer on X that crosses no Y keeps X
        in for good. Speed only: results are the same with or without covers."""
        by = [int(y) for y in by]
        for y in by:
            if y in self._cover_of or self._fcfs[y]:
                raise ValueError(f"resource {self.names[y]!r} cannot cover others: it has a cover "
                                 f"of its own or serves first come, first served")
        if resource in self._cover_of or resource in by or resource in self._covering:
            raise ValueError(f"resource {self.names[resource]!r}: cover declared twice, by "
                             f"itself, or for a resource that covers others")
        self._cover_of[resource] = by
        self._covering.update(by)
        self._cover_arrays = None
        self._cover_bound = None

    def _cover_state(self):
        """(sorted pair keys X * nres + Y, their ratios, per-resource has-cover and covers-
        another flags, per-resource counts of live classes that cross it but none of its
        covers)."""
        if self._cover_arrays is None:
            nres = len(self.names)
            keys = sorted(x * nres + y for x, ys in self._cover_of.items() for y in ys)
            has = np.zeros(nres, dtype=np.bool_)
            has[list(self._cover_of)] = True
            covering = np.zeros(nres, dtype=np.bool_)
            covering[list(self._covering)] = True
            self._cover_arrays = (np.array(keys, dtype=np.int64), np.zeros(len(keys)), has,
                                  covering, np.zeros(nres, dtype=np.int64))
        return self._cover_arrays

    def _note_covers(self, ids: np.ndarray, delta: int = 1) -> None:
        """Compiled mode: take classes ``ids`` into the cover state (``delta`` +1: new, their
        ratios and uncovered resources; 0: a keyed class's weights changed; -1: they left),
        decide which resources solves may leave out, and lay solo classes' rows out for the
        solver (``_relayout``; a keyed class keeps its order, its members' weights follow)."""
        if not self._cover_of:
            return
        keys, ratio, has, covering, uncov = self._cover_state()
        nres = len(self.names)
        grew = self._k["_note_covers"](ids, self._links, self._w, keys, nres, has, covering, ratio,
                                       uncov, self._unc, delta)
        if grew or self._cover_bound is None:   # the ratios only grow
            x, y = keys // nres, keys % nres
            self._cover_bound = np.bincount(x, weights=self._cap[y] * ratio, minlength=nres)
        skip = has & (uncov == 0) & (self._cover_bound <= self._cap)
        if delta > 0:
            relay = ids
        else:
            relay = ids[:0]
        if (skip != self._skip).any():          # the rows of every live class follow suit
            self._layout += 1
            relay = np.union1d(relay, np.flatnonzero(self._n > 0))
            if (self._skip & ~skip).any():
                self._sw[relay] = self._width   # a resource to solve again: visit whole rows
        self._skip = skip
        solo = relay[self._sg[relay] >= 0]
        if solo.size:
            self._k["_relayout"](solo, self._links, self._w, self._skip, self._sw)

    @property
    def capacity(self) -> np.ndarray:
        return np.asarray(self._cap, dtype=float)

    @property
    def bytes_by_resource(self) -> np.ndarray:
        """Units each resource has served up to the last solve (``sync()`` for now)."""
        return np.asarray(self._bytes, dtype=float)

    @property
    def busy_ns(self) -> np.ndarray:
        return np.asarray(self._busy, dtype=float)

    @property
    def current_rate(self) -> np.ndarray:
        return np.asarray(self._rate, dtype=float)

    def sync(self) -> None:
        """Bring unit counters and series up to ``env.now`` (rates unchanged)."""
        self._advance_to(self.env.now)

    # -- transfers -------------------------------------------------------------------------------
    def start(self, size: float, resources: tuple, weights: tuple | None = None,
              cap: float = INF, latency_ns: float = 0.0, tag=None) -> Transfer:
        """Begin a transfer of ``size`` units over ``resources`` (``weights``: units of each
        per unit of the transfer, default 1) at most ``cap`` units/ns; returns its event."""
        tr = Transfer(self.env, size, latency_ns, tag)
        self._begin(size, tuple(resources), weights, cap, tr)
        return tr

    def start_cb(self, size: float, resources: tuple, weights, cap: float, fn, arg=None) -> None:
        """As ``start``, but ``fn(served_ns, arg)`` is called when the last unit is served
        (from inside the engine, once its state is consistent) instead of firing an event."""
        self._begin(size, resources, weights, cap, (fn, arg))

    def start_keyed(self, size: float, key: tuple, weights: tuple, member: tuple) -> None:
        """``start_cb(size, key[1], weights, key[0], *member)`` for a caller that hands over
        its class key ``(cap, resources)`` and ``weights`` (floats) ready-made and valid (known
        resource ids, one positive weight each, a cap > 0): a chip's GM copies, ~100 k a
        run, skip the checks and the tuples ``_begin`` builds. The same start otherwise."""
        if size > 0 and not self._fast:
            self.transfers_started += 1
            self._pending.append((key, weights, size, member))
            if not self._in_wake and self._wake_at != self.env.now:
                self._request_start()               # (a wake due now places it: nothing to ask)
        else:                                       # (a copy of no bytes, or uncontended)
            self._begin(size, key[1], weights, key[0], member)

    def start_group(self, sizes, rows, weights, caps, latency_ns, tag=None) -> Group:
        """Start ``len(sizes)`` transfers at once: transfer k has ``sizes[k]`` units over the
        resources ``rows[k]`` (-1 or a weight of 0: none) with ``weights[k]`` and cap
        ``caps[k]``, and arrives ``latency_ns[k]`` after its last unit; returns one event for
        all of them."""
        if self._fast:
            self._leave_fast()                  # groups go through the classes
        sizes = np.asarray(sizes, dtype=float)
        n = sizes.shape[0]
        lat = np.asarray(latency_ns, dtype=float)
        lat = lat.copy() if lat.shape == (n,) else np.broadcast_to(lat, (n,)).copy()
        group = Group(self.env, lat, tag)
        self.transfers_started += n
        if n == 0:
            group.fire_in(0.0, tag)
            return group
        rows = np.asarray(rows, dtype=np.int64).reshape(n, -1)
        weights = np.asarray(weights, dtype=float).reshape(n, -1)
        caps = np.asarray(caps, dtype=float)
        if caps.shape != (n,):
            caps = np.broadcast_to(caps, (n,))
        # a resource with weight 0 is not used: drop it, keeping the order of the others
        valid = (rows >= 0) & (weights > 0)
        used = valid.sum(axis=1)                # resources each member uses
        width = max(int(used.max()), 1)
        if (valid[:, 1:] <= valid[:, :-1]).all():
            # every row's used resources lead already (the usual case)
            rows = np.where(valid, rows, -1)[:, :width]
            weights = np.where(valid, weights, 0.0)[:, :width]
        else:
            # the used ones moved to the front of their rows, in their order: the k-th used
            # one of row i to flat position i * width + k (one masked scatter per array)
            at = (np.cumsum(valid, axis=1) - 1 + (np.arange(n) * width)[:, None])[valid]
            packed = np.full((n, width), -1, dtype=np.int64)
            packed.ravel()[at] = rows[valid]
            w = np.zeros((n, width))
            w.ravel()[at] = weights[valid]
            rows, weights = packed, w
        if rows.size and rows.max() >= len(self.names):
            raise ValueError(f"unknown resource id in rows (max {rows.max()})")
        if (sizes < 0).any() or not (caps > 0).all():
            raise ValueError("sizes must be >= 0 and caps > 0")
        gid = self._add_group(group)
        # nothing to serve: done at once (a cap alone serves it at that rate)
        idle = (sizes == 0) | ((used == 0) & np.isinf(caps))
        if idle.any():
            ks = np.flatnonzero(idle)
            served = self.env.now + np.where(np.isinf(caps[ks]), 0.0, sizes[ks] / caps[ks])
            self._groups_done(np.full(ks.shape, gid), ks, served)
        live = np.flatnonzero(~idle)
        if live.size:
            if live.size < n:                   # (rows and weights are this call's own arrays)
                rows, weights = rows[live], weights[live]
            key = np.concatenate([rows, caps[live][:, None].view(np.int64)], axis=1)
            if _has_repeats(key):
                # members with the same resources and cap: one shared class per key (``_class``),
                # placed in order with the other pending starts
                self._pending.append((None, (group, gid, live, sizes[live], key, weights,
                                             used[live]), None, None))
            else:
                self._pending_groups.append((gid, live, sizes[live], rows, weights,
                                             np.array(caps[live])))
            self._request_start()
        return group

    def _begin(self, size, resources, weights, cap, member) -> None:
        if size < 0:
            raise ValueError(f"size must be >= 0, not {size}")
        if not cap > 0:
            raise ValueError(f"cap must be > 0, not {cap}")
        if resources and (min(resources) < 0 or max(resources) >= len(self.names)):
            raise ValueError(f"unknown resource id in {resources}")
        if weights is not None:
            weights = tuple(float(w) for w in weights)
            if len(weights) != len(resources) or not all(w > 0 for w in weights):
                raise ValueError(f"weights {weights}: one positive weight per resource needed")
        self.transfers_started += 1
        if size == 0 or (not resources and cap == INF):
            self._retire(member, 0.0 if cap == INF else size / cap)
            if type(member) is tuple:
                self._request_start()               # its callback runs in the next wake
            return
        weights = weights or (1.0,) * len(resources)
        if self._fast:
            if self._fast_start(size, resources, weights, cap, member):
                return
            self._leave_fast()                      # it would contend: solve from now on
        self._pending.append(((cap, resources), weights, size, member))
        if not self._in_wake:                       # (else placed by the running wake: a
            self._request_start()                   # chip's copies start there, ~100 k a run)

    def _request_start(self) -> None:
        if self._in_wake:
            return                                  # placed (or held) by the running wake
        now, last = self.env.now, self._last_solve_ns
        # a start at the instant of the last solve (e.g. the next copy of a pipe whose previous
        # one was just retired) is solved at once; later ones wait for the window
        self._request(now if now == last else max(now, last + self.batch_window_ns))

    def _retire(self, member, served_in_ns: float) -> None:
        self.transfers_done += 1
        served = self.env.now + served_in_ns
        if served > self.last_served_ns:
            self.last_served_ns = served
        if type(member) is tuple:
            obj, k = member
            if type(obj) is Group:                  # a group member in a shared class
                got = self._group_batch.setdefault(obj.gid, (obj, [], []))
                got[1].append([k])
                got[2].append([served])
            else:
                self._deferred.append((member, served))
        else:
            member._finish(served_in_ns)
            if self.on_served is not None:
                self.on_served(member)

    def _add_group(self, group: Group) -> int:
        """Give ``group`` its index and its members' rows in the share's member arrays."""
        n = group.latency_ns.shape[0]
        gid = len(self._groups)
        self._groups.append(group)
        if gid >= self._g_off.shape[0]:
            grow = max(64, gid // 2)
            self._g_off = np.concatenate([self._g_off, np.zeros(grow, dtype=np.int64)])
            self._g_left = np.concatenate([self._g_left, np.zeros(grow, dtype=np.int64)])
            self._g_last = np.concatenate([self._g_last, np.zeros(grow)])
            self._g_watched = np.concatenate([self._g_watched, np.zeros(grow, dtype=np.bool_)])
        off = self._m_used
        if off + n > self._m_served.shape[0]:
            grow = max(off + n - self._m_served.shape[0], self._m_served.shape[0] // 2, 1024)
            self._m_served = np.concatenate([self._m_served, np.zeros(grow)])
            self._m_lat = np.concatenate([self._m_lat, np.zeros(grow)])
        self._m_served[off:off + n] = np.nan
        self._m_lat[off:off + n] = group.latency_ns
        self._m_used = off + n
        self._g_off[gid] = off
        self._g_left[gid] = n
        self._g_last[gid] = self.env.now
        self._g_watched[gid] = False
        self._live_groups += 1
        group.gid = gid
        group._share = self
        return gid

    def _groups_done(self, gids: np.ndarray, ks: np.ndarray, served: np.ndarray) -> None:
        """Members ``ks[i]`` of groups ``gids[i]`` were served at ``served[i]`` (arrays, groups
        in ascending order); each group's callback runs, and a group whose last member this
        was fires at its last arrival, in the order of the groups."""
        n = gids.shape[0]
        if n == 0:
            return
        self.transfers_done += n
        m = float(served.max())
        if m > self.last_served_ns:
            self.last_served_ns = m
        idx = self._g_off[gids] + ks
        self._m_served[idx] = served
        arrive = served + self._m_lat[idx]
        starts = np.flatnonzero(np.r_[True, gids[1:] != gids[:-1]])
        ug = gids[starts]
        self._g_last[ug] = np.maximum(self._g_last[ug], np.maximum.reduceat(arrive, starts))
        self._g_left[ug] -= np.diff(np.r_[starts, n])
        ends = np.r_[starts[1:], n]
        for i in np.flatnonzero((self._g_left[ug] == 0) | self._g_watched[ug]
                                if self._watched else self._g_left[ug] == 0).tolist():
            g = int(ug[i])
            group = self._groups[g]
            if group.on_served is not None:
                a, b = int(starts[i]), int(ends[i])
                group.on_served(ks[a:b], served[a:b])
            if self._g_left[g] == 0:
                self._finish_group(group)

    def _finish_group(self, group: Group) -> None:
        """``group``'s last member is served: it takes its state and fires at its last
        arrival."""
        g = group.gid
        o = self._g_off[g]
        group._served = self._m_served[o:o + group.latency_ns.shape[0]].copy()
        group._last = float(self._g_last[g])
        group._share = None
        self._groups[g] = None
        self._live_groups -= 1
        if self._live_groups == 0:
            self._m_used = 0                    # no group runs: the member rows are free
        group.fire_in(max(group._last - self.env.now, 0.0), group.tag)

    # -- the event loop --------------------------------------------------------------------------
    def _request(self, t_ns: float) -> None:
        if self._hold_until is not None and t_ns < self._hold_until:
            t_ns = self._hold_until             # no solve while a completion group runs
        if self._wake_at is None or t_ns < self._wake_at:
            self._gen += 1
            self._wake_at = t_ns
            gen = self._gen
            self.env.timeout(float(t_ns - self.env.now)).callbacks.append(lambda _e: self._wake(gen))

    def _advance_to(self, now: float) -> None:
        dt = now - self._t
        if dt > 0:
            k = self._k
            act = self._active()
            (_advance_vec if not self.compiled and len(act) >= VECTOR_LOOPS else k["_advance"])(
                act, self._V, self._crate, dt)
            k["_accrue"](self._rate, self._bytes, self._busy, dt)
            if self.series is not None:
                self.series.add_rates(self._t, now, np.asarray(self._rate, dtype=float))
            self._t = now

    def _active(self):
        """The active classes in row order (both forms visit them in the same order, so
        their floating-point sums agree to the bit)."""
        if self._act_arr is None:
            self._act_arr = np.flatnonzero(self._n > 0) if self.compiled else sorted(self._act)
        return self._act_arr

    def _run_deferred(self) -> None:
        """Call the callbacks of finished ``start_cb`` transfers (they may start new ones,
        which join this wake's solve)."""
        while self._deferred:
            done, self._deferred = self._deferred, []
            for (fn, arg), served in done:
                fn(served, arg)

    def _wake(self, gen: int) -> None:
        if gen != self._gen:
            return                              # superseded by a later request
        self._wake_at = None
        now = self.env.now
        self._advance_to(now)
        self._in_wake = True
        try:
            if self._fast:
                self._fast_due(now)
                self._run_deferred()
                if self._fast:                  # still uncontended: nothing to solve
                    if self.on_rates is not None:
                        self.on_rates(now, self._rate)
                    if self._fq:
                        self._request(self._fq[0][0])
                    return
                self._place()                   # a start contended: solve from now on
            else:
                if not self._ghosts and not self._solo_ghosts:   # (else: a group ends now)
                    end = self._commit_group(now)
                    if end > now:               # hold rates until the group's last finish
                        self._hold_until = end
                        self._run_deferred()
                        self._request(end)
                        return
                self._release_ghosts()
                self._run_deferred()
                self._place()
        finally:
            self._in_wake = False
        if not self._memo_solve():
            self._solve()
        self._last_solve_ns = now
        if self.fast_path and self._fast_ok():
            self._enter_fast(now)
            if self._fq:
                self._request(self._fq[0][0])
            return
        act = self._active()
        t = (_next_vec if not self.compiled and len(act) >= VECTOR_LOOPS else self._k["_next"])(
            act, self._top, self._V, self._crate)
        if t < INF:
            self._request(now + max(t, 0.0))

    def _memo_solve(self) -> bool:
        """A small interpreted solve (``maxmin.small_rates``: a chip's few classes), through a
        memo: its rates are a function of its inputs alone (the active classes in order, their
        rows, weights and caps, and the resources' capacities, which are only ever appended
        to), so a solve whose inputs equal an earlier one's sets that one's rates (every
        active class's and every resource's, all a solve writes) without solving; it counts
        as a solve. A chip's copies come and go in a few recurring class sets (GEMM bf16:
        15 distinct inputs in 5,409 solves; sparse MLA prefill n_q 256: 1,761 in 20,424).
        Returns False if the share must solve by ``_solve`` (not a small solve)."""
        act = self._active()
        if not 0 < len(act) <= SMALL_SOLVE or self.compiled or self._any_fcfs or self._lazy:
            return False
        w, crate = self._w, self._crate
        # a keyed class's key is (its cap, its row); a solo class (a group's) has none
        keys = tuple(map(self._cls_key.__getitem__, act))
        if None in keys:
            return False
        key = (len(self._cap), tuple(act), keys, tuple([tuple(w[c]) for c in act]))
        memo = self._memo
        got = memo.get(key)
        if got is None:
            self._solve()
            if len(memo) >= SMALL_MEMO:
                memo.clear()                        # (bounded memory; same rates either way)
            memo[key] = (tuple([crate[c] for c in act]), tuple(self._rate))
            return True
        rates, res = got
        for c, x in zip(act, rates):
            crate[c] = x
        self._rate[:] = res
        self.recomputes += 1
        if self.on_rates is not None:
            self.on_rates(self.env.now, self._rate)
        return True

    # -- the uncontended fast path -------------------------------------------------------------
    # While every live transfer runs at its cap (no resource is asked for more than its
    # capacity), max-min sharing has nothing to decide: each transfer finishes at its start +
    # size / cap. The share then keeps its transfers in one heap by finish time instead of
    # classes, and solves nothing until a start would overload a resource (or a group starts):
    # the transfers left go back into classes with what they have left, and solving resumes.
    # A solve that finds every class at its cap switches back. Same rates, so the same times
    # up to floating-point rounding (tests/engine/test_share.py compares both).

    def _fast_ok(self) -> bool:
        """After a solve: may the share run uncontended (exact mode, interpreted, no groups,
        every active class at its cap)?"""
        if self.compiled or self.batch_window_ns != 0.0 or self._live_groups or self._bulk \
                or self._ghosts or self._solo_ghosts or self._pending_groups or self._group_batch:
            return False
        act = self._active()
        if not len(act):
            return False
        crate, ccap = self._crate, self._ccap
        for c in act:
            if crate[c] != ccap[c]:
                return False
        return True

    def _enter_fast(self, now: float) -> None:
        """Move every member of the active classes (all at their caps) into the fast heap."""
        fq = []
        cnt = [0] * len(self._cap)
        heaps, V, crate = self._heaps, self._V, self._crate
        freed = self._active()
        for c in freed:
            key = self._cls_key[c]
            v, r = V[c], crate[c]
            for tag, seq, member, weights in heaps[c]:
                fq.append((now + (tag - v) / r, seq, member, key, weights))
            m = self._n[c]
            for x in key[1]:
                cnt[x] += m
            heaps[c] = []
            self._n[c] = 0
            del self._key2cls[key]
            self._cls_key[c] = None
            self._top[c] = INF
            self._crate[c] = 0.0
        self._free.extend(reversed(freed))         # reused lowest first, as after releases
        heapq.heapify(fq)
        self._act.clear()
        self._act_arr = None
        self._layout += 1
        self._fq, self._fcnt = fq, cnt
        self._fast = True

    def _fast_start(self, size, resources, weights, cap, member) -> bool:
        """Start a transfer uncontended if every resource it crosses has room for it at its
        cap; returns False (nothing done) if not."""
        if cap == INF:
            return False
        rate, caps = self._rate, self._cap
        for j in range(len(resources)):
            r = resources[j]
            if rate[r] + cap * weights[j] > caps[r]:
                return False
        now = self.env.now
        self._advance_to(now)
        cnt = self._fcnt
        for j in range(len(resources)):
            r = resources[j]
            rate[r] += cap * weights[j]
            cnt[r] += 1
        self._seq += 1
        fin = now + size / cap
        heapq.heappush(self._fq, (fin, self._seq, member, (cap, resources), weights))
        if not self._in_wake:
            if self.on_rates is not None:
                self.on_rates(now, rate)
            self._request(fin)
        return True

    def _fast_due(self, now: float) -> None:
        """Retire the transfers of the fast heap that are done at ``now`` (within the
        completion tolerance) and take their rates off their resources."""
        fq, rate, cnt = self._fq, self._rate, self._fcnt
        lim = now * 1e-15                       # float resolution of the clock
        while fq:
            fin, _, member, key, weights = fq[0]
            cap = key[0]
            if fin - now > lim + EPS_UNITS / cap:
                break
            heapq.heappop(fq)
            resources = key[1]
            for j in range(len(resources)):
                r = resources[j]
                cnt[r] -= 1
                if cnt[r] == 0:
                    rate[r] = 0.0               # exactly idle
                else:
                    rate[r] -= cap * weights[j]
            self._retire(member, 0.0)

    def _leave_fast(self) -> None:
        """Put the transfers of the fast heap into classes with the units they have left
        (their rates are solved at the next wake, at this instant)."""
        now = self.env.now
        self._advance_to(now)
        fq, self._fq = sorted(self._fq), []
        self._fast = False
        for fin, seq, member, key, weights in fq:
            c = self._class(key)
            tag = self._V[c] + max(fin - now, 0.0) * key[0]
            heapq.heappush(self._heaps[c], (tag, seq, member, weights))
            if self._n[c] == 0 and not self.compiled:
                self._act.add(c)
            self._n[c] += 1
            w = self._w[c]
            for j in range(len(weights)):
                w[j] += weights[j]
            if tag < self._top[c]:
                self._top[c] = tag
        self._act_arr = None
        self._layout += 1
        if fq and not self._in_wake:
            self._request(now)                  # solve them now (a wake solves anyway)

    def _place(self) -> None:
        """Put the pending starts into their classes (their finish tags on the clocks)."""
        pending, self._pending = self._pending, []
        if pending or self._pending_groups:
            self._layout += 1
        fresh, grown = [], []                       # keyed classes new / with a new member
        # (the loop runs once per start: a chip's ~100 k copies, so the rows it reads are
        # looked up once, and again after ``_class`` or ``_place_bulk``, which may replace
        # them with larger arrays once compiled)
        known, heappush, compiled = self._key2cls.get, heapq.heappush, self.compiled
        V, heaps, n, wts, top = self._V, self._heaps, self._n, self._w, self._top
        track = bool(self._cover_of) and compiled   # (``fresh`` and ``grown`` read only then)
        seq = self._seq
        for key, weights, size, member in pending:
            if key is None:                         # a group's members (``start_group``)
                self._seq = seq
                self._place_bulk(*weights, fresh, grown)
                seq = self._seq
                V, heaps, n, wts, top = self._V, self._heaps, self._n, self._w, self._top
                continue
            c = known(key)
            if c is None:
                c = self._class(key)
                V, heaps, n, wts, top = self._V, self._heaps, self._n, self._w, self._top
            seq += 1
            tag = V[c] + size
            heappush(heaps[c], (tag, seq, member, weights))
            if n[c] == 0 and not compiled:
                self._act.add(c)
            n[c] += 1
            w = wts[c]                              # the class solves with its members' sum
            for j in range(len(weights)):
                w[j] += weights[j]
            if tag < top[c]:
                top[c] = tag
            if track:
                (fresh if n[c] == 1 else grown).append(c)
        self._seq = seq
        if self._cover_of and self.compiled and pending:
            self._note_covers(np.array(fresh, dtype=np.int64), 1)
            self._note_covers(np.unique(np.array(grown, dtype=np.int64)), 0)
        groups, self._pending_groups = self._pending_groups, []
        need = sum(g[1].shape[0] for g in groups)
        if self.compiled and groups:
            # widest row first, then room for them all at once: widening copies every row,
            # so it is done before the rows are added (at EP1024, ~1 M rows copied 4 times)
            width = max(g[3].shape[1] for g in groups)
            if width > self._width:
                self._widen(width)
        if self.compiled and len(self._free) < need:    # room for them all at once
            self._grow(need - len(self._free) + len(self._cls_key) // 4 + 64)
        for gid, ks, sizes, rows, weights, caps in groups:
            self._place_group(gid, ks, sizes, rows, weights, caps)
        self._act_arr = None

    def _place_bulk(self, group, gid, ks, sizes, key, weights, lengths, fresh, grown) -> None:
        """Members ``ks`` of group ``gid`` into the keyed classes of their rows (``key``: row,
        then cap), as ``_place`` would one by one: classes made in the order their keys first
        appear, sequence numbers in member order, each class's weights summed member after
        member; the members are kept as arrays sorted by (finish tag, seq)."""
        m = ks.shape[0]
        seq = self._seq + 1 + np.arange(m)
        self._seq += m
        if (key == key[:1]).all():
            # one key (a rank's reductions of every peer's rows): np.unique over rows, which
            # sorts them as structured records, is the cost of this call at EP1024
            first, inv = np.zeros(1, dtype=np.int64), np.zeros(m, dtype=np.int64)
        else:
            _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
        inv = inv.ravel()
        caps = key[:, -1].view(float)
        for u in np.argsort(first, kind="stable").tolist():
            sel = np.flatnonzero(inv == u)
            k0 = int(sel[0])
            width = int(lengths[k0])
            c = self._class((float(caps[k0]), tuple(key[k0, :width].tolist())))
            was = self._n[c]
            tags = self._V[c] + sizes[sel]
            if was == 0 and not self.compiled:
                self._act.add(c)
            self._n[c] += sel.shape[0]
            w = self._w[c]                          # the class solves with its members' sum
            mw = weights[sel, :width]
            total = np.add.accumulate(np.vstack([np.asarray(w[:width], dtype=float), mw]), axis=0)[-1]
            for j in range(width):
                w[j] = float(total[j])
            t = float(tags.min())
            if t < self._top[c]:
                self._top[c] = t
            if was == 0:
                fresh.append(c)
            if was > 0 or sel.shape[0] > 1:
                grown.append(c)
            new = [tags, seq[sel], np.full(sel.shape, gid, dtype=np.int64), ks[sel], mw]
            old = self._bulk.get(c)
            if old is not None:
                new = [np.concatenate([a, b]) for a, b in zip(old, new)]
            order = np.lexsort((new[1], new[0]))
            self._bulk[c] = [a[order] for a in new]

    def _place_group(self, gid, ks, sizes, rows, weights, caps) -> None:
        """Solo classes for the members ``ks`` of a group (vectorized when compiled)."""
        m = sizes.shape[0]
        width = rows.shape[1]
        if not self.compiled:
            # rows stay -1 padded (the loops stop at the first -1); new rows are appended in
            # bulk, freed rows reused first
            if width > self._width:
                self._width = width
            reuse = min(len(self._free), m)
            if reuse:
                self._materialize()                 # (before reused rows are written)
                link_rows = list(map(tuple, rows[:reuse].tolist()))
                w_rows = weights[:reuse].tolist()
            ids = [self._free.pop() for _ in range(reuse)]
            for i, c in enumerate(ids):
                self._links[c], self._w[c], self._sw[c] = link_rows[i], w_rows[i], width
                self._ccap[c], self._V[c], self._crate[c] = float(caps[i]), 0.0, 0.0
                self._top[c], self._n[c] = float(sizes[i]), 1    # a new class: V = 0
                self._sg[c], self._sk[c] = gid, int(ks[i])
            first = len(self._cls_key)
            rest = m - reuse
            if rest:
                # the new rows stay arrays until a reader needs lists (``_materialize``): a
                # large group's rows are read only by the vector solve, which wants arrays
                self._links.extend([None] * rest)
                self._w.extend([None] * rest)
                self._lazy.append([first, rows[reuse:], weights[reuse:], rest])  # + rows live
                self._sw.extend([width] * rest)
                self._ccap.extend(caps[reuse:].tolist())
                self._top.extend(sizes[reuse:].tolist())
                self._sk.extend(ks[reuse:].tolist())
                for lst, v in ((self._n, 1), (self._V, 0.0), (self._crate, 0.0),
                               (self._cls_key, None), (self._sg, gid)):
                    lst.extend([v] * rest)
                self._heaps.extend([None] * rest)      # solo: no heap (its tag is _top)
            self._act.update(ids)
            self._act.update(range(first, first + rest))
            return
        if width > self._width:
            self._widen(width)
        if len(self._free) < m:
            self._grow(m - len(self._free) + len(self._cls_key) // 8 + 64)
        ids = np.array(self._free[:-m - 1:-1], dtype=np.int64)     # lowest rows first
        del self._free[-m:]
        self._links[ids] = -1
        self._links[ids, :width] = rows
        self._w[ids] = 0.0
        self._w[ids, :width] = weights
        self._sw[ids] = width
        self._ccap[ids] = caps
        self._V[ids] = 0.0
        self._crate[ids] = 0.0
        self._top[ids] = sizes
        self._n[ids] = 1
        self._sg[ids] = gid
        self._sk[ids] = ks
        self._note_covers(ids)

    def _commit_group(self, now: float) -> float:
        """Serve every member finishing within the window (their completions fire at their
        own times); returns the group's last finish (``now`` if none). Members stay in
        their classes, as ghosts, until then."""
        act = self._active()
        if len(act) == 0:
            return now
        window = self.batch_window_ns + now * 1e-15     # + float resolution of the clock
        out = self._due_buf(len(act))
        due = _due_vec if not self.compiled and len(act) >= VECTOR_LOOPS else self._k["_due"]
        k = due(act, self._top, self._V, self._crate, window, out)
        end = now
        exact = self.batch_window_ns == 0.0
        if self.compiled:
            due = out[:k]
            sg = self._sg[due]
            solo = due[sg >= 0]
            multi = due[sg < 0].tolist()
            if solo.size:
                end = max(end, self._commit_solo(solo, now, exact))
        else:
            sg = self._sg
            due = out[:k]                       # (ascending: ``_due`` visits ``act`` in order)
            if k <= SMALL_DUE and (k == 0 or max(map(sg.__getitem__, due)) < 0):
                solo, multi = (), due           # keyed classes only (a chip's few): no arrays
            else:
                gdue = np.array(_gather(sg, due), dtype=np.int64)
                if (gdue >= 0).all():
                    solo, multi, gids = due, [], gdue
                else:
                    solo = [c for c in due if sg[c] >= 0]
                    multi = [c for c in due if sg[c] < 0]
                    gids = gdue[gdue >= 0]
            if solo:
                # group members in solo classes, at once as arrays (as ``_commit_solo``): each
                # served at its own time, groups told in ascending order, members in class order
                top = self._top
                ids = np.array(solo, dtype=np.int64)
                tags = np.array(_gather(top, solo))
                if exact:
                    served = np.full(ids.shape, now)
                else:
                    v = np.array(_gather(self._V, solo))
                    r = np.array(_gather(self._crate, solo))
                    served = now + np.where(r > 0, np.maximum(tags - v, 0.0)
                                            / np.where(r > 0, r, 1.0), 0.0)
                # released before any keyed class's members (their order in the unit counters)
                self._solo_ghosts.append((ids, tags, served))
                _fill(top, solo, INF)
                order = np.argsort(gids, kind="stable")
                self._groups_done(gids[order], np.array(_gather(self._sk, solo), dtype=np.int64)[order],
                                  served[order])
                end = max(end, float(served.max()))
        heappop, deferred, ghosts = heapq.heappop, self._deferred, self._ghosts
        for c in multi:
            heap, v, r = self._heaps[c], self._V[c], self._crate[c]
            lim = v + r * window + EPS_UNITS + EPS_REL * v
            bulk = self._bulk.get(c)
            if bulk is not None:
                nb = int(np.searchsorted(bulk[0], lim, side="right"))
                if nb and heap and heap[0][0] <= lim:
                    # members of both kinds due: let the heap order them all (rare)
                    for i in range(nb):
                        heapq.heappush(heap, (float(bulk[0][i]), int(bulk[1][i]),
                                              (self._groups[bulk[2][i]], int(bulk[3][i])),
                                              tuple(bulk[4][i].tolist())))
                elif nb:
                    end = max(end, self._commit_bulk(c, [a[:nb] for a in bulk], now, exact))
                if nb:
                    bulk = [a[nb:] for a in bulk]
                    self._bulk[c] = bulk if bulk[0].shape[0] else None
                    if self._bulk[c] is None:
                        del self._bulk[c]
            while heap and heap[0][0] <= lim:
                tag, _, member, mw = heappop(heap)
                # W = 0: whatever is left is below the clock's resolution: served now
                served_in = 0.0 if exact else (max(tag - v, 0.0) / r if r > 0 else 0.0)
                if type(member) is tuple and type(member[0]) is not Group:
                    # ``_retire`` of a ``start_cb`` transfer written out (a chip's copies)
                    self.transfers_done += 1
                    served = now + served_in
                    if served > self.last_served_ns:
                        self.last_served_ns = served
                    deferred.append((member, served))
                else:
                    self._retire(member, served_in)
                ghosts.append((c, tag, now + served_in, mw))
                if now + served_in > end:
                    end = now + served_in
            top = heap[0][0] if heap else INF
            bulk = self._bulk.get(c)
            if bulk is not None and bulk[0][0] < top:
                top = float(bulk[0][0])
            self._top[c] = top
        if self._group_batch:
            batch, self._group_batch = self._group_batch, {}
            gids = sorted(batch)
            ks = [np.concatenate(batch[g][1]).astype(np.int64) for g in gids]
            self.transfers_done -= sum(k.shape[0] for k in ks)   # counted already
            self._groups_done(np.repeat(np.array(gids, dtype=np.int64), [k.shape[0] for k in ks]),
                              np.concatenate(ks),
                              np.concatenate([np.concatenate(batch[g][2]) for g in gids])
                              .astype(float))
        return end

    def _commit_bulk(self, c: int, due: list, now: float, exact: bool) -> float:
        """Serve the due group members ``due`` (bulk arrays, in order) of keyed class c, as
        the heap loop of ``_commit_group`` would one by one; returns their last finish."""
        tags, _, gids, ks, mw = due
        v, r = self._V[c], self._crate[c]
        if exact or not r > 0:
            served = np.full(tags.shape, now)
        else:
            served = now + np.maximum(tags - v, 0.0) / r
        self.transfers_done += tags.shape[0]
        m = float(served.max())
        if m > self.last_served_ns:
            self.last_served_ns = m
        for g in np.unique(gids).tolist():
            sel = gids == g
            got = self._group_batch.setdefault(g, (self._groups[g], [], []))
            got[1].append(ks[sel])
            got[2].append(served[sel])
        self._ghosts.append((None, c, tags, served, mw))
        return m

    def _commit_solo(self, solo: np.ndarray, now: float, exact: bool) -> float:
        """Compiled mode: serve the due solo classes ``solo`` at once; returns their last
        finish."""
        tags = self._top[solo]
        if exact:
            served = np.full(solo.shape, now)
        else:
            v, r = self._V[solo], self._crate[solo]
            served = now + np.where(r > 0, np.maximum(tags - v, 0.0) / np.where(r > 0, r, 1.0), 0.0)
        self._solo_ghosts.append((solo, tags, served))
        self._top[solo] = INF
        gids = self._sg[solo]
        order = np.argsort(gids, kind="stable")
        self._groups_done(gids[order], self._sk[solo[order]], served[order])
        return float(served.max())

    def _release_ghosts(self) -> None:
        """Drop finished members from their classes and take back the units they were
        credited with after their finish (their share idled meanwhile)."""
        self._hold_until = None
        if not self._ghosts and not self._solo_ghosts:
            return
        now = self.env.now
        ghosts, self._ghosts = self._ghosts, []
        solos, self._solo_ghosts = self._solo_ghosts, []
        if self.compiled:
            width = self._width
            # a solo class's member weights are its row: gathered into ``mw`` below, once
            parts = [(c, t, sv, None) for c, t, sv in solos]
            singles = []                                # a run of one-member ghosts

            def flush():
                if singles:
                    mw = np.zeros((len(singles), width))
                    for i, g in enumerate(singles):
                        mw[i, :len(g[3])] = g[3]
                    parts.append((np.array([g[0] for g in singles], dtype=np.int64),
                                  np.array([g[1] for g in singles]),
                                  np.array([g[2] for g in singles]), mw))
                    singles.clear()
            for g in ghosts:
                if g[0] is None:                        # group members of a keyed class
                    flush()
                    _, c, t, sv, m = g
                    mw = np.zeros((t.shape[0], width))
                    mw[:, :m.shape[1]] = m
                    parts.append((np.full(t.shape, c, dtype=np.int64), t, sv, mw))
                else:
                    singles.append(g)
            flush()
            # (memory: a release can hold most classes of a large run, so no array of it is
            # built twice and the series' spans are scaled in place)
            cs = np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)
            tags = np.concatenate([p[1] for p in parts]).astype(float, copy=False)
            served = np.concatenate([p[2] for p in parts]).astype(float, copy=False)
            mw = np.empty((cs.shape[0], width))
            o = 0
            for p in parts:
                k = p[0].shape[0]
                if p[3] is None:
                    np.take(self._w, p[0], axis=0, out=mw[o:o + k])
                else:
                    mw[o:o + k] = p[3]
                o += k
            del parts
            over = np.zeros(cs.shape[0])
            self._k["_release"](cs, tags, mw, self._V, self._links, self._w, self._bytes,
                                self._n, over)
            if self.series is not None and (over > 0).any():
                m = over > 0
                if m.all():
                    rows, t0, units = self._links[cs], served, mw
                    units *= over[:, None]
                else:
                    rows, t0, units = self._links[cs[m]], served[m], mw[m]
                    units *= over[m][:, None]
                del mw
                np.negative(units, out=units)           # = -(weight x over), as before
                self.series.add_spans(t0, now, rows, units)
                del rows, t0, units
            if (self._n[cs] > 0).any():                 # a keyed class changed its weights
                self._layout += 1
            freed = np.unique(cs[self._n[cs] == 0])
            self._note_covers(freed, -1)
            keyed = freed[self._sg[freed] < 0]          # solo classes have no key
            for c in keyed.tolist():
                self._bulk.pop(c, None)
            self._top[freed] = INF
            self._crate[freed] = 0.0
            self._sg[freed] = -1
            for c in keyed.tolist():
                if self._cls_key[c] is not None:
                    del self._key2cls[self._cls_key[c]]
                    self._cls_key[c] = None
            self._free.extend(freed[::-1].tolist())
            if self._act_arr is not None and freed.size:   # classes only left
                self._act_arr = np.delete(self._act_arr, np.searchsorted(self._act_arr, freed))
            return
        freed_solo, spans, solo_range = [], None, False
        if solos:                                       # solo classes of groups (``_commit_group``)
            freed_solo, spans, solo_range = self._release_solos(solos)
        cs = [g[0] for g in ghosts]
        if None in cs:                                  # expand group members of keyed classes
            ghosts = [e for g in ghosts for e in (
                zip([g[1]] * g[2].shape[0], g[2].tolist(), g[3].tolist(),
                    map(tuple, g[4].tolist())) if g[0] is None else (g,))]
            cs = [g[0] for g in ghosts]
        # (lists, not ``zip(*ghosts)``: that holds the argument tuple and four result tuples of
        # every ghost at once, ~0.2 GB more at EP2048's peak)
        tags = [g[1] for g in ghosts]
        mws = [g[3] for g in ghosts]
        over = [0.0] * len(cs)
        self._k["_release"](cs, tags, mws, self._V, self._links, self._w, self._bytes, self._n,
                            over)
        if self.series is not None and (spans or any(o > 0.0 for o in over)):
            # one call for all (the solo members first, as they were served first)
            t0, links, ws, overs = spans or ([], [], [], [])
            for i, o in enumerate(over):
                if o > 0.0:
                    t0.append(ghosts[i][2])
                    links.append(self._links[cs[i]])
                    ws.append(mws[i])
                    overs.append(o)
            width = max(len(x) for x in links)
            rows = np.array([tuple(x) + (-1,) * (width - len(x)) for x in links], dtype=np.int64)
            w = np.array([tuple(x) + (0.0,) * (width - len(x)) for x in ws])
            self.series.add_spans(np.array(t0), now, rows, -(w * np.array(overs)[:, None]))
        n = self._n
        if any(n[c] > 0 for c in cs):                  # a class kept members: new weights
            self._layout += 1
        freed = {c for c in cs if n[c] == 0}
        for c in freed:
            self._bulk.pop(c, None)
            if self._cls_key[c] is not None:
                del self._key2cls[self._cls_key[c]]
                self._cls_key[c] = None
            self._top[c] = INF
            self._crate[c] = 0.0
            self._sg[c] = -1
        self._act.difference_update(freed)
        if freed_solo:                                  # no key, no bulk; tags already inf
            if solo_range:                              # (ascending: ``_fill`` may slice)
                _fill(self._crate, freed_solo, 0.0)
                _fill(self._sg, freed_solo, -1)
            else:
                crate, sg = self._crate, self._sg
                for c in freed_solo:
                    crate[c] = 0.0
                    sg[c] = -1
            if len(freed_solo) == len(self._act):      # (distinct active classes: all of them)
                self._act.clear()
            else:
                self._act.difference_update(freed_solo)
            if freed:
                freed.update(freed_solo)
            else:                                       # distinct: sorted as their set would be
                freed = freed_solo
        self._free.extend(sorted(freed, reverse=True))
        self._act_arr = None

    def _release_solos(self, solos: list):
        """Interpreted mode: release the members of solo classes ``solos`` ((classes, tags,
        served_ns) arrays, in the order they were served), as ``_release`` would one by one:
        a member's weights are its class's row (unchanged since it was served); only members
        credited past their finish change the unit counters (in member order); each class
        empties (its row is rebuilt when it is reused). Returns the classes, for the series
        the past-credited members' (served_ns, rows, weights, units over) lists (None if none
        or no series), and whether the classes are one ascending range."""
        ids = np.concatenate([p[0] for p in solos]) if len(solos) > 1 else solos[0][0]
        tags = np.concatenate([p[1] for p in solos]) if len(solos) > 1 else solos[0][1]
        served = np.concatenate([p[2] for p in solos]) if len(solos) > 1 else solos[0][2]
        cs = ids.tolist()
        n = self._n
        ov = np.array(_gather(self._V, cs)) - tags
        past = np.flatnonzero(ov > 0.0).tolist()
        spans = None
        if past:
            over = ov.tolist()
            if self._lazy:
                self._materialize()
            links, w = self._links, self._w
            res_bytes = self._bytes
            for i in past:
                o = over[i]
                row, wr = links[cs[i]], w[cs[i]]
                for j in range(len(row)):
                    r = row[j]
                    if r < 0:
                        break
                    res_bytes[r] -= wr[j] * o
            if self.series is not None:
                spans = ([float(served[i]) for i in past], [links[cs[i]] for i in past],
                         [tuple(w[cs[i]]) for i in past], [over[i] for i in past])
        span = _span(cs) is not None and bool((np.diff(ids) > 0).all())
        if span:                                # the classes are the range cs[0] .. cs[-1]
            n[cs[0]:cs[-1] + 1] = [x - 1 for x in n[cs[0]:cs[-1] + 1]]
        else:
            for c in cs:
                n[c] -= 1
        if self._lazy:                          # drop the blocks whose rows all left
            for b in self._lazy:
                b[3] -= int(np.count_nonzero((ids >= b[0]) & (ids < b[0] + b[1].shape[0])))
            self._lazy = [b for b in self._lazy if b[3] > 0]
        return cs, spans, span

    def _solve(self) -> None:
        self.recomputes += 1
        act = self._active()
        block = None
        if self._lazy and len(act):
            if len(act) * self._width >= VECTOR_SOLVE and (self._any_fcfs or len(act) > SMALL_SOLVE):
                block = self._lazy_block(act)   # the vector solve reads them as arrays
            if block is None:
                self._materialize()
        if len(act) == 0:
            for r in range(len(self._rate)):
                self._rate[r] = 0.0
        elif not self.compiled and not self._any_fcfs and len(act) <= SMALL_SOLVE:
            if maxmin.small_rates(act, self._links, self._w, self._ccap, self._cap, self._crate,
                                  self._rate):
                raise ValueError("unbounded rates: a transfer crosses no limited resource and "
                                 "has no cap (a first-come-first-served resource does not bound "
                                 "its users by itself)")
        elif not self.compiled and len(act) * self._width >= VECTOR_SOLVE:
            # one large solve, interpreted: numpy (same rates up to rounding, maxmin)
            if maxmin.vector_rates(act, self._links, self._w, self._sw, self._ones(), self._ccap,
                                   self._cap, self._fcfs, self._any_fcfs, self._skip,
                                   self._crate, self._rate, block):
                raise ValueError("unbounded rates: a transfer crosses no limited resource and "
                                 "has no cap (a first-come-first-served resource does not bound "
                                 "its users by itself)")
            self._work += len(act) * self._width
            if self._work > COMPILE_AFTER:
                self._compile()
        else:
            err, self._scratch = maxmin.solve(
                self._solve_fn, (act, self._links, self._w, self._sw, self._ones(), self._ccap,
                                 self._cap, self._fcfs, self._any_fcfs, self._skip, self._crate,
                                 self._rate, self._layout),
                self._scratch_for(len(self._n)), self.compiled)
            if err:
                raise ValueError("unbounded rates: a transfer crosses no limited resource and "
                                 "has no cap (a first-come-first-served resource does not bound "
                                 "its users by itself)")
            if not self.compiled:
                inc = len(act) * self._width
                if inc >= COMPILE_MIN:          # small solves stay interpreted
                    self._work += inc
                if self._work > COMPILE_AFTER:
                    self._compile()
        if self.on_rates is not None:
            self.on_rates(self.env.now, self._rate)

    # -- class rows ----------------------------------------------------------------------------------
    def _class(self, key) -> int:
        """The row of the class of ``key`` = (cap, resources), a new one if none. Transfers
        with the same resources and cap always get the same rate whatever their weights
        (they rise together and stop at the same resource), so a class solves as one with
        the sum of its members' weights: exact, and one class for, e.g., a rank's
        reductions of every peer's rows."""
        c = self._key2cls.get(key)
        if c is not None:
            return c
        cap, resources = key
        width = len(resources)
        if self.compiled:
            if width > self._width:
                self._widen(width)
            if not self._free:
                self._grow(max(64, len(self._cls_key) // 8))
            c = self._free.pop()
            self._links[c] = -1
            self._links[c, :width] = resources
            self._w[c] = 0.0
        else:
            if width > self._width:
                self._width = width
            if self._free:
                if self._lazy:
                    self._materialize()         # (before a reused row is written)
                c = self._free.pop()
                self._links[c], self._w[c] = resources, [0.0] * width
            else:
                c = len(self._cls_key)
                self._links.append(resources)
                self._w.append([0.0] * width)
                self._sw.append(width)
                for lst, v in ((self._ccap, 0.0), (self._n, 0), (self._V, 0.0),
                               (self._crate, 0.0), (self._top, INF), (self._cls_key, None),
                               (self._sg, -1), (self._sk, 0)):
                    lst.append(v)
                self._heaps.append(None)
        self._sw[c] = width                     # a keyed class keeps its row order
        if self._heaps[c] is None:
            self._heaps[c] = []
        self._ccap[c] = cap
        self._V[c] = 0.0
        self._crate[c] = 0.0
        self._top[c] = INF
        self._cls_key[c] = key
        self._key2cls[key] = c
        return c

    def _widen(self, width: int) -> None:
        """Compiled mode: room for classes crossing ``width`` resources."""
        pad = width - self._width
        self._links = np.hstack([self._links, np.full((self._links.shape[0], pad), -1, LINK)])
        self._w = np.hstack([self._w, np.zeros((self._w.shape[0], pad))])
        self._width = width

    def _grow(self, grow: int) -> None:
        """Compiled mode: add ``grow`` free class rows (popped lowest first)."""
        start = self._links.shape[0]
        self._links = np.vstack([self._links, np.full((grow, self._width), -1, LINK)])
        self._w = np.vstack([self._w, np.zeros((grow, self._width))])
        for name, fill in (("_ccap", 0.0), ("_V", 0.0), ("_crate", 0.0), ("_top", INF)):
            setattr(self, name, np.concatenate([getattr(self, name), np.full(grow, fill)]))
        self._n = np.concatenate([self._n, np.zeros(grow, dtype=np.int64)])
        self._sw = np.concatenate([self._sw, np.zeros(grow, dtype=np.int64)])
        self._sg = np.concatenate([self._sg, np.full(grow, -1, dtype=np.int64)])
        self._sk = np.concatenate([self._sk, np.zeros(grow, dtype=np.int64)])
        self._unc = np.concatenate([self._unc, np.zeros(grow, dtype=np.bool_)])
        self._cls_key.extend([None] * grow)
        self._heaps.extend([None] * grow)           # a heap only for a keyed class
        # popped after the rows already free, lowest first: as the interpreted form, which
        # reuses freed rows before it appends new ones (same rows, same results)
        self._free[:0] = range(start + grow - 1, start - 1, -1)
        self._act_arr = None

    def compile_now(self) -> None:
        """Run the compiled loops from now on (a caller that knows its run is long saves the
        interpreted solves before the automatic switch); no-op without numba."""
        if not self.compiled:
            if self._fast:
                self._leave_fast()
            self._compile()

    def _compile(self) -> None:
        """Move the class rows into numpy arrays and run the compiled loops (same results)."""
        fns = maxmin.compiled()
        from simnode.engine.jit import compile_functions
        self._materialize()
        kern = compile_functions(_KERNELS, _KERNEL_CONSTANTS)
        if fns is None or kern is None:
            self._work = -INF                   # numba missing: stay interpreted
            return
        rows = len(self._cls_key)
        width = self._width
        links = np.full((rows, width), -1, dtype=LINK)
        w = np.zeros((rows, width))
        for c in range(rows):
            m = len(self._links[c]) if self._links[c] is not None else 0   # (None: a free row)
            if m:
                links[c, :m] = self._links[c]
                w[c, :m] = self._w[c]
        self._links, self._w = links, w
        self._ccap = np.asarray(self._ccap, dtype=float)
        self._n = np.asarray(self._n, dtype=np.int64)
        self._sw = np.full(rows, width, dtype=np.int64)
        self._sg = np.asarray(self._sg, dtype=np.int64)
        self._sk = np.asarray(self._sk, dtype=np.int64)
        self._unc = np.zeros(rows, dtype=np.bool_)     # per class: crosses a resource uncovered
        if self.series is not None:
            self.series.use_compiled()
        for name in ("_V", "_crate", "_top", "_cap", "_bytes", "_busy", "_rate"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=float))
        self._fcfs = np.asarray(self._fcfs, dtype=np.bool_)
        self._skip = np.asarray(self._skip, dtype=np.bool_)
        # ghosts (members done, waiting for release) keep their weight rows as they are
        self._act = None
        self._act_arr = None
        self._k = kern
        self._solve_fn = fns
        self._one = None
        self.compiled = True
        self._note_covers(np.flatnonzero(self._n > 0))

    def _scratch_for(self, rows: int):
        """Scratch buffers of the solver, sized for ``rows`` classes (kept between solves;
        ``maxmin.solve`` grows its per-incidence part as needed)."""
        s = self._scratch
        nres = len(self._cap)
        if s is None or not s.fits(nres, rows, self.compiled):
            slots, blocks = (s.slots, s.blocks) if s is not None else (0, 0)
            # the old buffers go before the new ones are made (a large run's are ~100 B per
            # class: both at once would be the run's peak)
            s = self._scratch = None
            s = maxmin.scratch(nres, rows, slots, blocks, self.compiled)
        # handed over: ``maxmin.solve`` returns it, or larger buffers that replace it
        self._scratch = None
        return s

    def _materialize(self) -> None:
        """Interpreted: make the rows still held as group arrays (``_lazy``) lists, as
        ``_place_group`` made them before it deferred this (the same values)."""
        for first, rows, w, _ in self._lazy:
            stop = first + rows.shape[0]
            self._links[first:stop] = map(tuple, rows.tolist())
            self._w[first:stop] = w.tolist()
        self._lazy = []

    def _lazy_block(self, act):
        """The (rows, weights) arrays of the active classes ``act`` (sorted) if they are
        exactly the rows of one lazy block, else None."""
        if len(self._lazy) != 1:
            return None
        first, rows, w, _ = self._lazy[0]
        m = rows.shape[0]
        if len(act) != m or act[0] != first or act[-1] != first + m - 1:
            return None                         # (sorted, distinct: then act is that range)
        return rows, w

    def _ones(self):
        """The solver's multiplicity per class: 1 (a class's weights sum its members')."""
        rows = len(self._n)
        if self._one is None or len(self._one) < rows:
            self._one = np.ones(rows) if self.compiled else [1.0] * rows
        return self._one

    def _due_buf(self, n: int):
        """Room for ``n`` class ids (``_due`` writes the first k it returns; the rest is never
        read). Compiled: one buffer kept and grown, not a fresh [active classes] array per
        wake (a large run's ~1 M classes: 8 MB zeroed at every completion)."""
        if not self.compiled:
            return [0] * n
        buf = self._due_scratch
        if buf is None or buf.shape[0] < n:
            buf = self._due_scratch = np.empty(max(n, 1024), dtype=np.int64)
        return buf
