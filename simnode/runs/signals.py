"""SIGTERM unwound like Ctrl-C, for every command (imported by the CLI before any command
module, so it holds nothing heavier than ``signal``; the executor's workers undo it).

``sigterm_as_interrupt()`` turns SIGTERM into ``Terminated`` (a ``KeyboardInterrupt``) while a
command runs, so a run, a sweep's workers or a calibration stop the way Ctrl-C stops them.
"""

from __future__ import annotations

import contextlib
import signal


class Terminated(KeyboardInterrupt):
    """SIGTERM while a command runs: unwinds like Ctrl-C (workers stopped, partial output
    removed), reported as terminated (exit 143)."""


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While inside, SIGTERM raises ``Terminated`` in the main thread (the default would end
    the process at once and leave the pool's workers running with no parent); the previous
    handler is restored on the way out. Outside the main thread (a test runner's) a no-op."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:                          # not the main thread: signals are not ours
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
