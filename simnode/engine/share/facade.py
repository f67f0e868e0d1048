"""``Share``: the sharing engine's interface and its event loop (the package docstring tells
the model; each part's module, its job).

The loop: a start is queued (``_pending``) and a wake requested; a wake brings the classes'
clocks and the unit counters to now (``table.advance``), commits the members finishing
within the batch window (``Completions.commit``) or, at the window's last finish, releases
them (``Completions.release``), runs the callbacks of finished ``start_cb`` transfers, places
the queued starts in their classes (``table.place``), solves the rates (``table.solve``:
the backend's dispatcher) and requests the next wake at the first finish. While nothing
contends, the fast path (``FastPath``) replaces classes and solves. The class table starts
as lists and is swapped, once, for arrays with compiled loops (``_compile``).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import simpy

from simnode.engine.series import BinnedSeries
from simnode.engine.share.covers import Covers
from simnode.engine.share.events import Group, Transfer
from simnode.engine.share.fastpath import FastPath
from simnode.engine.share.groups import GroupBook, has_repeats, pack_rows
from simnode.engine.share.lists import ListTable
from simnode.engine.share.release import Completions

INF = math.inf
POLICIES = ("fair", "fcfs")


def _per_resource(column: str, doc: str) -> property:
    """A read-only property: the class table's per-resource ``column`` as a float array."""
    return property(lambda share: np.asarray(getattr(share.table, column), dtype=float), doc=doc)


