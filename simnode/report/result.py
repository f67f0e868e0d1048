"""The result of a run: a header, per-kernel records, and time series on their own channel,
all declared by the kind that makes them, so sweeps, reports and regressions handle any
kind without knowing its name.

Shape (``Result``)::

    header   workload, kind, seed (kinds with a seed), makespan_ns (the run's end),
             bottleneck (+ bottleneck_util_frac), roofline_ns (the run's lower bound, if the
             kind states one), and run-level figures: [Figure]
    kernels  [KernelRecord]: one per kernel the run times, in run order
               name       "gemm", "dispatch", "combine"; a MoE layer: "dispatch", "gemm1",
                          "swiglu", "gemm2", "combine"
               time_ns    the kernel's time (a layer's phases: its slowest rank's, with the
                          mean over ranks as a figure)
               bound_ns   its analytical lower bound (0 = none)
               bottleneck + bottleneck_util_frac: the busiest resource and its busy share
               figures    [Figure]: what the kernel measured, each with its unit
               flat       "prefixed" (figures appear as {name}_{figure}) or "top" (the
                          run's only kernel: figures keep their names, as a GEMM's tflops)
    series   [Series]: name ("link_util", "chip_util"; a MoE layer's "hbm_by_user"), the
             kernel it belongs to, unit, bin_edges_ns, and rows {label: [value per bin]}
             (a link, "rank3.hbm", "rank3.hbm.urma"); never printed, written to series.json

    Figure   name, value (number, string, bool, a mapping of them, or a list of records),
             unit ("TFLOPS", "GB/s", "ns", "B", "fraction"; read off the name's suffix when
             not given), doc, digits (the flat view's rounding), headline (shown in sweep and
             report tables)

A MoE layer, for instance, gives a header with its layer figures (layer_ns as makespan,
compute_ns, comm_ns, exposed_comm_ns, overlap_frac, straggler_rank, load_imbalance), a
record per phase kernel (time = slowest rank, figures: mean_ns, GBps or tflops, padding_frac),
and series of per-link utilization and per-rank HBM split by user.

The flat view, ``to_dict()``, is what ``--json``, results.csv, validation
(validation/published.yaml) and regression baselines (traces/baselines/scenarios.yaml)
read. It is derived, never declared: the header's fields and figures by name; for a
``prefixed`` kernel K its time as ``K_ns``, its bound as ``bound_K_ns``, time / bound as
``K_sim_over_bound``, its bottleneck as ``K_bottleneck`` (and ``K_bottleneck_util_frac``)
and each figure F as ``K_F`` (``dispatch_GBps``); a ``top`` kernel's
figures by their own names (``tflops``, ``l2_GBps``) and its bound as the header's
``roofline_ns``. A figure a kind does not compute is absent, never 0.

``to_record()`` / ``from_record()`` are the typed JSON form (result.json of an output
folder, which the report reads); ``format_table`` prints a result for ``simnode run``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from simnode import units
from simnode.config.params import unit_of

#: below this busy fraction the busiest resource does not set the time by itself: the run
#: waits on dependencies and latencies (a flag round trip, a gather's completion)
SATURATED_FRAC = 0.8
FLAT_MODES = ("prefixed", "top")
#: units whose figures a sweep table prints with 3 decimals (ratios, fractions), others with 1
RATIO_UNITS = ("ratio", "fraction")


@dataclass(frozen=True)
class Figure:
    """One measured figure; see the module docstring."""
    name: str
    value: Any
    unit: str = ""
    doc: str = ""
    digits: int | None = 5          #: flat-view rounding: decimals, 0 = an integer, None = as is
    headline: bool = False
    #: a trade-off: the figure this one is drawn against over a sweep (tpot_ms against
    #: tokens_per_s_per_chip), with lines at ``limits`` (service-level objectives, its unit)
    against: str = ""
    limits: tuple = ()

    def flat_value(self):
        return _rounded(self.value, self.digits)


def fig(name: str, value, unit: str | None = None, doc: str = "", digits: int | None = 5,
        headline: bool = False, against: str = "", limits: tuple = ()) -> Figure:
    """A figure whose unit, unless given, is read off its name (``_ns``, ``_GBps``, ``_frac``)."""
    return Figure(name, value, unit if unit is not None else (unit_of(name) or ""), doc, digits, headline,
                  against, tuple(limits))


@dataclass(frozen=True)
class KernelRecord:
    """One kernel of a run; see the module docstring."""
    name: str
    time_ns: float
    bound_ns: float = 0.0
    bottleneck: str = ""
    bottleneck_util_frac: float | None = None
    figures: tuple = ()
    flat: str = "prefixed"

    def figure(self, name: str) -> Figure | None:
        return next((f for f in self.figures if f.name == name), None)

    @property
    def sim_over_bound(self) -> float | None:
        return self.time_ns / self.bound_ns if self.bound_ns else None


@dataclass(frozen=True)
class Series:
    """A time series on its own channel: rows of values over shared bins (module docstring)."""
    name: str
    kernel: str
    unit: str
    bin_edges_ns: tuple
    rows: Mapping = field(default_factory=dict)     #: label -> one value per bin
    doc: str = ""

    def to_record(self) -> dict:
        return {"name": self.name, "kernel": self.kernel, "unit": self.unit, "doc": self.doc,
                "bin_edges_ns": list(self.bin_edges_ns), "rows": {k: list(v) for k, v in self.rows.items()}}


@dataclass(frozen=True)
class Result:
    """A run's result; see the module docstring."""
    workload: str
    kind: str
    makespan_ns: float
    bottleneck: str
    kernels: tuple = ()
    figures: tuple = ()                      #: run-level figures
    series: tuple = ()
    roofline_ns: float = 0.0
    bottleneck_util_frac: float | None = None
    seed: int | None = None

    # -- the flat view ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The flat view (module docstring), rounded as each figure says."""
        return self._flat(rounded=True)

    def _flat(self, rounded: bool) -> dict:
        def value(f: Figure):
            return f.flat_value() if rounded else f.value
        d = {"workload": self.workload, "kind": self.kind}
        if self.seed is not None:
            d["seed"] = self.seed
        d["makespan_ns"] = round(self.makespan_ns, 3) if rounded else self.makespan_ns
        d["bottleneck"] = self.bottleneck
        if self.bottleneck_util_frac is not None:
            d["bottleneck_util_frac"] = _rounded(self.bottleneck_util_frac, 5) if rounded else self.bottleneck_util_frac
        if self.roofline_ns:
            d["roofline_ns"] = round(self.roofline_ns, 3) if rounded else self.roofline_ns
        for f in self.figures:
            d[f.name] = value(f)
        for k in self.kernels:
            if k.flat == "top":
                for f in k.figures:
                    d[f.name] = value(f)
                continue
            d[f"{k.name}_ns"] = _rounded(k.time_ns, 5) if rounded else k.time_ns
            if k.bound_ns:
                d[f"bound_{k.name}_ns"] = _rounded(k.bound_ns, 5) if rounded else k.bound_ns
                d[f"{k.name}_sim_over_bound"] = (_rounded(k.sim_over_bound, 5) if rounded
                                                 else k.sim_over_bound)
            if k.bottleneck:
                d[f"{k.name}_bottleneck"] = k.bottleneck
            if k.bottleneck_util_frac is not None:
                d[f"{k.name}_bottleneck_util_frac"] = (_rounded(k.bottleneck_util_frac, 5) if rounded
                                                       else k.bottleneck_util_frac)
            for f in k.figures:
                d[f"{k.name}_{f.name}"] = value(f)
        return d

    @property
    def details(self) -> Mapping:
        """The flat view without rounding (what tests and callers read as figures)."""
        return self._flat(rounded=False)

    def __getattr__(self, name: str):
        # a flat figure as an attribute (result.tflops), for callers of the flat names; never
        # for a field not set yet (unpickling looks attributes up before it sets them)
        if name.startswith("_") or name in _RESULT_FIELDS:
            raise AttributeError(name)
        flat = self._flat(rounded=False)
        if name in flat:
            return flat[name]
        raise AttributeError(f"{self.kind} result has no figure {name!r}")

    def kernel(self, name: str) -> KernelRecord | None:
        return next((k for k in self.kernels if k.name == name), None)

    def headline_columns(self) -> list[tuple[str, str]]:
        """(flat name, unit) of the figures a table of many runs shows: each kernel's
        headline figures and its time / bound, then the header's headline figures."""
        cols = []
        for k in self.kernels:
            prefix = "" if k.flat == "top" else f"{k.name}_"
            cols += [(prefix + f.name, f.unit) for f in k.figures if f.headline and _number(f.value)]
            if k.flat != "top" and k.bound_ns:
                cols.append((f"{k.name}_sim_over_bound", "ratio"))
        cols += [(f.name, f.unit) for f in self.figures if f.headline and _number(f.value)]
        return cols

    # -- the typed form -------------------------------------------------------------------------
    def to_record(self) -> dict:
        """The typed JSON form (result.json; series are written apart, see ``Series``)."""
        return {"workload": self.workload, "kind": self.kind, "seed": self.seed,
                "makespan_ns": self.makespan_ns, "bottleneck": self.bottleneck,
                "bottleneck_util_frac": self.bottleneck_util_frac, "roofline_ns": self.roofline_ns,
                "figures": [_figure_record(f) for f in self.figures],
                "kernels": [{"name": k.name, "time_ns": k.time_ns, "bound_ns": k.bound_ns,
                             "bottleneck": k.bottleneck, "bottleneck_util_frac": k.bottleneck_util_frac,
                             "flat": k.flat, "figures": [_figure_record(f) for f in k.figures]}
                            for k in self.kernels]}


