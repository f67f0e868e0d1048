"""What a YAML file says about each of its keys: the line it is on and its comments.

Topology and workload files comment every number with its source (``# facts 1.4, S8``) or
the reason for its value. ``annotate(path)`` reads a file's text (not its values: that is
``load_yaml``) and returns a ``FileNotes``: per dotted key (``chip.memory.hbm_bandwidth_GBps``)
its line and its comment. A key's comment is the block of comment lines right above it
(or, for a key in a run of keys with no blank line or comment between them, the block above
the run), then its own trailing comment; a key without either takes its parent's. The
comment that opens a file is about the file, not its first key.

``cites(text)`` lists the source ids a comment names (``facts 1.5``, ``S13``, ``X1``) and
``origin_of(text)`` reads from it where the value comes from (``simnode.config.params.ORIGINS``):
``calibrated`` when the comment says the value is a calibration, ``reasoned`` when it says the
value is unknown or unpublished (or cites nothing), ``sourced`` when it cites a source, and
an explicit ``origin: <name>`` in the comment wins over all of these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_KEY = re.compile(r"^(\s*)([A-Za-z_][\w.-]*)\s*:(.*)$")
_CITE = re.compile(r"\bfacts \d+(?:\.\d+)*(?:/\d+(?:\.\d+)*)*|\b[SX]\d+\b")
_EXPLICIT = re.compile(r"\borigin:\s*(sourced|reasoned|calibrated|setting)\b")
_CALIBRATED = re.compile(r"calibrat", re.I)
_REASONED = re.compile(r"\bunknown\b|not published|nothing published|no (?:\w+ )?source\b|"
                       r"\bas open\b|\bis open\b|\bassumption\b", re.I)


@dataclass
class FileNotes:
    path: str
    lines: dict = field(default_factory=dict)       #: dotted key -> line number (1-based)
    comments: dict = field(default_factory=dict)    #: dotted key -> comment text ("" if none)

    def where(self, key: str) -> str:
        """``FILE:LINE`` of a key (the file alone if the key is not in it)."""
        line = self.lines.get(key)
        return f"{self.path}:{line}" if line else self.path

    def comment(self, key: str) -> str:
        """The key's comment, else the nearest commented parent's."""
        while key:
            text = self.comments.get(key, "")
            if text:
                return text
            key = key.rpartition(".")[0]
        return ""


def _strip_trailing(rest: str) -> tuple[str, str]:
    """(value text, trailing comment) of what follows ``key:`` (a ``#`` inside quotes stays)."""
    quote = None
    for i, ch in enumerate(rest):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1].isspace()):
            return rest[:i].strip(), rest[i + 1:].strip()
    return rest.strip(), ""


def annotate(path, prefix: str = "") -> FileNotes:
    """Lines and comments of every key of the YAML file at ``path`` (keys under ``prefix``)."""
    notes = FileNotes(str(path))
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return notes                      # the file's own reader names what is wrong with it
    stack: list[tuple[int, str]] = []     # (indent, dotted key) of the open mappings
    block: list[str] = []                 # comment lines right above the current line
    run_block: dict[int, str] = {}        # indent -> the block above the current run of keys
    seen_key = False
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped:
            block, run_block = [], {}
            continue
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            continue
        m = _KEY.match(raw)
        if not m:                         # a list item or a continued value: no key of its own
            block = []
            continue
        indent, key, rest = len(m.group(1)), m.group(2), m.group(3)
        if not seen_key:                  # a file's opening comment is about the file
            block, seen_key = [], True
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = prefix + ".".join([k for _, k in stack] + [key])
        _, trailing = _strip_trailing(rest)
        if block:
            run_block = {i: t for i, t in run_block.items() if i < indent}
            run_block[indent] = " ".join(block)
        above = run_block.get(indent, "")
        notes.lines[dotted] = number
        notes.comments[dotted] = " ".join(t for t in (above, trailing) if t)
        block = []
        stack.append((indent, key))
        run_block = {i: t for i, t in run_block.items() if i <= indent}
    return notes


def cites(text: str) -> list[str]:
    """The source ids a comment names, in order, each once."""
    return list(dict.fromkeys(m.group(0) for m in _CITE.finditer(text or "")))


def origin_of(text: str) -> str:
    """Where a commented value comes from (see the module docstring); "" without a comment."""
    if not text:
        return ""
    explicit = _EXPLICIT.search(text)
    if explicit:
        return explicit.group(1)
    if _CALIBRATED.search(text):
        return "calibrated"
    if _REASONED.search(text) or not cites(text):
        return "reasoned"
    return "sourced"
