"""Read a result folder written by ``simnode run --out`` or ``simnode sweep --out``.

``load_folder(path)`` -> ``ResultFolder``: ``is_sweep``, the swept ``params``
({field: [values]}, empty for a run) and one ``PointData`` per run: its ``point``
{field: value}, its typed ``result`` (``simnode.report.result.Result``, read from
result.json with its series from series.json) and the result's flat view ``flat``.
Layouts read (``simnode.commands.outdir`` documents them):

- run:   DIR/result.json, DIR/config.json, [DIR/series.json]
- sweep: DIR/sweep.json ({"params", "points": [{"point", "dir"}]}), and per point
  DIR/<dir>/result.json, [DIR/<dir>/series.json]; every <dir> is a relative path inside
  DIR (no "..")

Every field is checked against the shape of a typed result, whatever the kind: a missing
folder, a folder that is neither layout, a file that is not UTF-8 JSON, or a field that is
missing or of another type raises ``ConfigError`` naming the file and the field's path
(``kernels[1].figures[3].value``); the CLI prints it and exits 2.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath

from simnode.errors import ConfigError
from simnode.report.result import FLAT_MODES, Result, from_record, series_from_record

LAYOUTS = ("a folder written by `simnode run --out` (with result.json) "
           "or `simnode sweep --out` (with sweep.json)")
#: appended to the errors of a file whose content is not what simnode writes
CORRUPTED = "This is not as `simnode run/sweep --out` writes it: was the file edited or corrupted?"


@dataclass(frozen=True)
class PointData:
    point: dict                       #: swept field -> value ({} for a single run)
    result: Result                    #: the typed result, its series included
    dir: Path | None = None
    flat: dict = field(default_factory=dict, compare=False)   #: result.to_dict()

    @property
    def label(self) -> str:
        """``num_ranks=8, seed=1`` for a sweep point, the workload name for a run."""
        if self.point:
            return ", ".join(f"{k}={v}" for k, v in self.point.items())
        return self.result.workload or "run"


@dataclass(frozen=True)
class ResultFolder:
    path: Path
    is_sweep: bool
    params: dict                      #: swept field -> values ({} for a run)
    points: list                      #: [PointData], in grid order
    #: a band sweep's point field naming each run's overlay (sweep.json "band"), else ""
    band_field: str = ""
    #: what was run: "topology" and "workload" (paths) and "sets" (["k=v", ...]), where the
    #: folder's sweep.json or config.json states them
    inputs: dict = field(default_factory=dict)
    config: dict | None = None        #: a run's config.json (None for a sweep, or if absent)

    @property
    def workload(self) -> str:
        return self.points[0].result.workload if self.points else ""

    @property
    def kind(self) -> str:
        """The points' kind ("deepep"), or their kinds in order of appearance ("deepep/gemm")."""
        return "/".join(dict.fromkeys(p.result.kind for p in self.points))


def shown(value):
    """``value`` as an error message shows it: scalars as they are (long text cut), a list
    or object by its JSON type and size, so a corrupted file does not flood the terminal."""
    if isinstance(value, dict):
        return f"<a JSON object of {len(value)} entries>"
    if isinstance(value, list):
        return f"<a JSON list of {len(value)} items>"
    if isinstance(value, str) and len(value) > 60:
        return value[:57] + "..."
    return value


#: the largest magnitude a number of a result may have: far above any simulated figure (ns,
#: bytes, flops), low enough that the report's arithmetic and plots stay finite (an int beyond
#: 2**53 is not even exact as a float, and one beyond 2**63 overflows numpy's integers)
MAX_INT, MAX_FLOAT = 2**53, 1e100


def is_number(value) -> bool:
    """A JSON number a result can hold: not a bool, not NaN or Infinity, not beyond
    ``MAX_INT`` (an integer) or ``MAX_FLOAT`` in magnitude."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return abs(value) <= MAX_INT
    return math.isfinite(value) and abs(value) <= MAX_FLOAT


def _bad(path: Path, key: str, value, expected: str) -> ConfigError:
    return ConfigError(str(path), key, shown(value), expected, CORRUPTED)


def _need(path: Path, key: str, value, ok: bool, expected: str) -> None:
    if not ok:
        raise _bad(path, key, value, expected)


def read_json(path: Path, expected_type: type, what: str):
    """The JSON value in ``path``, which must be of ``expected_type`` (dict or list)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(str(path), "", "<missing>", f"a file holding {what}") from None
    except OSError as exc:
        raise ConfigError(str(path), "", f"<unreadable: {exc.strerror or exc}>",
                          f"a readable file holding {what}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), "", f"<not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}>",
                          f"UTF-8 JSON text holding {what}", CORRUPTED) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(str(path), "", f"<invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}>",
                          f"valid JSON holding {what}", CORRUPTED) from None
    except RecursionError:
        raise ConfigError(str(path), "", "<JSON nested too deeply to read>", f"valid JSON holding {what}",
                          CORRUPTED) from None
    if not isinstance(value, expected_type):
        raise ConfigError(str(path), "", f"<a JSON {type(value).__name__}>",
                          f"a JSON {'object' if expected_type is dict else 'list'} holding {what}", CORRUPTED)
    return value