_RESULT_FIELDS = frozenset(f.name for f in fields(Result))


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _figure_record(f: Figure) -> dict:
    out = {"name": f.name, "value": _plain(f.value), "unit": f.unit, "doc": f.doc, "digits": f.digits,
           "headline": f.headline}
    if f.against:                            # only a trade-off figure carries these keys
        out.update(against=f.against, limits=list(f.limits))
    return out


def _plain(value):
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def figure_from_record(d: Mapping) -> Figure:
    return Figure(d["name"], d["value"], d.get("unit", ""), d.get("doc", ""), d.get("digits", 5),
                  bool(d.get("headline", False)), d.get("against", ""), tuple(d.get("limits", ())))


def from_record(d: Mapping, series=()) -> Result:
    """A ``Result`` from its typed JSON form (checked by ``simnode.report.folder``)."""
    kernels = tuple(KernelRecord(k["name"], k["time_ns"], k.get("bound_ns", 0.0), k.get("bottleneck", ""),
                                 k.get("bottleneck_util_frac"),
                                 tuple(figure_from_record(f) for f in k.get("figures", [])),
                                 k.get("flat", "prefixed")) for k in d.get("kernels", []))
    return Result(d.get("workload", ""), d["kind"], d["makespan_ns"], d["bottleneck"], kernels,
                  tuple(figure_from_record(f) for f in d.get("figures", [])), tuple(series),
                  d.get("roofline_ns") or 0.0, d.get("bottleneck_util_frac"), d.get("seed"))


