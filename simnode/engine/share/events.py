"""The share's completion events: ``Transfer`` (one transfer) and ``Group`` (many at once).

Both are ``simnode.engine.clock.Delayed`` events: when they fire is known only once the share
has served their last unit, and then they fire that unit's latency later.
"""

from __future__ import annotations

import numpy as np
import simpy

from simnode.engine.clock import Delayed


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

    def finish(self, served_in_ns: float) -> None:
        """Its last unit is served ``served_in_ns`` from now: fire then plus the latency."""
        served_in_ns = float(served_in_ns)
        self.served_ns = self.env.now + served_in_ns
        self.fire_in(served_in_ns + self.latency_ns, self.tag)
        if self._injected is not None:
            self._injected.fire_in(served_in_ns, self.tag)


class Group(Delayed):
    """Transfers started together by ``Share.start_group``: fires when the last has arrived
    (served + its latency); ``served_ns[k]`` and ``arrival_ns[k]`` per member afterwards.
    While it runs, its members' state lives in the share's group book
    (``simnode.engine.share.groups.GroupBook``, so that completions of many groups are handled
    at once); it takes a copy when its last member is served (``settle``)."""

    def __init__(self, env, latency_ns: np.ndarray, tag=None):
        super().__init__(env)
        self.tag = tag
        self.start_ns = env.now
        self.latency_ns = latency_ns
        self.gid = -1                       #: its index in the book
        self.book = None                    #: the book holding its state while it runs
        self._on_served = None
        self._served = np.full(latency_ns.shape[0], np.nan)   # own copy once done
        self._last = env.now

    @property
    def on_served(self):
        """callback(member indices, served ns) as members are served (e.g. to note arrivals)."""
        return self._on_served

    @on_served.setter
    def on_served(self, fn) -> None:
        self._on_served = fn
        if self.book is not None:
            self.book.watch(self.gid, fn is not None)

    @property
    def served_ns(self) -> np.ndarray:
        book = self.book
        if book is None:
            return self._served
        o = book.off[self.gid]
        return book.m_served[o:o + self.latency_ns.shape[0]]

    @property
    def left(self) -> int:
        """Members not served yet."""
        return 0 if self.book is None else int(self.book.left[self.gid])

    @property
    def last_ns(self) -> float:
        """Latest arrival so far."""
        return self._last if self.book is None else float(self.book.last[self.gid])

    @property
    def arrival_ns(self) -> np.ndarray:
        return self.served_ns + self.latency_ns

    def settle(self, served_ns: np.ndarray, last_ns: float) -> None:
        """Its last member is served: keep its own copy of the served times and the latest
        arrival, and leave the book."""
        self._served = served_ns
        self._last = last_ns
        self.book = None
