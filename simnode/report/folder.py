"""Read a result folder written by ``simnode run --out`` or ``simnode sweep --out``.

``load_folder(path)`` -> ``ResultFolder``: ``is_sweep``, the swept ``params``
({field: [values]}, empty for a run) and one ``PointData`` per run (its ``point``
{field: value}, its ``result`` dict as ``Result.to_dict()`` wrote it, and its
``network_util`` {kernel: {"bin_edges_ns": [...], "links": {name: [busy frac]},
"chip": {rank resource: [busy frac]} (optional)}}
when the run wrote network_util.json). Layouts read:

- run:   DIR/result.json, DIR/config.json, [DIR/network_util.json]
- sweep: DIR/sweep.json ({"params", "points": [{"point", "dir"}]}), and per point
  DIR/<dir>/result.json, [DIR/<dir>/network_util.json]; every <dir> is a relative
  path inside DIR (no "..")

A missing folder, a folder that is neither layout, a file that is not UTF-8 JSON, or
a field the report reads that is missing or of another type (``check_result``) raises
``ConfigError`` naming the file and the field (the CLI prints it and exits 2).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath

from simnode.errors import ConfigError

LAYOUTS = ("a folder written by `simnode run --out` (with result.json) "
           "or `simnode sweep --out` (with sweep.json)")
#: appended to the errors of a file whose content is not what simnode writes
CORRUPTED = "This is not as `simnode run/sweep --out` writes it: was the file edited or corrupted?"

DEEPEP_KERNELS = ("dispatch", "combine")
#: network workload kinds: the kernels their results report as {kernel}_ns, _GBps, _hottest_links ...
NETWORK_KERNELS = {"deepep": DEEPEP_KERNELS, "transport": ("transport",)}
ALL_NETWORK_KERNELS = tuple(k for ks in NETWORK_KERNELS.values() for k in ks)

#: result fields the report reads as numbers when present (kind, makespan_ns, bottleneck are required)
NUMBER_FIELDS = ("makespan_ns", "flops", "tflops", "roofline_ns", "peak_tflops", "l2_bytes", "l2_GBps",
                 "l2_util_frac", "hbm_bytes", "hbm_GBps", "hbm_util_frac")
#: per network kernel K: numbers (K_ns, bound_K_ns, K_sim_over_bound, K_GBps are required with K_ns)
KERNEL_NUMBER_FIELDS = ("{k}_ns", "bound_{k}_ns", "{k}_sim_over_bound", "{k}_GBps", "{k}_network_GBps")
_CHIP_SERIES = re.compile(r"rank\d+\..+")


@dataclass(frozen=True)
class PointData:
    point: dict                       #: swept field -> value ({} for a single run)
    result: dict                      #: Result.to_dict() of the run
    network_util: dict = field(default_factory=dict)   #: kernel -> binned link busy fractions
    dir: Path | None = None

    @property
    def label(self) -> str:
        """``num_ranks=8, seed=1`` for a sweep point, the workload name for a run."""
        if self.point:
            return ", ".join(f"{k}={v}" for k, v in self.point.items())
        return str(self.result.get("workload", "run"))


@dataclass(frozen=True)
class ResultFolder:
    path: Path
    is_sweep: bool
    params: dict                      #: swept field -> values ({} for a run)
    points: list                      #: [PointData], in grid order

    @property
    def workload(self) -> str:
        return str(self.points[0].result.get("workload", "")) if self.points else ""

    @property
    def kind(self) -> str:
        """The points' kind ("deepep"), or their kinds in order of appearance ("deepep/gemm")."""
        return "/".join(dict.fromkeys(str(p.result.get("kind", "")) for p in self.points))


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


def _mapping(path: Path, key: str, value, check, what: str) -> None:
    """``value`` must be an object {name: what}, every value passing ``check``."""
    _need(path, key, value, isinstance(value, dict), f"an object {{name: {what}}}")
    for name, v in value.items():
        _need(path, f"{key}.{name}", v, check(v), what)


def _is_text(value) -> bool:
    return isinstance(value, str)


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