def series_from_record(d: Mapping) -> Series:
    return Series(d["name"], d.get("kernel", ""), d.get("unit", ""), tuple(d["bin_edges_ns"]),
                  {k: list(v) for k, v in d["rows"].items()}, d.get("doc", ""))


def _rounded(obj, digits: int | None = 5):
    if digits is None:
        return obj
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, float):
        return round(obj) if digits == 0 and math.isfinite(obj) else round(obj, digits)
    if isinstance(obj, int):
        return obj
    if isinstance(obj, Mapping):
        return {str(k): _rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_rounded(v, digits) for v in obj]
    return obj


def to_json(result_or_list) -> str:
    if isinstance(result_or_list, list):
        return json.dumps([r.to_dict() for r in result_or_list], indent=2, sort_keys=False)
    return json.dumps(result_or_list.to_dict(), indent=2, sort_keys=False)


# -- the text table of `simnode run` ------------------------------------------------------------

def bottleneck_text(name: str, util: float | None) -> str:
    """``name, 99.3% busy``, and a note when nothing is saturated."""
    if util is None:
        return name
    text = f"{name}, {100 * util:.1f}% busy"
    if util < SATURATED_FRAC:
        text += (f" (nothing above {100 * SATURATED_FRAC:.0f}%: dependencies and latencies set the "
                 f"time; idle_on_flags_frac says who each pipe waits on)")
    return text