def _is_text(value) -> bool:
    return isinstance(value, str)


def _optional_number(value) -> bool:
    return value is None or is_number(value)


def _leaf(value) -> bool:
    return isinstance(value, (str, bool)) or is_number(value)


def _figure_value(value) -> bool:
    """A number, string or bool; a mapping of those (or of such mappings); a list of those
    or of records (mappings of leaves)."""
    if _leaf(value):
        return True
    if isinstance(value, dict):
        return all(_leaf(v) or (isinstance(v, dict) and all(_leaf(x) for x in v.values()))
                   for v in value.values())
    if isinstance(value, list):
        return all(_leaf(v) or (isinstance(v, dict) and all(_leaf(x) for x in v.values())) for v in value)
    return False


def _check_figures(path: Path, key: str, figures) -> None:
    _need(path, key, figures, isinstance(figures, list), "a list of figures {name, value, unit, ...}")
    for i, f in enumerate(figures):
        where = f"{key}[{i}]"
        _need(path, where, f, isinstance(f, dict), "a figure {name, value, unit, ...}")
        for sub, check, what in (("name", _is_text, "a figure name (string)"),
                                 ("unit", _is_text, "a unit (string)"),
                                 ("value", _figure_value, "a number, string or bool, a mapping of them, "
                                                          "or a list of records")):
            _need(path, f"{where}.{sub}", f.get(sub, "<missing>"), sub in f and check(f[sub]), what)
        digits = f.get("digits", 5)
        _need(path, f"{where}.digits", digits, digits is None or (isinstance(digits, int)
                                                                  and not isinstance(digits, bool)),
              "an integer or null")
        _need(path, f"{where}.headline", f.get("headline", False), isinstance(f.get("headline", False), bool),
              "true or false")
        _need(path, f"{where}.against", f.get("against", ""), _is_text(f.get("against", "")),
              "the name of the figure it is drawn against (string)")
        limits = f.get("limits", [])
        _need(path, f"{where}.limits", limits, isinstance(limits, list) and all(is_number(x) for x in limits),
              "a list of numbers")


def check_result(path: Path, result: dict) -> None:
    """Every field of a typed result.json is present where it must be and of its type; else
    ``ConfigError`` naming ``path``, the field (``kernels[0].figures[2].value``), its value
    and what was expected."""
    for key in ("kind", "makespan_ns", "bottleneck"):
        if key not in result:
            raise ConfigError(str(path), key, "<missing>", "a run result with kind, makespan_ns and bottleneck",
                              CORRUPTED)
    for key in ("kind", "bottleneck"):
        _need(path, key, result[key], isinstance(result[key], str), "a string")
    _need(path, "workload", result.get("workload", ""), isinstance(result.get("workload", ""), str), "a string")
    _need(path, "makespan_ns", result["makespan_ns"], is_number(result["makespan_ns"]), "a number")
    for key in ("roofline_ns", "bottleneck_util_frac"):
        _need(path, key, result.get(key), _optional_number(result.get(key)), "a number or null")
    seed = result.get("seed")
    _need(path, "seed", seed, seed is None or (isinstance(seed, int) and not isinstance(seed, bool)),
          "an integer or null")
    _check_figures(path, "figures", result.get("figures", []))
    kernels = result.get("kernels", [])
    _need(path, "kernels", kernels, isinstance(kernels, list), "a list of kernel records")
    for i, k in enumerate(kernels):
        where = f"kernels[{i}]"
        _need(path, where, k, isinstance(k, dict), "a kernel record {name, time_ns, bound_ns, bottleneck, figures}")
        for sub, check, what in (("name", _is_text, "a kernel name (string)"),
                                 ("time_ns", is_number, "a number (ns)")):
            _need(path, f"{where}.{sub}", k.get(sub, "<missing>"), sub in k and check(k[sub]), what)
        _need(path, f"{where}.bound_ns", k.get("bound_ns"), _optional_number(k.get("bound_ns")), "a number or null")
        _need(path, f"{where}.bottleneck", k.get("bottleneck", ""), _is_text(k.get("bottleneck", "")), "a string")
        _need(path, f"{where}.bottleneck_util_frac", k.get("bottleneck_util_frac"),
              _optional_number(k.get("bottleneck_util_frac")), "a number (busy fraction) or null")
        _need(path, f"{where}.flat", k.get("flat", "prefixed"), k.get("flat", "prefixed") in FLAT_MODES,
              "one of " + ", ".join(FLAT_MODES))
        _check_figures(path, f"{where}.figures", k.get("figures", []))


def _number_list(path: Path, key: str, value, what: str) -> None:
    """``value`` must be a list of numbers; else the error names the first item that is not."""
    _need(path, key, value, isinstance(value, list), f"a list of numbers ({what})")
    for i, v in enumerate(value):
        _need(path, f"{key}[{i}]", v, is_number(v), f"a number ({what})")


