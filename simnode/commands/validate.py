"""``simnode validate``: run every published case of a validation file and compare.

``load_cases(path)`` reads the versioned case list (validation/published.yaml);
``run_cases(cases, sets)`` checks every case's inputs, then runs each distinct
(topology, workload, overrides) once, in parallel processes, and returns ``CaseResult``
rows; ``format_cases`` prints the table with the mean and max absolute error. The
command exits 1 if any case leaves its tolerance.

A case a value was fitted to is a ``fit``, never a check: it is run and shown ("fit"), it
never fails the run, and it stays out of the error summary. Two records make a case a fit
(``simnode.calibrate.provenance``): its own ``fit: {values: {KEY: VALUE}, why: TEXT}`` (a
constant of a shipped topology or workload set on this case; a fit while the run uses that
value, a check again under a ``--set`` that changes it), or a calibration overlay the
validation applies (``overlays``: each applies to the cases on the topology it was fitted
on, and lists the cases it was fitted to; ``simnode.config.overlay``).

A case's ``topology`` and ``workload`` paths, when relative, are read next to the cases
file if they are there, else from the repository root of this checkout (the folder holding
topologies/ and workloads/), as the shipped file writes them: whatever the current
directory (a copy of the shipped file in /tmp runs the same). Absolute paths are used as
written.

Errors about a case name the cases file and the case id (``FILE, case 'ID': cases[i].key
= value: expected ...``); its ``set:`` values reach the run as typed (``0.00001`` stays a
number, ``null`` stays null), written back as ``--set`` text by ``assignment_text``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simnode.config.fields import Reader, did_you_mean, load_yaml
from simnode.config.overrides import assignment_text, parse_assignment
from simnode.errors import ConfigError
from simnode.report.columns import align

ORDER = 30


def register(subparsers) -> None:
    from simnode.commands import jobs_count
    val = subparsers.add_parser("validate", help="compare the model with every published figure")
    val.add_argument("--cases", default=None, metavar="FILE",
                     help="validation file (default: validation/published.yaml of this checkout)")
    val.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                     help="an override applied to every case (e.g. a what-if on the hardware)")
    val.add_argument("--jobs", type=jobs_count, default=0, help="worker processes (0 = one per core)")
    val.add_argument("--only", action="append", default=[], metavar="PATTERN",
                     help="run only cases whose id matches this glob (deepep-*); repeatable")
    val.add_argument("--json", action="store_true",
                     help="print one JSON object (a row per case, then the summary); same exit code")
    val.add_argument("--topology-overlay", dest="overlays", action="append", default=[],
                     metavar="FILE", help="a calibration overlay (topologies/calibrated/...) applied "
                     "to the cases on the topology it was fitted on; the cases it was fitted on show "
                     "as fit, not as checks; repeatable")
    val.set_defaults(func=cmd_validate)


def cmd_validate(args) -> int:
    import json

    from simnode.commands.baselines import select
    from simnode.commands.run import overlays_of
    from simnode.config.overlay import applying
    overlays = list(overlays_of(args))
    cases = select(load_cases(cases_path(args.cases)), args.only)
    for o in overlays:
        if not any(applying([o], _paths(c)[0]) for c in cases):
            raise ConfigError(o.path, "topology", o.topology,
                              "the topology of at least one chosen case (" + ", ".join(
                                  sorted({c.topology for c in cases})) + "): an overlay applies "
                              "only to cases on the topology it was fitted on")
    rows = run_cases(cases, sets=args.sets, jobs=args.jobs, overlays=overlays)
    print(json.dumps(cases_json(rows), indent=2) if args.json else format_cases(rows))
    return 0 if all(r.ok for r in rows) else 1


#: the checkout's root: relative topology and workload paths of a cases file start here
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CASES = REPO_ROOT / "validation" / "published.yaml"
#: the cases file versions this reader understands
VERSIONS = (1,)


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    topology: str        #: as written in the cases file
    workload: str
    sets: tuple          #: ("key=value", ...) as ``assignment_text`` writes them
    metric: str
    published: float
    tolerance: float     #: fraction of the published value
    file: str = ""       #: the cases file it came from
    index: int = -1      #: its position in the file's ``cases:`` list
    #: values fitted on this case (``fit.values``), as (--set key, value) pairs, and why
    fit_pairs: tuple = ()
    fit_why: str = ""

    @property
    def fit_values(self) -> dict:
        return dict(self.fit_pairs)

    @property
    def where(self) -> str:
        """How errors name the case: ``FILE, case 'ID'``."""
        return f"{self.file}, case '{self.id}'" if self.file else f"case '{self.id}'"

    def key_path(self, key: str) -> str:
        return f"cases[{self.index}].{key}" if self.index >= 0 else key


@dataclass(frozen=True)
class CaseResult:
    case: Case
    model: float
    #: "" for a check; else what was fitted on the case (its own fit, or an overlay)
    fit: str = ""
    overlays: tuple = ()         #: paths of the overlays the case ran with

    @property
    def error_frac(self) -> float:
        return (self.model - self.case.published) / self.case.published

    @property
    def ok(self) -> bool:
        """Within tolerance; a fit case is not a check and never fails."""
        return bool(self.fit) or abs(self.error_frac) <= self.case.tolerance


def cases_path(option: str | None) -> Path:
    """The cases file of ``--cases`` (None: the shipped validation/published.yaml); an
    empty path is an error, never the shipped file."""
    if option is None:
        return DEFAULT_CASES
    if not str(option).strip():
        raise ConfigError("--cases", "cases", option, "a cases file path (it is empty)")
    return Path(option)


def check_set_keys(sets, r: Reader, key: str = "set") -> dict:
    """A ``set:`` mapping of field name -> value (names are strings without '=')."""
    if not isinstance(sets, dict):
        raise r.error(key, sets, "a mapping of field: value")
    for name in sets:
        if not isinstance(name, str) or not name.strip() or "=" in name:
            raise r.error(f"{key}.{name}", sets[name], "a field name (a non-empty string without '=')")
    return sets


def read_yaml(path) -> dict:
    """``load_yaml``, and a file that is not UTF-8 is a ConfigError naming it too (also
    where ``load_yaml`` lets the UnicodeDecodeError through)."""
    try:
        return load_yaml(path)
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), "", f"<byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}>",
                          "a UTF-8 text file of YAML") from None


def load_cases(path) -> list[Case]:
    data = read_yaml(path)
    r = Reader(data, str(path))
    version = r.raw("version")
    if isinstance(version, bool) or version not in VERSIONS:
        raise r.error("version", version, "a cases file version this simnode reads: "
                      + ", ".join(map(str, VERSIONS)))
    raw = r.raw("cases")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(str(path), "cases", raw, "a non-empty list of cases")
    cases, seen = [], {}
    for i, item in enumerate(raw):
        c = Reader(item, str(path), f"cases[{i}]")
        cid = c.string("id")
        if not cid.strip():
            raise c.error("id", cid, "a non-empty case id")
        c.source = f"{path}, case '{cid}'"          # every later error names the case
        if cid in seen:
            raise c.error("id", cid, f"an id used once (cases[{seen[cid]}] has it too)")
        seen[cid] = i
        sets = check_set_keys(c.raw("set", {}), c)
        metric = c.string("metric")
        if not metric.strip():
            raise c.error("metric", metric, "the name of a numeric field of the run's JSON result")
        if c.has("calibration"):
            raise c.error("calibration", c.raw("calibration"), "no such key: a case a value was "
                          "fitted on says so with fit: {values: {KEY: VALUE}, why: TEXT}")
        pairs, why = _fit(c)
        cases.append(Case(cid, c.string("source"), c.string("topology"), c.string("workload"),
                          tuple(assignment_text(k, v) for k, v in sets.items()), metric,
                          c.number("published", positive=True), c.number("tolerance", positive=True),
                          str(path), i, pairs, why))
        c.finish()
    r.finish()
    return cases


def _fit(c: Reader) -> tuple[tuple, str]:
    """A case's ``fit:``: ((key, value), ...) and why (none: ((), ""))."""
    if not c.has("fit"):
        return (), ""
    f = c.section("fit")
    values = f.raw("values")
    if not isinstance(values, dict) or not values:
        raise f.error("values", values, "a non-empty mapping of --set keys (topology.KEY... or a "
                      "workload field) to the values fitted on this case")
    for k, v in values.items():
        if not isinstance(k, str) or not k.strip() or "=" in k:
            raise f.error(f"values.{k}", v, "a --set key (topology.KEY... or a workload field)")
        if isinstance(v, (dict, list)) or v is None:
            raise f.error(f"values.{k}", v, "a number, string or boolean")
    why = f.string("why")
    f.finish()
    return tuple(values.items()), why


