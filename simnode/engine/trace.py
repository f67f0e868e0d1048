"""Chrome Trace Event JSON, streamed to disk (loadable by Perfetto and chrome://tracing).

``Tracer(path, scopes)`` writes ``{"displayTimeUnit": "ns", "traceEvents": [...]}``
event by event, so a large run never holds its trace in memory. Processes and
threads get small integer ids in order of first use (deterministic); ``M``
metadata events name them. ``span`` writes an ``X`` event, ``counter`` a ``C``
event, ``flow`` an ``s``/``f`` pair member. ts/dur are microseconds.

``scopes``: optional fnmatch patterns over thread names (``core07.*``); threads
that match none are not traced. ``NULL_TRACER`` is the off switch.

A path ending in ``.gz`` is written gzip-compressed (Perfetto opens it as it is; a
full sparse-MLA prefill trace shrinks from ~570 MB to ~35 MB), with no name or
time in the gzip header, so the bytes stay deterministic.
"""

from __future__ import annotations

import fnmatch
import gzip
import io
import json

from simnode.units import ns_to_us


def _us(time_ns: float) -> str:
    return f"{ns_to_us(time_ns):.4f}"


class Tracer:
    enabled = True

    def __init__(self, path, scopes: list[str] | None = None):
        self.path = str(path)
        self._fh, self._raw = _open_text(self.path)
        self._fh.write('{"displayTimeUnit": "ns", "traceEvents": [\n')
        self._first = True
        self._pids: dict[str, int] = {}
        self._tids: dict[tuple[int, str], int | None] = {}
        self._scopes = scopes
        self.events_written = 0

    def _write(self, text: str) -> None:
        if self._first:
            self._first = False
        else:
            self._fh.write(",\n")
        self._fh.write(text)
        self.events_written += 1

    def process(self, name: str) -> int:
        pid = self._pids.get(name)
        if pid is None:
            pid = self._pids[name] = len(self._pids) + 1
            self._write(json.dumps({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                                    "args": {"name": name}}))
            self._write(json.dumps({"ph": "M", "name": "process_sort_index", "pid": pid,
                                    "tid": 0, "args": {"sort_index": pid}}))
        return pid

    def thread(self, pid: int, name: str) -> int | None:
        """Thread id for ``name`` in ``pid``, or None if the scope filter excludes it."""
        key = (pid, name)
        if key in self._tids:
            return self._tids[key]
        if self._scopes and not any(fnmatch.fnmatchcase(name, s) for s in self._scopes):
            self._tids[key] = None
            return None
        tid = sum(1 for (p, _), t in self._tids.items() if p == pid and t is not None) + 1
        self._tids[key] = tid
        self._write(json.dumps({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                                "args": {"name": name}}))
        self._write(json.dumps({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                                "args": {"sort_index": tid}}))
        return tid

    def span(self, pid: int, tid: int, name: str, start_ns: float, dur_ns: float,
             args: dict | None = None) -> None:
        ts = round(ns_to_us(start_ns), 4)
        dur = round(ns_to_us(start_ns + dur_ns), 4) - ts     # rounded end - rounded start: no overlap
        text = (f'{{"ph": "X", "pid": {pid}, "tid": {tid}, "name": {json.dumps(name)}, '
                f'"ts": {ts:.4f}, "dur": {max(dur, 0.0):.4f}')
        if args:
            text += f', "args": {json.dumps(args, sort_keys=True)}'
        self._write(text + "}")

    def counter(self, pid: int, name: str, ts_ns: float, values: dict) -> None:
        self._write(f'{{"ph": "C", "pid": {pid}, "tid": 0, "name": {json.dumps(name)}, '
                    f'"ts": {_us(ts_ns)}, "args": {json.dumps(values, sort_keys=True)}}}')

    def flow(self, phase: str, flow_id: int, pid: int, tid: int, ts_ns: float,
             name: str = "send") -> None:
        """One end of a flow arrow: ``phase`` 's' at the sender, 'f' at the receiver."""
        extra = ', "bp": "e"' if phase == "f" else ""
        self._write(f'{{"ph": "{phase}", "id": {flow_id}, "pid": {pid}, "tid": {tid}, '
                    f'"name": {json.dumps(name)}, "cat": "flow", "ts": {_us(ts_ns)}{extra}}}')

    def close(self) -> None:
        if self._fh is not None:
            self._fh.write("\n]}\n")
            self._fh.close()
            if self._raw is not None:         # GzipFile leaves the file it wraps open
                self._raw.close()
            self._fh = self._raw = None


def _open_text(path: str):
    """(text stream, underlying binary file or None) for ``path``; gzip if it ends in ``.gz``."""
    if not path.endswith(".gz"):
        return open(path, "w", encoding="utf-8"), None
    raw = open(path, "wb")
    # filename "" and mtime 0: the gzip header carries neither, so reruns are byte-identical
    gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
    return io.TextIOWrapper(gz, encoding="utf-8"), raw


class _NullTracer:
    enabled = False
    events_written = 0

    def process(self, name):
        return 0

    def thread(self, pid, name):
        return None

    def span(self, *a, **k):
        pass

    def counter(self, *a, **k):
        pass

    def flow(self, *a, **k):
        pass

    def close(self):
        pass


NULL_TRACER = _NullTracer()
