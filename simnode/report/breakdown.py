"""Where a run's time goes, read off its figures by what adds up, never by a kind's or a
figure's name.

- ``record_split(result)``: a list-of-records figure of the header (``per_rank``) whose
  records hold time fields of which one is the sum of the others (``end_ns = compute_ns +
  exposed_comm_ns + imbalance_wait_ns`` on every record): the parts, the total, the field that
  names each record (the first integer field with a distinct value per record, ``rank``), and
  the records. A header figure in unit ``rank`` (``straggler_rank``) names a record to mark.
- ``run_split(result)``: the run's time in parts that add up to its makespan: a header mapping
  in a time unit whose values add up to it (a step's ``critical_us``), else the header's
  figures named as a record split's parts, when they add up to it (a MoE layer's straggler:
  ``compute_ns``, ``exposed_comm_ns``, ``imbalance_wait_ns``).
- ``time_axis(max_ns)``: the unit a plot or a line of text shows times in (us, or ms from
  10 ms up) and its size in ns.

"Adds up" is within ``CLOSE`` (relative): kinds round their records' fields (0.1 ns) but
compute the parts so that they sum to the whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode import units
from simnode.config.params import unit_of

#: the time units a figure may be in, and their size in ns
TIME_UNITS = {"ns": 1.0, "us": units.NS_PER_US, "ms": units.NS_PER_MS, "s": units.NS_PER_S}
CLOSE = 1e-3
#: from this many ns up, times show in ms (below, in us)
MS_FROM_NS = 10 * units.NS_PER_MS


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _adds_up(parts, total: float) -> bool:
    return total > 0 and abs(sum(parts) - total) <= CLOSE * total


def part_label(name: str) -> str:
    """``exposed_comm_ns`` -> ``exposed comm``: a part's name without its unit suffix."""
    for suffix in TIME_UNITS:
        if name.endswith("_" + suffix):
            name = name[: -len(suffix) - 1]
            break
    return name.replace("_", " ")


@dataclass(frozen=True)
class Split:
    """A run's time in parts that add up to it."""
    figure: str                     #: the figure (or record figure) the parts come from
    parts: tuple                    #: part names as declared
    values_ns: tuple                #: one per part
    docs: tuple                     #: one per part ("" where none is declared)
    total_ns: float


@dataclass(frozen=True)
class RecordSplit:
    """Records (one per rank) each split into parts that add up to a total field."""
    figure: str
    doc: str
    parts: tuple                    #: the record fields that add up
    total: str                      #: the field they add up to
    key: str                        #: the field that names a record ("" = its index)
    records: tuple
    marks: tuple = ()               #: (figure name, key value): records a header figure names

    def scale(self, name: str) -> float:
        """ns per unit of a field (read off its name)."""
        return TIME_UNITS[unit_of(name)]

    def label(self, i: int) -> str:
        return str(self.records[i][self.key]) if self.key else str(i)


def _time_fields(records) -> list[str]:
    keys = list(dict.fromkeys(k for r in records for k in r))
    return [k for k in keys if unit_of(k) in TIME_UNITS and all(_number(r.get(k)) for r in records)]


def _key_field(records, skip) -> str:
    for k in dict.fromkeys(k for r in records for k in r):
        values = [r.get(k) for r in records]
        if k not in skip and all(isinstance(v, int) and not isinstance(v, bool) for v in values) \
                and len(set(values)) == len(values):
            return k
    return ""


def record_split(result) -> RecordSplit | None:
    """The first header figure whose records split into parts (module docstring), or None."""
    for f in result.figures:
        records = f.value
        if not (isinstance(records, list) and len(records) >= 2 and all(isinstance(r, dict) for r in records)):
            continue
        times = _time_fields(records)
        for total in times:
            parts = [k for k in times if k != total]
            if len(parts) < 2:
                continue
            scale = {k: TIME_UNITS[unit_of(k)] for k in times}
            if all(_adds_up([r[k] * scale[k] for k in parts], r[total] * scale[total]) or r[total] == 0
                   for r in records):
                key = _key_field(records, set(times))
                names = {r[key] for r in records} if key else set(range(len(records)))
                marks = tuple((g.name, g.value) for g in result.figures
                              if g.unit == "rank" and _number(g.value) and g.value in names)
                return RecordSplit(f.name, f.doc, tuple(parts), total, key, tuple(records), marks)
    return None


def run_split(result) -> Split | None:
    """The run's time in parts (module docstring), or None."""
    total = result.makespan_ns
    for f in result.figures:
        scale = TIME_UNITS.get(f.unit)
        value = f.value
        if scale and isinstance(value, dict) and len(value) >= 2 and all(_number(v) for v in value.values()):
            values = [v * scale for v in value.values()]
            if _adds_up(values, total):
                return Split(f.name, tuple(value), tuple(values), ("",) * len(values), total)
    rs = record_split(result)
    if rs is None:
        return None
    header = {f.name: f for f in result.figures}
    chosen = [header.get(p) for p in rs.parts]
    if not all(g is not None and _number(g.value) and g.unit in TIME_UNITS for g in chosen):
        return None
    values = [g.value * TIME_UNITS[g.unit] for g in chosen]
    if not _adds_up(values, total):
        return None
    return Split(", ".join(rs.parts), rs.parts, tuple(values), tuple(g.doc for g in chosen), total)


def time_axis(max_ns: float) -> tuple[float, str]:
    """(ns per shown unit, unit): us, or ms for times from ``MS_FROM_NS`` up."""
    return (units.NS_PER_MS, "ms") if max_ns >= MS_FROM_NS else (units.NS_PER_US, "us")