def resolve(path: str, cases_file: str = "") -> Path:
    """A topology or workload path of a cases file. A relative one is read next to the cases
    file if it is there (a user's own cases beside their own files), else from the repository
    root (as the shipped file writes them)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    if cases_file and (Path(cases_file).parent / p).is_file():
        return Path(cases_file).parent / p
    return REPO_ROOT / p


def _set_key(key_path: str, keys) -> str | None:
    """The override among ``keys`` an error at ``key_path`` is about (topology errors name
    their key without the ``topology.`` prefix; a bad prefix names only its first parts)."""
    if not key_path:
        return None
    for cand in (key_path, "topology." + key_path):
        for k in keys:
            if cand == k or cand.startswith(k + ".") or k.startswith(cand + "."):
                return k
    return None


def in_entry(exc: ConfigError, where: str, set_path: str, own_sets, cli_sets=()) -> ConfigError:
    """An input error of one case or scenario, told as an error of its file: about one of
    its own ``set:`` entries at ``set_path.KEY``, else with the file and entry in front."""
    own = [s.partition("=")[0] for s in own_sets]
    cli = [s.partition("=")[0].strip() for s in cli_sets]
    key = _set_key(exc.key_path, own)
    if key is not None and _set_key(exc.key_path, cli) is None:
        return ConfigError(where, f"{set_path}.{key}", exc.value, exc.expected, exc.hint)
    return ConfigError(f"{where}: {exc.source}", exc.key_path, exc.value, exc.expected, exc.hint)


def _paths(c: Case) -> tuple[str, str]:
    """The case's resolved topology and workload files; a missing one names the case."""
    out = []
    for key, written in (("topology", c.topology), ("workload", c.workload)):
        p = resolve(written, c.file)
        if not p.is_file():
            raise ConfigError(c.where, c.key_path(key), written,
                              f"an existing file ({p} is not one; relative paths are read next "
                              f"to the cases file, else from the repository root {REPO_ROOT})")
        out.append(str(p))
    return out[0], out[1]