def check_series(path: Path, series) -> None:
    """series.json: [{"name", "kernel", "unit", "bin_edges_ns": [numbers], "rows": {label:
    [one number per bin]}}]."""
    _need(path, "", series, isinstance(series, list), "a list of series")
    for i, s in enumerate(series):
        where = f"[{i}]"
        if not (isinstance(s, dict) and isinstance(s.get("bin_edges_ns"), list) and isinstance(s.get("rows"), dict)):
            raise ConfigError(str(path), where, "<malformed>",
                              'a series {"name", "kernel", "unit", "bin_edges_ns": [...], "rows": {label: [...]}}',
                              CORRUPTED)
        for sub in ("name", "kernel", "unit"):
            _need(path, f"{where}.{sub}", s.get(sub, "<missing>"), _is_text(s.get(sub)), "a string")
        edges = s["bin_edges_ns"]
        _number_list(path, f"{where}.bin_edges_ns", edges, "time bin edge in ns")
        bins = max(len(edges) - 1, 0)
        for label, values in s["rows"].items():
            if not isinstance(values, list) or len(values) != bins:
                raise ConfigError(str(path), f"{where}.rows.{label}", "<a list of another length>",
                                  f"one value per time bin ({bins})", CORRUPTED)
            _number_list(path, f"{where}.rows.{label}", values, s["unit"] or "value")


def _point(folder: Path, point: dict) -> PointData:
    path = folder / "result.json"
    record = read_json(path, dict, "a run result (Result.to_record())")
    check_result(path, record)
    series_path = folder / "series.json"
    raw = read_json(series_path, list, "the run's time series") if series_path.exists() else []
    check_series(series_path, raw)
    result = from_record(record, [series_from_record(s) for s in raw])
    try:
        flat = result.to_dict()
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(path), "", f"<{exc}>", "a result whose figures flatten", CORRUPTED) from None
    return PointData(dict(point), result, folder, flat)


def _inside(rel: str) -> bool:
    """A relative path that stays inside the folder it is relative to (no "..", not absolute)."""
    posix, windows = PurePosixPath(rel), PureWindowsPath(rel)
    return (rel != "" and not posix.is_absolute() and not windows.anchor
            and ".." not in posix.parts and ".." not in windows.parts)


def _inputs(info: dict) -> dict:
    """The topology and workload paths and the --set values ``info`` states (others left out)."""
    out = {k: info[k] for k in ("topology", "workload") if isinstance(info.get(k), str)}
    sets = info.get("sets")
    if isinstance(sets, list) and all(isinstance(s, str) for s in sets):
        out["sets"] = list(sets)
    return out


def load_folder(path) -> ResultFolder:
    """Read a run or sweep output folder; see the module docstring."""
    if str(path) == "":
        raise ConfigError("simnode report", "RESULT_DIR", "", f"the path of {LAYOUTS}")
    path = Path(path)
    try:
        return _load_folder(path)
    except OSError as exc:          # e.g. a folder we may not list
        raise ConfigError(str(getattr(exc, "filename", None) or path), "", f"<unreadable: {exc.strerror or exc}>",
                          LAYOUTS) from None


def _load_folder(path: Path) -> ResultFolder:
    if not path.is_dir():
        raise ConfigError("simnode report", "RESULT_DIR", str(path), f"an existing folder: {LAYOUTS}")
    if (path / "sweep.json").exists():
        sweep_path = path / "sweep.json"
        sweep = read_json(sweep_path, dict, 'a sweep index {"params", "points"}')
        params, entries = sweep.get("params"), sweep.get("points")
        if not isinstance(params, dict) or not isinstance(entries, list) or not entries:
            raise ConfigError(str(sweep_path), "points", shown(entries),
                              'a "params" object and a non-empty "points" list')
        for name, values in params.items():
            _need(sweep_path, f"params.{name}", values, isinstance(values, list), "a list of the swept values")
        points = []
        for i, entry in enumerate(entries):
            if not (isinstance(entry, dict) and isinstance(entry.get("point"), dict)
                    and isinstance(entry.get("dir"), str)):
                raise ConfigError(str(sweep_path), f"points[{i}]", shown(entry),
                                  '{"point": {...}, "dir": "points/NNN"}')
            if not _inside(entry["dir"]):
                raise ConfigError(str(sweep_path), f"points[{i}].dir", entry["dir"],
                                  'a folder inside the sweep folder ("points/NNN"): a sweep\'s points '
                                  'live in it, not at an absolute path or outside it ("..")')
            points.append(_point(path / entry["dir"], entry["point"]))
        band = sweep.get("band")
        band_field = band.get("field") if isinstance(band, dict) else ""
        if band is not None and not (isinstance(band_field, str) and band_field in params):
            raise ConfigError(str(sweep_path), "band.field", shown(band_field),
                              "the swept field that names each run's overlay (a key of params)")
        return ResultFolder(path, True, params, points, band_field or "", _inputs(sweep))
    if (path / "result.json").exists():
        point = _point(path, {})
        config_path = path / "config.json"
        config = read_json(config_path, dict, "the run's configuration") if config_path.exists() else None
        return ResultFolder(path, False, {}, [point], "", _inputs(config or {}), config)
    raise ConfigError("simnode report", "RESULT_DIR", str(path), LAYOUTS)
