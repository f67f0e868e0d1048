"""Shared measurement helpers for the benchmark scripts: wall time, SimPy events, peak RSS."""

from __future__ import annotations

import resource
import time

import simpy


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it schedules."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.events_scheduled = 0

    def schedule(self, event, priority=1, delay=0):
        self.events_scheduled += 1
        super().schedule(event, priority, delay)


def peak_rss_MiB() -> float:
    """Peak resident memory of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Stopwatch:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall_s = time.perf_counter() - self.start
