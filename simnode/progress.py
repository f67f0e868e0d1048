"""A one-line progress bar on stderr: points of a sweep, or a long run's simulated time.

``Progress(total, label)`` redraws ``label [#####.....] done/total  elapsed s`` on every
``advance()`` (or ``update(done)``, which redraws only when ``done`` changes and may pass
``total``: a run's simulated time against its lower bound) and ends the line on ``close()``. It draws only when its stream is a
terminal, so redirected output, test captures and CI logs stay clean; ``enabled``
forces it on or off. Also a context manager (closes on exit).
"""

from __future__ import annotations

import sys
import time

BAR_WIDTH_CHARS = 30
REDRAW_S = 0.1


class Progress:
    """See the module docstring."""

    def __init__(self, total: int, label: str = "", stream=None, enabled: bool | None = None,
                 unit: str = ""):
        self.total = total
        self.label = label
        self.unit = unit                #: printed after done/total, e.g. " us"
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = enabled if enabled is not None else bool(isatty and isatty())
        self.done = 0
        self._start_s = time.monotonic()
        self._drawn_s = -REDRAW_S
        self._draw()

    def advance(self, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        self._draw()

    def update(self, done: int) -> None:
        """Set the count (it may exceed ``total``); redraws on a change, at most every
        ``REDRAW_S`` (a run may update it thousands of times a second)."""
        if done != self.done:
            self.done = done
            now = time.monotonic()
            if now - self._drawn_s >= REDRAW_S:
                self._drawn_s = now
                self._draw()

    def close(self) -> None:
        if self.enabled:
            self._draw()                    # the last count, which update() may have skipped
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False

    def _draw(self) -> None:
        if not self.enabled:
            return
        filled = min(BAR_WIDTH_CHARS, BAR_WIDTH_CHARS * self.done // max(1, self.total))
        bar = "#" * filled + "." * (BAR_WIDTH_CHARS - filled)
        elapsed_s = time.monotonic() - self._start_s
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}{self.unit}  {elapsed_s:.1f} s")
        self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