def _numeric(result: dict) -> list[str]:
    return [k for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]


def run_cases(cases: list[Case], sets=(), jobs: int = 0, overlays=()) -> list[CaseResult]:
    """Check every case's inputs (files, ``set:`` entries, ``sets`` for all, the
    ``overlays`` that apply to it: those fitted on its topology), then run them; relative
    paths are read from the repository root (``resolve``)."""
    from simnode.commands.executor import execute
    from simnode.config.overlay import applying
    from simnode.workloads.loader import load_inputs
    for s in sets:
        parse_assignment(s)                         # a malformed --set is the CLI's, not a case's
    specs, fits = [], []
    for c in cases:
        topology, workload = _paths(c)
        mine = applying(list(overlays), topology)
        try:
            spec = load_inputs(topology, workload, list(c.sets) + list(sets), overlays=mine)
        except ConfigError as exc:
            if any(exc.source == o.path for o in mine):
                raise
            raise in_entry(exc, c.where, c.key_path("set"), c.sets, sets) from None
        specs.append(spec)
        fits.append(_fit_of(c, spec, spec.overlays))     # with those its topology file names
    results = execute(specs, jobs, labels=[c.where for c in cases], title="validate")
    rows = []
    for c, spec, fit, result in zip(cases, specs, fits, results):
        out = result.to_dict()
        numeric = _numeric(out)
        if c.metric not in numeric:
            kind = (f"a numeric field of the run's JSON result ('{c.metric}' is "
                    f"{type(out[c.metric]).__name__}, not a number)" if c.metric in out
                    else "a numeric field of the run's JSON result")
            raise ConfigError(c.where, c.key_path("metric"), c.metric, f"{kind}: " + ", ".join(numeric),
                              did_you_mean(c.metric, numeric))
        rows.append(CaseResult(c, float(out[c.metric]), fit, tuple(o.path for o in spec.overlays)))
    return rows


