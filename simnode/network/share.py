"""Max-min fair sharing of many resources by many transfers, solved with numpy, batched.

``BatchedShare(env, batch_window_ns=...)`` has the interface of
``simnode.engine.fluid.FluidShare``: ``add_resource(name, capacity_GBps) -> int`` and
``start(size_bytes, resources, cap_GBps) -> event``, plus ``names``, ``capacity``,
``bytes_by_resource``, ``busy_ns``, ``current_rate``, ``recomputes`` and an
``on_rates(now_ns, rates)`` hook. It is the engine under ``FlowNetwork``, built for
10^4 concurrent transfers over thousands of links.

Model. Transfers with the same (cap, resources, weights) form a class and always
get the same rate; the solver (``simnode.network.solver.max_min_rates``) works on
classes. Within a class a virtual clock (bytes served per member) and a heap of
finish tags order completions. A transfer with weights uses ``weight x rate`` of a
resource (e.g. payload bytes on an HBM port while the rate counts wire bytes).

Batching (``batch_window_ns`` = W). Rates are recomputed when transfers start or
end, but at most about once per W, and never so that a resource serves more than
its capacity:
- ends: at the first completion t1 after a solve, every transfer that finishes in
  [t1, t1 + W] at the current rates forms a group; each group member's events fire at
  its own exact finish time, but the group is retired, and rates recomputed, only at
  the group's last finish: until then members keep their share (it idles);
- starts: a start is solved at once if it comes at the instant of the last solve or
  more than W after it; otherwise it waits for the next solve (at most W; a start
  during a group waits for the group's end) at rate 0.
So each transfer may start up to W late and hold its share up to W after its end:
the error is bounded by W per event, and is pessimistic (a resource may idle, but is
never over-used; the simulated time of a saturated resource is >= bytes / capacity).
W = 0 is exact (every start or end is solved at its own instant; starts at one instant
are solved together). Choose W well below a typical transfer's duration.

Arbitration. Resources share max-min fairly (a small user keeps its full demand), except
those marked first-come-first-served (``add_resources(..., fcfs=True)``): a memory
controller that queues requests in arrival order serves overloaded users in proportion
to the load they offer (``simnode.network.solver.fcfs_max_min_rates``: two max-min
passes; a class on FCFS resources must also cross another resource or have a cap).

Every transfer returns a ``Transfer`` event: it fires ``latency_ns`` after its last
byte was served; ``transfer.injected`` fires when the last byte was served.
"""

from __future__ import annotations

import heapq
from typing import Callable

import numpy as np
import simpy
from simpy.events import NORMAL

from simnode.network.series import BinnedSeries
from simnode.network.solver import fcfs_max_min_rates, max_min_rates

_EPS_BYTES = 1e-6         # completion tolerance in bytes (as simnode.engine.fluid)
_EPS_REL = 1e-12          # ... plus this share of the bytes already served


class _Delayed(simpy.Event):
    """An event that can be triggered to fire after a delay (as ``simpy.Timeout`` does)."""

    def fire_in(self, delay_ns: float, value=None) -> None:
        self._ok = True
        self._value = value
        self.env.schedule(self, NORMAL, delay_ns)


class Transfer(_Delayed):
    """A transfer's completion event: fires ``latency_ns`` after its last byte is served.

    ``value`` is the ``tag`` given at start. ``injected`` is an event that fires when the
    last byte has been served (left the sender); it is created only if asked for.
    """

    def __init__(self, env: simpy.Environment, size_bytes: float, latency_ns: float, tag=None,
                 src=None, dst=None, payload_bytes=None):
        super().__init__(env)
        self.size_bytes = size_bytes        #: bytes the resources serve (wire bytes for a send)
        self.payload_bytes = size_bytes if payload_bytes is None else payload_bytes
        self.src = src                      #: sending rank (None for a plain ``start``)
        self.dst = dst                      #: receiving rank
        self.latency_ns = latency_ns        #: delay from last byte served to the event firing
        self.tag = tag
        self.start_ns = env.now             #: time it was started
        self.served_ns: float | None = None   #: time its last byte was served
        self._injected: _Delayed | None = None
        # simpy sets _ok only when the event fires; a key added after the others makes
        # CPython give the instance its own dict (~0.7 KB each, 1M live transfers at EP1024)
        self._ok = True

    @property
    def injected(self) -> simpy.Event:
        if self._injected is None:
            self._injected = _Delayed(self.env)
            if self.served_ns is not None:      # already finished: fire at its served time
                self._injected.fire_in(max(self.served_ns - self.env.now, 0.0), self.tag)
        return self._injected

    def _finish(self, served_in_ns: float) -> None:
        """Called when the last byte is ``served_in_ns`` from now: schedule both events."""
        served_in_ns = float(served_in_ns)
        self.served_ns = self.env.now + served_in_ns
        self.fire_in(served_in_ns + self.latency_ns, self.tag)
        if self._injected is not None:
            self._injected.fire_in(served_in_ns, self.tag)


