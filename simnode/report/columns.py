"""Plain-text tables: ``align(rows)`` left-aligns a list of string rows (the first is the
header) into columns two spaces apart, trailing blanks stripped. Shared by the tables of
``simnode sweep``, ``simnode validate`` and ``simnode regress``."""

from __future__ import annotations


def align(rows: list[list[str]]) -> str:
    """Rows of equal length (strings) -> one line each, every column as wide as its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)