class Share:
    """Transfers sharing resources max-min fairly; see the package docstring."""

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
        self.fast_path = True               #: allow the uncontended fast path (False: always solve)
        # the parts
        self.table = ListTable()            #: the class table (lists, then arrays: ``_compile``)
        self.covers = Covers()
        self.groups = GroupBook(self)
        self.completions = Completions(self)
        self.fast = FastPath()
        # the loop
        self._pending: list = []            # (key, weights, size, member) waiting for a solve
        self._pending_groups: list = []     # (group index, members, sizes, rows, weights, caps)
        self._t = 0.0                       # time the clocks and the counters are advanced to
        self._last_solve_ns = -INF
        self._wake_at: float | None = None
        self._in_wake = False
        self._gen = 0

    @property
    def compiled(self) -> bool:
        """True once the loops run compiled on arrays."""
        return self.table.compiled

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
        self.table.add_resources(caps, policy == "fcfs")
        if self.series is not None:
            self.series.grow(len(self.names))
        return list(range(first, len(self.names)))

    def cover(self, resource: int, by) -> None:
        """Declare that every transfer crossing ``resource`` (X) also crosses at least one of
        ``by`` (the Ys: max-min resources without covers of their own); once the loops run
        compiled, solves leave X out while it provably cannot fill before its Ys. Speed
        only: results are the same with or without covers (``simnode.engine.share.covers``)."""
        self.covers.declare(resource, by, self.names, self.table.fcfs)

    capacity = _per_resource("cap", "Units each resource serves per ns.")
    bytes_by_resource = _per_resource("bytes", "Units each resource has served up to the last "
                                               "solve (``sync()`` for now).")
    busy_ns = _per_resource("busy", "Time each resource has served at a rate > 0, ns.")
    current_rate = _per_resource("rate", "Units each resource serves per ns at the current rates.")

    def sync(self) -> None:
        """Bring unit counters and series up to ``env.now`` (rates unchanged)."""
        self._advance_to(self.env.now)

    def compile_now(self) -> None:
        """Run the compiled loops from now on (a caller that knows its run is long saves the
        interpreted solves before the automatic switch); no-op without numba."""
        if not self.compiled:
            if self.fast.on:
                self._leave_fast()
            self._compile()

    # -- transfers -------------------------------------------------------------------------------
    def start(self, size: float, resources: tuple, weights: tuple | None = None,
              cap: float = INF, latency_ns: float = 0.0, tag=None) -> Transfer:
        """Begin a transfer of ``size`` units over ``resources`` (``weights``: units of each
        per unit of the transfer, default 1) at most ``cap`` units/ns; returns its event."""
        tr = Transfer(self.env, size, latency_ns, tag)
        self._begin(size, tuple(resources), weights, cap, tr)
        return tr

    def start_transfer(self, tr: Transfer, resources: tuple, weights: tuple | None = None,
                       cap: float = INF) -> None:
        """``start`` for a ``Transfer`` the caller made (its ``size`` units; a message that
        carries its ranks and payload)."""
        self._begin(tr.size, resources, weights, cap, tr)

    def start_cb(self, size: float, resources: tuple, weights, cap: float, fn, arg=None) -> None:
        """As ``start``, but ``fn(served_ns, arg)`` is called when the last unit is served
        (from inside the engine, once its state is consistent) instead of firing an event."""
        self._begin(size, resources, weights, cap, (fn, arg))

    def start_keyed(self, size: float, key: tuple, weights: tuple, member: tuple) -> None:
        """``start_cb(size, key[1], weights, key[0], *member)`` for a caller that hands over
        its class key ``(cap, resources)`` and ``weights`` (floats) ready-made and valid (known
        resource ids, one positive weight each, a cap > 0): a chip's GM copies, ~100 k a
        run, skip the checks and the tuples ``_begin`` builds. The same start otherwise."""
        if size > 0 and not self.fast.on:
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
        if self.fast.on:
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
        rows, weights, used = pack_rows(rows, weights, n)
        caps = np.asarray(caps, dtype=float)
        if caps.shape != (n,):
            caps = np.broadcast_to(caps, (n,))
        if rows.size and rows.max() >= len(self.names):
            raise ValueError(f"unknown resource id in rows (max {rows.max()})")
        if (sizes < 0).any() or not (caps > 0).all():
            raise ValueError("sizes must be >= 0 and caps > 0")
        gid = self.groups.add(group)
        # nothing to serve: done at once (a cap alone serves it at that rate)
        idle = (sizes == 0) | ((used == 0) & np.isinf(caps))
        if idle.any():
            ks = np.flatnonzero(idle)
            served = self.env.now + np.where(np.isinf(caps[ks]), 0.0, sizes[ks] / caps[ks])
            self.groups.done(np.full(ks.shape, gid), ks, served)
        live = np.flatnonzero(~idle)
        if live.size:
            if live.size < n:                   # (rows and weights are this call's own arrays)
                rows, weights = rows[live], weights[live]
            key = np.concatenate([rows, caps[live][:, None].view(np.int64)], axis=1)
            if has_repeats(key):
                # members with the same resources and cap: one shared class per key, placed
                # in order with the other pending starts (``Table.place_bulk``)
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
            self.completions.retire(member, 0.0 if cap == INF else size / cap)
            if type(member) is tuple:
                self._request_start()               # its callback runs in the next wake
            return
        weights = weights or (1.0,) * len(resources)
        if self.fast.on:
            now = self.env.now
            self._advance_to(now)
            fin = self.fast.start(self.table, size, resources, weights, cap, member, now)
            if fin is not None:
                if not self._in_wake:
                    if self.on_rates is not None:
                        self.on_rates(now, self.table.rate)
                    self._request(fin)
                return
            self._leave_fast()                      # it would contend: solve from now on
        self._pending.append(((cap, resources), weights, size, member))
        if not self._in_wake:                       # (else placed by the running wake: a
            self._request_start()                   # chip's copies start there, ~100 k a run)

    # -- the loop ----------------------------------------------------------------------------------
    def _request_start(self) -> None:
        if self._in_wake:
            return                                  # placed (or held) by the running wake
        now, last = self.env.now, self._last_solve_ns
        # a start at the instant of the last solve (e.g. the next copy of a pipe whose previous
        # one was just retired) is solved at once; later ones wait for the window
        self._request(now if now == last else max(now, last + self.batch_window_ns))

    def _request(self, t_ns: float) -> None:
        hold = self.completions.hold_until
        if hold is not None and t_ns < hold:
            t_ns = hold                         # no solve while a completion group runs
        if self._wake_at is None or t_ns < self._wake_at:
            self._gen += 1
            self._wake_at = t_ns
            gen = self._gen
            wake = self.env.timeout(float(t_ns - self.env.now))
            wake.callbacks.append(lambda _e: self._wake(gen))

    def _advance_to(self, now: float) -> None:
        dt = now - self._t
        if dt > 0:
            self.table.advance(dt)
            if self.series is not None:
                self.series.add_rates(self._t, now, np.asarray(self.table.rate, dtype=float))
            self._t = now

    def _wake(self, gen: int) -> None:
        if gen != self._gen:
            return                              # superseded by a later request
        self._wake_at = None
        now = self.env.now
        self._advance_to(now)
        done, fast = self.completions, self.fast
        self._in_wake = True
        try:
            if fast.on:
                fast.due(self.table, now, done.retire)
                done.run_deferred()
                if fast.on:                     # still uncontended: nothing to solve
                    if self.on_rates is not None:
                        self.on_rates(now, self.table.rate)
                    if fast.fq:
                        self._request(fast.fq[0][0])
                    return
                self._place()                   # a start contended: solve from now on
            else:
                if not done.holding:            # (else: a commit ends now)
                    end = done.commit(self.table, now)
                    if end > now:               # hold rates until the commit's last finish
                        done.hold_until = end
                        done.run_deferred()
                        self._request(end)
                        return
                done.release(self.table)
                done.run_deferred()
                self._place()
        finally:
            self._in_wake = False
        self._solve()
        self._last_solve_ns = now
        if self.fast_path and self._fast_ok():
            fast.enter(self.table, now)
            if fast.fq:
                self._request(fast.fq[0][0])
            return
        t = self.table.next_finish()
        if t < INF:
            self._request(now + max(t, 0.0))

    def _place(self) -> None:
        """Put the queued starts into their classes."""
        pending, self._pending = self._pending, []
        groups, self._pending_groups = self._pending_groups, []
        self.table.place(pending, groups)

    def _solve(self) -> None:
        self.recomputes += 1
        if self.table.solve():                  # the list table has solved enough: compile
            self._compile()
        if self.on_rates is not None:
            self.on_rates(self.env.now, self.table.rate)

    def _fast_ok(self) -> bool:
        """After a solve: may the share run uncontended (exact mode, no groups, every active
        class at its cap)?"""
        return (self.batch_window_ns == 0.0 and not self.groups.live and not self.groups.batch
                and not self._pending_groups and not self.completions.holding
                and self.fast.may_enter(self.table))

    def _leave_fast(self) -> None:
        """Put the transfers of the fast path back into classes (solved at the next wake)."""
        now = self.env.now
        self._advance_to(now)
        if self.fast.leave(self.table, now) and not self._in_wake:
            self._request(now)                  # solve them now (a wake solves anyway)

    def _compile(self) -> None:
        """Swap the list table for the array table, the loops compiled (same results)."""
        arrays = self.table.compiled_form(self.covers)
        if arrays is not None:
            self.table = arrays
            if self.series is not None:
                self.series.use_compiled()
