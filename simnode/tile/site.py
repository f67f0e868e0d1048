"""Where a tile program is: the file and line of the program statement being traced.

``caller()`` walks out of this package's own frames (programs shipped in
``simnode/tile/programs`` count as programs) and returns ``(file, line)``; ``fail(msg, at)``
raises the ``ScheduleError`` every program mistake becomes, prefixed ``file:line:``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from simnode.errors import ScheduleError

_HERE = Path(__file__).resolve().parent
#: this package's own modules: frames in them are the language, not the program
FRAMEWORK = frozenset(str(p) for p in _HERE.glob("*.py")) | frozenset(
    str(p.resolve()) for p in _HERE.glob("*.py"))


def caller() -> tuple[str, int]:
    """(file, line) of the innermost frame outside the language's modules."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in FRAMEWORK:
        f = f.f_back
    if f is None:
        return ("<unknown>", 0)
    return (f.f_code.co_filename, f.f_lineno)


def show(path: str) -> str:
    """A path as errors print it: relative to the current folder when it lies below it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def fmt(at: tuple[str, int] | None) -> str:
    if at is None:
        return "tile program"
    return f"{show(at[0])}:{at[1]}"


def fail(msg: str, at: tuple[str, int] | None = None):
    """Raise the error a program mistake becomes; ``at`` defaults to the current statement."""
    raise ScheduleError(f"{fmt(at if at is not None else caller())}: {msg}")