def _show(x) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _figure_rows(label: str, f: Figure) -> list[tuple[str, str]]:
    v = f.value
    if isinstance(v, Mapping):
        rows = []
        for sub, x in v.items():
            if isinstance(x, Mapping):
                x = ", ".join(f"{a}={_show(b)}" for a, b in x.items())
            rows.append((f"{label}.{sub}", _show(x)))
        return rows
    if isinstance(v, (list, tuple)):
        rows = [(f"{label}[{i}]", ", ".join(f"{a}={_show(b)}" for a, b in x.items())
                 if isinstance(x, Mapping) else str(x)) for i, x in enumerate(v[:TABLE_LIST_ROWS])]
        if len(v) > TABLE_LIST_ROWS:                # a per-rank list at EP128: --json has them all
            rows.append((f"{label}[...]", f"{len(v) - TABLE_LIST_ROWS} more in --json"))
        return rows
    return [(label, _show(v))]


#: rows of a list figure the printed table shows (a per-rank list at EP128 would be 128)
TABLE_LIST_ROWS = 16
#: figures the table shows in a form of their own (the rows above the rest)
_SHOWN_AS_ROWS = ("flops", "tflops", "l2_bytes", "l2_GBps", "l2_util_frac", "hbm_bytes", "hbm_GBps",
                  "hbm_util_frac", "pipe_busy_frac")


def format_table(r: Result, pipe_names: Mapping | None = None) -> str:
    """The result as aligned rows, as ``simnode run`` prints it."""
    pipe_names = pipe_names or {}
    rows = [("workload", r.workload), ("kind", r.kind)]
    if r.seed is not None:
        rows.append(("seed", str(r.seed)))
    rows.append(("makespan", f"{units.ns_to_us(r.makespan_ns):.3f} us"))
    top = next((k for k in r.kernels if k.flat == "top"), None)
    figs = {f.name: f.value for f in top.figures} if top is not None else {}
    if figs.get("flops"):
        rows.append(("achieved", f"{figs['tflops']:.1f} TFLOPS"))
    if r.roofline_ns:
        rows.append(("roofline bound", f"{units.ns_to_us(r.roofline_ns):.3f} us "
                     f"(makespan / bound = {r.makespan_ns / r.roofline_ns:.3f})"))
    rows.append(("bottleneck", bottleneck_text(r.bottleneck, r.bottleneck_util_frac)))
    if figs.get("l2_bytes"):
        rows.append(("L2", f"{figs['l2_bytes'] / units.BYTES_PER_GB:.3f} GB, {figs['l2_GBps']:.0f} GB/s, "
                           f"{100 * figs['l2_util_frac']:.1f}% of peak"))
    if figs.get("hbm_bytes"):
        rows.append(("HBM", f"{figs['hbm_bytes'] / units.BYTES_PER_GB:.3f} GB, {figs['hbm_GBps']:.0f} GB/s, "
                            f"{100 * figs['hbm_util_frac']:.1f}% of peak"))
    for k, v in figs.get("pipe_busy_frac", {}).items():
        rows.append((f"busy {pipe_names.get(k, k)}", f"{100 * v:.1f}%"))
    for f in r.figures:
        rows += _figure_rows(f.name, f)
    for k in r.kernels:
        if k.flat == "top":
            rows += [row for f in k.figures if f.name not in _SHOWN_AS_ROWS for row in _figure_rows(f.name, f)]
            continue
        rows.append((f"{k.name}_ns", _show(k.time_ns)))
        if k.bound_ns:
            rows += [(f"bound_{k.name}_ns", _show(k.bound_ns)), (f"{k.name}_sim_over_bound", _show(k.sim_over_bound))]
        if k.bottleneck:
            busy = k.bottleneck_util_frac
            rows.append((f"{k.name}_bottleneck", k.bottleneck + (f", {100 * busy:.1f}% busy" if busy is not None
                                                                 else "")))
        rows += [row for f in k.figures for row in _figure_rows(f"{k.name}_{f.name}", f)]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