class BatchedShare:
    """Transfers sharing resources max-min fairly, batched; see the module docstring."""

    def __init__(self, env: simpy.Environment, batch_window_ns: float = 0.0,
                 util_max_bins: int = 256, util_bin_ns: float = 1000.0,
                 on_rates: Callable | None = None):
        if batch_window_ns < 0:
            raise ValueError(f"batch_window_ns must be >= 0, not {batch_window_ns}")
        self.env = env
        self.batch_window_ns = float(batch_window_ns)
        self.on_rates = on_rates            #: callback(now_ns, rates array) after each solve
        self.on_served: Callable | None = None  #: callback(transfer) once its finish time is known
        self.last_served_ns = 0.0           #: latest time a last byte was served
        self.names: list[str] = []
        self._cap = np.zeros(0)
        self._fcfs = np.zeros(0, dtype=bool)     # first-come-first-served resources
        self._bytes = np.zeros(0)
        self._busy = np.zeros(0)
        self._rate = np.zeros(0)            # per resource, bytes/ns now
        self.series = BinnedSeries(0, util_max_bins, util_bin_ns)
        self.recomputes = 0                 #: solver runs
        self.transfers_started = 0
        self.transfers_done = 0
        # classes, in slots of growable arrays; a slot is reused once its class empties
        self._key2cls: dict = {}
        self._cls_key: list = []
        self._heaps: list[list] = []
        self._free: list[int] = []
        self._links = np.full((0, 1), -1, dtype=np.int64)   # [class, slot] resource ids
        self._w = np.zeros((0, 1))
        self._ccap = np.zeros(0)
        self._n = np.zeros(0, dtype=np.int64)
        self._V = np.zeros(0)               # bytes served per member at self._t_solve
        self._crate = np.zeros(0)
        self._top = np.zeros(0)             # smallest finish tag of the class (inf if none)
        self._pending: list = []            # (key, size, transfer) waiting for the next solve
        self._ghosts: list = []             # (class, finish tag): finished, still holding a share
        self._hold_until: float | None = None   # end of the current completion group
        self._t_solve = 0.0                 # time V and the byte counters are advanced to
        self._last_solve_ns = -np.inf
        self._wake_at: float | None = None
        self._gen = 0
        self._seq = 0

    # -- FluidShare interface ------------------------------------------------------------------
    def add_resource(self, name: str, capacity_GBps: float) -> int:
        """Add a resource of ``capacity_GBps`` (bytes/ns); returns its id."""
        return self.add_resources([name], [capacity_GBps])[0]

    def add_resources(self, names: list[str], capacities_GBps, fcfs: bool = False) -> list[int]:
        """Add several resources at once (one array growth); returns their ids. ``fcfs``:
        they serve overloaded users in proportion to their offered load (module docstring)."""
        caps = np.asarray(capacities_GBps, dtype=float)
        if caps.shape != (len(names),):
            raise ValueError("one capacity per resource name is needed")
        bad = np.flatnonzero(~(caps > 0))
        if bad.size:
            raise ValueError(f"resource {names[bad[0]]!r}: capacity_GBps must be > 0, "
                             f"not {caps[bad[0]]}")
        first = len(self.names)
        self.names.extend(names)
        zeros = np.zeros(len(names))
        self._cap = np.concatenate([self._cap, caps])
        self._fcfs = np.concatenate([self._fcfs, np.full(len(names), bool(fcfs))])
        self._bytes = np.concatenate([self._bytes, zeros])
        self._busy = np.concatenate([self._busy, zeros])
        self._rate = np.concatenate([self._rate, zeros])
        self.series.grow(len(self.names))
        return list(range(first, len(self.names)))

    def start(self, size_bytes: float, resources: tuple, cap_GBps: float = float("inf")):
        """Begin a transfer of ``size_bytes`` over ``resources`` at most ``cap_GBps``."""
        return self._start(size_bytes, tuple(resources), None, cap_GBps, 0.0, None)

    def start_weighted(self, size_bytes: float, resources: tuple, weights: tuple,
                       cap_GBps: float = float("inf")):
        """As ``start``, but the transfer uses ``weights[i] x rate`` of ``resources[i]`` (e.g.
        ns of engine time or HBM bytes per byte of the transfer)."""
        return self._start(size_bytes, tuple(resources), tuple(float(w) for w in weights),
                           cap_GBps, 0.0, None)

    @property
    def capacity(self) -> np.ndarray:
        return self._cap

    @property
    def bytes_by_resource(self) -> np.ndarray:
        """Bytes each resource has served up to the last solve (call ``sync()`` for now)."""
        return self._bytes

    @property
    def busy_ns(self) -> np.ndarray:
        return self._busy

    @property
    def current_rate(self) -> np.ndarray:
        return self._rate

    def sync(self) -> None:
        """Bring byte counters and series up to ``env.now`` (rates unchanged)."""
        self._advance(self.env.now)

    # -- internals -----------------------------------------------------------------------------
    def _start(self, size_bytes, resources, weights, cap_GBps, latency_ns, tag,
               src=None, dst=None, payload_bytes=None) -> Transfer:
        if size_bytes < 0:
            raise ValueError(f"size_bytes must be >= 0, not {size_bytes}")
        if not cap_GBps > 0:
            raise ValueError(f"cap_GBps must be > 0, not {cap_GBps}")
        if resources and (min(resources) < 0 or max(resources) >= len(self.names)):
            raise ValueError(f"unknown resource id in {resources}")
        tr = Transfer(self.env, size_bytes, latency_ns, tag, src, dst, payload_bytes)
        self.transfers_started += 1
        if size_bytes == 0 or (not resources and cap_GBps == float("inf")):
            self._retire(tr, 0.0 if cap_GBps == float("inf") else size_bytes / cap_GBps)
            return tr
        self._pending.append(((cap_GBps, resources, weights), size_bytes, tr))
        now, last = self.env.now, self._last_solve_ns
        # a start at the instant of the last solve (e.g. the next message of a queue whose
        # previous one was just retired) is solved at once; later ones wait for the window
        self._request(now if now == last else max(now, last + self.batch_window_ns))
        return tr

    def _retire(self, tr: Transfer, served_in_ns: float) -> None:
        tr._finish(served_in_ns)
        self.transfers_done += 1
        if tr.served_ns > self.last_served_ns:
            self.last_served_ns = tr.served_ns
        if self.on_served is not None:
            self.on_served(tr)

    def _request(self, t_ns: float) -> None:
        if self._hold_until is not None and t_ns < self._hold_until:
            t_ns = self._hold_until             # no solve while a completion group runs
        if self._wake_at is None or t_ns < self._wake_at:
            self._gen += 1
            self._wake_at = t_ns
            gen = self._gen
            self.env.timeout(float(t_ns - self.env.now)).callbacks.append(
                lambda _e: self._wake(gen))

    def _class(self, key, left: int = 1) -> int:
        """The class row of ``key``, a new one if needed; ``left``: starts still to place
        in this batch (each may need a class)."""
        c = self._key2cls.get(key)
        if c is not None:
            return c
        cap, resources, weights = key
        width = len(resources)
        if width > self._links.shape[1]:
            pad = width - self._links.shape[1]
            self._links = np.hstack([self._links,
                                     np.full((self._links.shape[0], pad), -1, np.int64)])
            self._w = np.hstack([self._w, np.zeros((self._w.shape[0], pad))])
        if not self._free:
            # grow by what the batch may still need, 1/8 spare, at most doubling: plain
            # doubling could leave half the rows unused (EP1024 combine: 2^20 pairs + a few)
            rows = self._links.shape[0]
            self._grow(max(64, min(rows, left + rows // 8)))
        c = self._free.pop()
        self._links[c] = -1
        self._links[c, :width] = resources
        self._w[c] = 0.0
        self._w[c, :width] = 1.0 if weights is None else weights
        self._ccap[c] = cap
        self._V[c] = 0.0
        self._crate[c] = 0.0
        self._top[c] = np.inf
        self._cls_key[c] = key
        self._key2cls[key] = c
        return c

    def _grow(self, grow: int) -> None:
        """Add ``grow`` free class rows (popped lowest first)."""
        start = self._links.shape[0]
        self._links = np.vstack([self._links, np.full((grow, self._links.shape[1]), -1, np.int64)])
        self._w = np.vstack([self._w, np.zeros((grow, self._w.shape[1]))])
        for name in ("_ccap", "_V", "_crate"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(grow)]))
        self._top = np.concatenate([self._top, np.full(grow, np.inf)])
        self._n = np.concatenate([self._n, np.zeros(grow, dtype=np.int64)])
        self._cls_key.extend([None] * grow)
        self._heaps.extend([] for _ in range(grow))
        self._free.extend(range(start + grow - 1, start - 1, -1))

    def _advance(self, now: float) -> None:
        dt = now - self._t_solve
        if dt > 0:
            act = self._n > 0
            self._V[act] += self._crate[act] * dt
            self._bytes += self._rate * dt
            self._busy[self._rate > 0] += dt
            self.series.add_rates(self._t_solve, now, self._rate)
            self._t_solve = now

    def _wake(self, gen: int) -> None:
        if gen != self._gen:
            return                              # superseded by a later request
        self._wake_at = None
        now = self.env.now
        self._advance(now)
        if not self._ghosts:                    # (else: a group ends now; solve first)
            end = self._commit_group(now)
            if end > now:                       # hold rates until the group's last finish
                self._hold_until = end
                self._request(end)
                return
        self._release_ghosts(now)
        left = len(self._pending)
        for key, size, tr in self._pending:
            c = self._class(key, left)
            left -= 1
            self._seq += 1
            tag = self._V[c] + size
            heapq.heappush(self._heaps[c], (tag, self._seq, tr))
            self._n[c] += 1
            if tag < self._top[c]:
                self._top[c] = tag
        self._pending.clear()
        self._solve()
        self._last_solve_ns = now
        self._schedule_next(now)

    def _commit_group(self, now: float) -> float:
        """Fire the events of every transfer finishing within the window; returns the
        group's last finish time (``now`` if none). Members become ghosts until then."""
        act = np.flatnonzero(self._n > 0)
        if act.size == 0:
            return now
        rate, V = self._crate[act], self._V[act]
        window = self.batch_window_ns + now * 1e-15     # + float resolution of the clock
        slack = rate * window + _EPS_BYTES + _EPS_REL * V
        end = now
        for c in act[self._top[act] - V <= slack].tolist():
            heap, v, r = self._heaps[c], self._V[c], self._crate[c]
            lim = v + r * window + _EPS_BYTES + _EPS_REL * v
            while heap and heap[0][0] <= lim:
                tag, _, tr = heapq.heappop(heap)
                served_in = max(tag - v, 0.0) / r if r > 0 else 0.0
                self._retire(tr, served_in)
                self._ghosts.append((c, tag, tr.served_ns))
                end = max(end, now + served_in)
            self._top[c] = heap[0][0] if heap else np.inf
        return end

    def _release_ghosts(self, now: float) -> None:
        """Retire finished transfers: drop them from their class and take back the bytes
        they were credited with after their finish (their share idled meanwhile)."""
        self._hold_until = None
        if not self._ghosts:
            return
        cs = np.fromiter((g[0] for g in self._ghosts), dtype=np.int64, count=len(self._ghosts))
        tags = np.fromiter((g[1] for g in self._ghosts), dtype=float, count=cs.size)
        served = np.fromiter((g[2] for g in self._ghosts), dtype=float, count=cs.size)
        self._ghosts.clear()
        over = np.maximum(self._V[cs] - tags, 0.0)
        rows = self._links[cs]
        m = rows >= 0
        charge = -(self._w[cs] * over[:, None])
        np.add.at(self._bytes, rows[m], charge[m])
        # the over-credit accrued evenly from each transfer's finish until now: take it back
        # from the same bins (one bin could go negative otherwise)
        for i in range(cs.size):
            self.series.add_span(float(served[i]), now, rows[i][m[i]], charge[i][m[i]])
        np.subtract.at(self._n, cs, 1)
        for c in np.unique(cs[self._n[cs] == 0]).tolist():
            del self._key2cls[self._cls_key[c]]
            self._cls_key[c] = None
            self._top[c] = np.inf
            self._crate[c] = 0.0
            self._free.append(c)

    def _solve(self) -> None:
        self.recomputes += 1
        act = np.flatnonzero(self._n > 0)
        links = self._links[act]
        w = self._w[act] * self._n[act, None]
        valid = links >= 0
        if self._fcfs.any():
            rates = fcfs_max_min_rates(links, self._cap, self._fcfs, self._ccap[act], w)
        else:
            rates = max_min_rates(links, self._cap, self._ccap[act], w)
        self._crate[act] = rates
        self._rate = np.bincount(links[valid], weights=(w * rates[:, None])[valid],
                                 minlength=len(self.names))
        if self.on_rates is not None:
            self.on_rates(self.env.now, self._rate)

    def _schedule_next(self, now: float) -> None:
        act = np.flatnonzero((self._n > 0) & (self._crate > 0))
        if act.size == 0:
            return
        t = now + max(float(((self._top[act] - self._V[act]) / self._crate[act]).min()), 0.0)
        self._request(t)
