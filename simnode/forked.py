"""Run one function in a forked process beside this one, and collect its value.

For a run's parts that are separate simulations (DeepEP's dispatch and combine): the child
is a copy of this process at the fork, so it sees the same inputs and gives the value the
same call would give here. Its value (or the exception it raised) comes back pickled through
a pipe. Only where ``os.fork`` exists and this process is not a pool's worker (a daemon, which
may not have children); callers fall back to running the parts one after the other.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys


def can_fork() -> bool:
    """True where a part may run in a forked child: POSIX, and not inside a pool worker."""
    if not hasattr(os, "fork"):
        return False
    import multiprocessing
    return not multiprocessing.current_process().daemon


class Child:
    """A forked process computing ``fn()``; ``wait()`` gives its value, ``kill()`` stops it."""

    def __init__(self, fn):
        sys.stdout.flush()
        sys.stderr.flush()                    # nothing buffered is written twice
        r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:                     # the child: compute, send, leave without cleanup
            os.close(r)
            try:
                try:
                    out = ("ok", fn())
                except KeyboardInterrupt:     # Ctrl-C reached the whole group: the parent reports it
                    os._exit(130)
                except BaseException as e:   # noqa: BLE001 - raised again in the parent
                    out = ("err", e)
                try:
                    data = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
                except Exception as e:        # noqa: BLE001 - an unpicklable value or error
                    data = pickle.dumps(("err", RuntimeError(f"forked part: {out[1]!r} ({e})")))
                with os.fdopen(w, "wb") as f:
                    f.write(data)
            finally:
                os._exit(0)
        os.close(w)
        self._r = r

    def wait(self):
        """The child's value; its exception is raised here."""
        try:
            with os.fdopen(self._r, "rb") as f:
                data = f.read()
        except BaseException:                 # interrupted while waiting: the child goes too
            self.kill()
            raise
        self._reap()
        if not data:
            raise RuntimeError("a forked part of the run ended without a result")
        status, value = pickle.loads(data)
        if status == "err":
            raise value
        return value

    def kill(self) -> None:
        """Stop the child (the parent failed or was interrupted) and reap it."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.close(self._r)
        except OSError:                       # already closed by wait's reader
            pass
        self._reap()

    def _reap(self) -> None:
        if self.pid:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = 0


def in_child(fn) -> Child:
    """Start ``fn()`` in a forked child (see ``Child``)."""
    return Child(fn)
