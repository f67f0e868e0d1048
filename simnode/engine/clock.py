"""The one place that reaches below SimPy's public API (SimPy 4: ``Environment``, ``Event``).

Two things simnode needs cost too much through the public API, on the hot path of every run:

- ``Delayed``: an event that is triggered to fire after a delay, as ``simpy.Timeout`` is,
  but decided later than it is made (a transfer's completion, known once the share has
  served it). The public ``succeed()`` fires at once only; ``fire_in`` sets what
  ``succeed`` sets (``_ok``, ``_value``) and schedules the event with the delay.
- ``Later``: calls due at future instants, one entry in SimPy's event queue per instant
  instead of a Timeout each (a chip's GM copies whose issue time is ahead of the clock, a
  few hundred thousand a run). Each call keeps the event id its own Timeout would have had
  (taken from ``env._eid`` when it is registered, so every other event keeps its id), and
  the entry is pushed onto ``env._queue`` under the id of its first call not yet run: before
  each further call it hands back to SimPy if an event of SimPy's comes first (a smaller
  (time, priority, id)). So the calls run in exactly the order their own Timeouts would
  have run in (tests/hardware/test_later.py checks it against one Timeout per call).

Nothing else in simnode touches SimPy's private names (``env._queue``, ``env._eid``,
``env._now``, ``Event._ok`` / ``_value``): tests/engine/test_clock.py greps for them.
"""

from __future__ import annotations

import heapq
from collections import deque

import simpy
from simpy.events import NORMAL


class Delayed(simpy.Event):
    """An event that can be triggered to fire after a delay (as ``simpy.Timeout`` does)."""

    def __init__(self, env: simpy.Environment):
        super().__init__(env)
        # simpy sets _ok only when the event fires; set here, with the instance's other keys,
        # every instance keeps CPython's shared-key dict (~0.7 KB less each with a million
        # live transfers)
        self._ok = True

    def fire_in(self, delay_ns: float, value=None) -> None:
        """Fire ``delay_ns`` from now with ``value`` (the value its waiters get)."""
        self._ok = True
        self._value = value
        self.env.schedule(self, NORMAL, delay_ns)


class _Entry:
    """The calls due at one instant, as one entry of SimPy's queue (what the queue needs of an
    event, ``callbacks`` and ``_ok``, and no more)."""
    __slots__ = ("callbacks", "fire", "_ok", "_value", "at", "due")

    def __init__(self, later: "Later", at: float):
        self.callbacks = None
        self.fire = [later.run_due]
        self._ok = True
        self._value = None
        self.at = at                #: the queue time (``now + delay`` as SimPy computes it)
        self.due = deque()          #: (event id, argument), ids increasing


class Later:
    """``call(arg)`` at future instants, in the order one Timeout per call would give (see the
    module docstring)."""

    def __init__(self, env: simpy.Environment, call):
        self.env = env
        self.call = call
        self._entries: dict = {}    # queue time -> its ``_Entry``

    def call_at(self, t_ns: float, arg) -> None:
        """Run ``call(arg)`` when the clock reaches ``t_ns`` (> now), where a Timeout of
        delay ``t_ns - now`` made now would run."""
        env = self.env
        now = env._now
        at = now + (t_ns - now)             # SimPy's time of a Timeout of that delay
        eid = next(env._eid)                # and its id: consumed, so other events keep theirs
        b = self._entries.get(at)
        if b is None:
            b = self._entries[at] = _Entry(self, at)
            b.callbacks = b.fire
            heapq.heappush(env._queue, (at, NORMAL, eid, b))
        b.due.append((eid, arg))

    def run_due(self, b: _Entry) -> None:
        """SimPy reached ``b``: run its calls in id order while none of SimPy's own events
        comes before the next one (else queue ``b`` again under that one's id)."""
        due, queue, at, call = b.due, self.env._queue, b.at, self.call
        while due:
            eid, arg = due[0]
            if queue:
                head = queue[0]
                if head[0] == at and (head[1] < NORMAL or (head[1] == NORMAL and head[2] < eid)):
                    b.callbacks = b.fire
                    heapq.heappush(queue, (at, NORMAL, eid, b))
                    return
            due.popleft()
            call(arg)
        del self._entries[at]


def events_scheduled(env: simpy.Environment) -> int:
    """How many events ``env`` has scheduled so far (SimPy's running event id; it consumes
    one id, as scheduling an event would): the event count of a run's benchmarks."""
    return next(env._eid)