def _fit_of(c: Case, inputs, overlays: list) -> str:
    """What makes the case a fit ("": a check): an overlay fitted on it, or its own ``fit:``
    while the run uses the values it records."""
    from simnode.calibrate.provenance import same, value_in_use
    for o in overlays:
        if o.fitted(c.id, c.metric, c.published):
            return "overlay " + o.path
    if c.fit_pairs and all(same(v, value_in_use(inputs, k)) for k, v in c.fit_pairs):
        return "sets " + ", ".join(f"{k} = {v}" for k, v in c.fit_pairs) + f" ({c.fit_why})"
    return ""


def _within(r: CaseResult) -> str:
    return "fit" if r.fit else ("yes" if r.ok else "NO")


def format_cases(rows: list[CaseResult]) -> str:
    header = ["case", "metric", "model", "published", "error %", "tolerance %", "within", "source"]
    table = [header] + [[r.case.id, r.case.metric, f"{r.model:.1f}", f"{r.case.published:g}",
                         f"{100 * r.error_frac:+.1f}", f"{100 * r.case.tolerance:.0f}",
                         _within(r), r.case.source] for r in rows]
    lines = [align(table)]
    checks = [r for r in rows if not r.fit]
    fitted = [f"{r.case.id} ({r.fit})" for r in rows if r.fit]
    if checks:
        errs = [abs(r.error_frac) for r in checks]
        lines.append(f"mean |error| {100 * sum(errs) / len(errs):.1f}%, max |error| "
                     f"{100 * max(errs):.1f}%, {sum(r.ok for r in checks)} of {len(checks)} "
                     f"within tolerance")
    else:
        lines.append("no checks: every case shown is a fit")
    if fitted:
        lines.append(f"fit cases, not checks: {'; '.join(fitted)}")
    overlays = sorted({o for r in rows for o in r.overlays})
    if overlays:
        lines.append("with overlays: " + ", ".join(overlays))
    return "\n".join(lines)


def cases_json(rows: list[CaseResult]) -> dict:
    """The table as one JSON object: a row per case (fractions, not %; a fit case's
    ``within`` is null and its ``fit`` says what was fitted on it) and the summary of the
    checks."""
    checks = [r for r in rows if not r.fit]
    errs = [abs(r.error_frac) for r in checks] or [0.0]
    return {
        "cases": [{"id": r.case.id, "metric": r.case.metric, "model": r.model,
                   "published": r.case.published, "error_frac": r.error_frac,
                   "tolerance_frac": r.case.tolerance,
                   "within": None if r.fit else r.ok, "source": r.case.source,
                   "topology": r.case.topology, "workload": r.case.workload,
                   "set": list(r.case.sets), "fit": r.fit or None, "overlays": list(r.overlays)}
                  for r in rows],
        "mean_abs_error_frac": sum(errs) / len(errs),
        "max_abs_error_frac": max(errs),
        "within": sum(r.ok for r in checks),
        "total": len(checks),
        "fit_cases": len(rows) - len(checks),
    }