def check_result(path: Path, result: dict) -> None:
    """Every field of a result.json the report reads is present where it must be and of its
    type; else ``ConfigError`` naming ``path``, the field (``dispatch_hottest_links[0].link``),
    its value and what was expected."""
    for key in ("kind", "makespan_ns", "bottleneck"):
        if key not in result:
            raise ConfigError(str(path), key, "<missing>", "a run result with kind, makespan_ns and bottleneck")
    for key in ("kind", "bottleneck", "workload"):
        if key in result:
            _need(path, key, result[key], isinstance(result[key], str), "a string")
    for key in NUMBER_FIELDS:
        if key in result:
            _need(path, key, result[key], is_number(result[key]), "a number")
    u = result.get("bottleneck_util_frac")
    _need(path, "bottleneck_util_frac", u, u is None or is_number(u), "a number (busy fraction) or null")
    if "num_ranks" in result:
        n = result["num_ranks"]
        _need(path, "num_ranks", n, isinstance(n, int) and not isinstance(n, bool) and n > 0,
              "a positive integer (ranks)")
    if "pipe_busy_frac" in result:
        _mapping(path, "pipe_busy_frac", result["pipe_busy_frac"], is_number, "busy fraction")
    if "busiest_pipe_by_unit" in result:
        _mapping(path, "busiest_pipe_by_unit", result["busiest_pipe_by_unit"], _is_text, "pipe name")
    if "per_rank" in result:
        per = result["per_rank"]
        _need(path, "per_rank", per, isinstance(per, dict), "a mapping of per-rank number lists")
        for key, values in per.items():
            _number_list(path, f"per_rank.{key}", values, "one per rank")
    kind_kernels = NETWORK_KERNELS.get(result["kind"], ())
    for k in ALL_NETWORK_KERNELS:
        for template in KERNEL_NUMBER_FIELDS:
            key = template.format(k=k)
            if key in result:
                _need(path, key, result[key], is_number(result[key]), "a number")
            elif k in kind_kernels and f"{k}_ns" in result and template != "{k}_network_GBps":
                raise ConfigError(str(path), key, "<missing>",
                                  f"a number, as in every {result['kind']} result with {k}_ns", CORRUPTED)
        key = f"{k}_hottest_links"
        if key in result:
            links = result[key]
            _need(path, key, links, isinstance(links, list),
                  'a list of {"link": name, "bytes": number, "util_frac": number}')
            for i, h in enumerate(links):
                _need(path, f"{key}[{i}]", h, isinstance(h, dict),
                      '{"link": name, "bytes": number, "util_frac": number}')
                for sub, check, what in (("link", _is_text, "a link name (string)"),
                                         ("bytes", is_number, "a number (bytes)"),
                                         ("util_frac", is_number, "a number (busy fraction)")):
                    _need(path, f"{key}[{i}].{sub}", h.get(sub, "<missing>"), sub in h and check(h[sub]), what)
        for suffix, check, what in (("_chip_util_frac", is_number, "busy fraction"),
                                    ("_chip_busiest", _is_text, "resource name"),
                                    ("_phases_us", is_number, "time in us")):
            if f"{k}{suffix}" in result:
                _mapping(path, f"{k}{suffix}", result[f"{k}{suffix}"], check, what)


def _result(path: Path) -> dict:
    result = read_json(path, dict, "a run result (Result.to_dict())")
    check_result(path, result)
    return result


def _number_list(path: Path, key: str, value, what: str) -> None:
    """``value`` must be a list of numbers; else the error names the first item that is not."""
    _need(path, key, value, isinstance(value, list), f"a list of numbers ({what})")
    for i, v in enumerate(value):
        _need(path, f"{key}[{i}]", v, is_number(v), f"a number ({what})")


def check_network_util(path: Path, util: dict) -> None:
    """network_util.json: {kernel: {"bin_edges_ns": [numbers], "links": {name: [one busy
    fraction per bin]}, "chip": {"rankR.resource": [...]} (optional)}}."""
    for kernel, series in util.items():
        if not (isinstance(series, dict) and isinstance(series.get("bin_edges_ns"), list)
                and isinstance(series.get("links"), dict)):
            raise ConfigError(str(path), kernel, "<malformed>",
                              'an object {"bin_edges_ns": [...], "links": {name: [busy fraction per bin]}}')
        edges = series["bin_edges_ns"]
        _number_list(path, f"{kernel}.bin_edges_ns", edges, "time bin edge in ns")
        bins = max(len(edges) - 1, 0)
        if not isinstance(series.get("chip", {}), dict):
            raise ConfigError(str(path), f"{kernel}.chip", "<malformed>",
                              "an object {resource name: [busy fraction per bin]}")
        for group in ("links", "chip"):
            for name, fracs in series.get(group, {}).items():
                if not isinstance(fracs, list) or len(fracs) != bins:
                    raise ConfigError(str(path), f"{kernel}.{group}.{name}", "<a list of another length>",
                                      f"one busy fraction per time bin ({bins})")
                _number_list(path, f"{kernel}.{group}.{name}", fracs, "busy fraction")
                if group == "chip":
                    _need(path, f"{kernel}.chip.{name}", name, bool(_CHIP_SERIES.fullmatch(name)),
                          'a series named "rankR.resource" (rank3.hbm)')


def _point(folder: Path, point: dict) -> PointData:
    util_path = folder / "network_util.json"
    util = read_json(util_path, dict, "binned link utilization per kernel") if util_path.exists() else {}
    check_network_util(util_path, util)
    return PointData(dict(point), _result(folder / "result.json"), util, folder)


def _inside(rel: str) -> bool:
    """A relative path that stays inside the folder it is relative to (no "..", not absolute)."""
    posix, windows = PurePosixPath(rel), PureWindowsPath(rel)
    return (rel != "" and not posix.is_absolute() and not windows.anchor
            and ".." not in posix.parts and ".." not in windows.parts)


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
        return ResultFolder(path, True, params, points)
    if (path / "result.json").exists():
        return ResultFolder(path, False, {}, [_point(path, {})])
    raise ConfigError("simnode report", "RESULT_DIR", str(path), LAYOUTS)
