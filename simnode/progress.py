"""A one-line progress bar on stderr for runs of many points (``simnode sweep``).

``Progress(total, label)`` redraws ``label [#####.....] done/total  elapsed s`` on every
``advance()`` and ends the line on ``close()``. It draws only when its stream is a
terminal, so redirected output, test captures and CI logs stay clean; ``enabled``
forces it on or off. Also a context manager (closes on exit).
"""

from __future__ import annotations

import sys
import time

BAR_WIDTH_CHARS = 30


class Progress:
    """See the module docstring."""

    def __init__(self, total: int, label: str = "", stream=None, enabled: bool | None = None):
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = enabled if enabled is not None else bool(isatty and isatty())
        self.done = 0
        self._start_s = time.monotonic()
        self._draw()

    def advance(self, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        self._draw()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False

    def _draw(self) -> None:
        if not self.enabled:
            return
        filled = BAR_WIDTH_CHARS * self.done // max(1, self.total)
        bar = "#" * filled + "." * (BAR_WIDTH_CHARS - filled)
        elapsed_s = time.monotonic() - self._start_s
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}  {elapsed_s:.1f} s")
        self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
