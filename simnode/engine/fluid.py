"""Max-min fair bandwidth sharing among transfers (a fluid model), exact and event-driven.

A ``FluidShare`` owns named resources, each with a capacity in GB/s (= bytes/ns).
``start(size_bytes, resources, cap_GBps)`` begins a transfer that crosses every
listed resource and may not exceed its own cap (the issuing pipe's path rate); it
returns a SimPy event that fires when its last byte is through. Rates are the
max-min fair allocation (progressive filling), recomputed whenever a transfer
starts or ends.

Speed: transfers with the same (cap, resources) form a class and always get the
same rate, so the solver works on classes, not transfers (a chip has a handful);
within a class a virtual clock (bytes served per member) and a heap of finish
tags give the next completion in O(log n). One pending wake-up per share.

The same interface (``add_resource``, ``start``, ``bytes_by_resource``) is what a
network model offers, so chip traffic and network traffic can share an HBM.
"""

from __future__ import annotations

import heapq
from typing import Callable

import simpy

_EPS_BYTES = 1e-6   # completion tolerance: a transfer within this many bytes is done


class _Class:
    __slots__ = ("key", "cap", "resources", "heap", "virtual", "rate")

    def __init__(self, key, cap, resources):
        self.key = key
        self.cap = cap
        self.resources = resources
        self.heap = []          # (finish tag, seq, event)
        self.virtual = 0.0      # bytes served to each member since the class was created
        self.rate = 0.0         # bytes/ns per member


class FluidShare:
    """Transfers sharing resources max-min fairly; see the module docstring."""

    def __init__(self, env: simpy.Environment, on_rates: Callable | None = None):
        self.env = env
        self.names: list[str] = []
        self.capacity: list[float] = []
        self.bytes_by_resource: list[float] = []
        self.busy_ns: list[float] = []       # time with a non-zero rate on the resource
        self.current_rate: list[float] = []  # bytes/ns in use now
        self._classes: dict = {}
        self._active: list[_Class] = []
        self._last = 0.0
        self._seq = 0
        self._gen = 0
        self.recomputes = 0
        self.on_rates = on_rates             # callback(now_ns, rates list) for counter tracks

    def add_resource(self, name: str, capacity_GBps: float) -> int:
        self.names.append(name)
        self.capacity.append(float(capacity_GBps))
        self.bytes_by_resource.append(0.0)
        self.busy_ns.append(0.0)
        self.current_rate.append(0.0)
        return len(self.names) - 1

    def start(self, size_bytes: float, resources: tuple, cap_GBps: float = float("inf")):
        """Begin a transfer; returns an event that fires when it completes."""
        ev = self.env.event()
        if size_bytes <= 0:
            ev.succeed()
            return ev
        self._advance()
        key = (cap_GBps, resources)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = _Class(key, cap_GBps, resources)
        if not cls.heap:
            self._active.append(cls)
        self._seq += 1
        heapq.heappush(cls.heap, (cls.virtual + size_bytes, self._seq, ev))
        self._reallocate()
        return ev

    # -- internals -------------------------------------------------------------------------
    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._last
        if dt > 0:
            for cls in self._active:
                cls.virtual += cls.rate * dt
            for r, rate in enumerate(self.current_rate):
                if rate > 0:
                    self.bytes_by_resource[r] += rate * dt
                    self.busy_ns[r] += dt
        self._last = now

    def _reallocate(self) -> None:
        """Progressive filling over classes, then schedule the next completion."""
        self.recomputes += 1
        if len(self._active) == 1:          # one class (the common case): its bottleneck share
            cls = self._active[0]
            n = len(cls.heap)
            cls.rate = min([cls.cap] + [self.capacity[r] / n for r in cls.resources])
            rates = [0.0] * len(self.capacity)
            for r in cls.resources:
                rates[r] = cls.rate * n
            self._publish(rates)
            return
        remaining = list(self.capacity)
        users = [0] * len(remaining)
        todo = []
        for cls in self._active:
            n = len(cls.heap)
            todo.append((cls, n))
            for r in cls.resources:
                users[r] += n
        while todo:
            level = min(c.cap for c, _ in todo)
            for r, u in enumerate(users):
                if u:
                    share = remaining[r] / u
                    if share < level:
                        level = share
            keep, frozen = [], []
            for cls, n in todo:
                saturated = cls.cap <= level * (1 + 1e-12) or any(
                    users[r] and remaining[r] / users[r] <= level * (1 + 1e-12) for r in cls.resources)
                (frozen if saturated else keep).append((cls, n))
            if not frozen:                  # numerical safety: freeze everything
                frozen, keep = keep, []
            for cls, n in frozen:
                cls.rate = level
                for r in cls.resources:
                    remaining[r] -= level * n
                    users[r] -= n
            todo = keep
        rates = [0.0] * len(self.capacity)
        for cls in self._active:
            for r in cls.resources:
                rates[r] += cls.rate * len(cls.heap)
        self._publish(rates)

    def _publish(self, rates: list) -> None:
        self.current_rate = rates
        if self.on_rates is not None:
            self.on_rates(self.env.now, rates)
        self._schedule()

    def _schedule(self) -> None:
        self._gen += 1
        best = None
        for cls in self._active:
            if cls.rate > 0:
                t = (cls.heap[0][0] - cls.virtual) / cls.rate
                if best is None or t < best:
                    best = t
        if best is not None:
            gen = self._gen
            self.env.timeout(max(best, 0.0)).callbacks.append(lambda _e, g=gen: self._wake(g))

    def _wake(self, gen: int) -> None:
        if gen != self._gen:
            return                              # superseded by a later reallocation
        self._advance()
        done = False
        now = self.env.now
        for cls in list(self._active):
            heap = cls.heap
            # done: no bytes left to speak of, or so few that the time to move them no longer
            # advances the clock (late in a very long run; else this wake would repeat forever)
            while heap and (heap[0][0] - cls.virtual <= _EPS_BYTES + 1e-12 * heap[0][0]
                            or cls.rate > 0 and now + (heap[0][0] - cls.virtual) / cls.rate == now):
                _, _, ev = heapq.heappop(heap)
                ev.succeed()
                done = True
            if not heap:
                self._active.remove(cls)
                cls.rate = 0.0
        if done or self._active:
            self._reallocate()
        else:
            self.current_rate = [0.0] * len(self.capacity)
