"""Validation cases: the published (or measured) figures a run is compared with.

``load_cases(path)`` reads a versioned cases file (validation/published.yaml) into ``Case``
records: what each case runs (a topology, a workload, its ``set:`` overrides), the metric of
the run's JSON result it compares, the published value and the tolerance (a fraction of
it). ``run_cases(cases, sets, jobs, overlays)`` checks every case's inputs, then runs each
distinct (topology, workload, overrides) once through the executor and returns one
``CaseResult`` per case. ``simnode validate`` prints them, ``simnode calibrate`` fits
values to cases of the same format (``simnode.calibrate.cases``), ``simnode describe`` and
``simnode report`` read the shipped file.

A case a value was fitted to is a ``fit``, never a check: it is run and shown ("fit"), it
never fails the run, and it stays out of the error summary. Two records make a case a fit
(``simnode.runs.provenance``): its own ``fit: {values: {KEY: VALUE}, why: TEXT}`` (a
constant of a shipped topology or workload set on this case; a fit while the run uses that
value, a check again under a ``--set`` that changes it), or a calibration overlay the
validation applies (``overlays``: each applies to the cases on the topology it was fitted
on, and lists the cases it was fitted to; ``simnode.config.overlay``).

A case's ``topology`` and ``workload`` paths, when relative, are read next to the cases
file if they are there, else from the repository root of this checkout (the folder holding
topologies/ and workloads/), as the shipped file writes them: whatever the current
directory (a copy of the shipped file in /tmp runs the same). Absolute paths are used as
written. Overlays read their paths the same way (``simnode.config.fields.resolve_path``).

Errors about a case name the cases file and the case id (``FILE, case 'ID': cases[i].key
= value: expected ...``); its ``set:`` values reach the run as typed (``0.00001`` stays a
number, ``null`` stays null), written back as ``--set`` text by ``assignment_text``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.config.fields import Reader, did_you_mean
from simnode.config.fields import REPO_ROOT, resolve_path
from simnode.config.overlay import applying
from simnode.config.overrides import assignment_text, parse_assignment
from simnode.errors import ConfigError
from simnode.runs.entries import check_set_keys, in_entry, read_yaml

#: the shipped validation file of this checkout
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

    def model_value(self, result: dict) -> float:
        """The case's metric in a run's flat JSON result (``Result.to_dict()``); a metric the
        result lacks, or holds as something other than a number, is an error of the case."""
        numeric = numeric_fields(result)
        if self.metric not in numeric:
            kind = (f"a numeric field of the run's JSON result ('{self.metric}' is "
                    f"{type(result[self.metric]).__name__}, not a number)" if self.metric in result
                    else "a numeric field of the run's JSON result")
            raise ConfigError(self.where, self.key_path("metric"), self.metric,
                              f"{kind}: " + ", ".join(numeric), did_you_mean(self.metric, numeric))
        return float(result[self.metric])


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


def numeric_fields(result: dict) -> list[str]:
    """The keys of a flat JSON result whose values are numbers (a bool is not one)."""
    return [k for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]


def load_cases(path) -> list[Case]:
    """Read and check a cases file; errors name the file, the case and the key path."""
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


def case_paths(c: Case) -> tuple[str, str]:
    """The case's resolved topology and workload files; a missing one names the case."""
    out = []
    for key, written in (("topology", c.topology), ("workload", c.workload)):
        p = resolve_path(written, c.file)
        if not p.is_file():
            raise ConfigError(c.where, c.key_path(key), written,
                              f"an existing file ({p} is not one; relative paths are read next "
                              f"to the cases file, else from the repository root {REPO_ROOT})")
        out.append(str(p))
    return out[0], out[1]


def check_overlays_apply(overlays, cases: list[Case]) -> None:
    """Every overlay applies to at least one of ``cases`` (one on the topology it was
    fitted on); one that applies to none is an error naming it."""
    for o in overlays:
        if not any(applying([o], case_paths(c)[0]) for c in cases):
            raise ConfigError(o.path, "topology", o.topology,
                              "the topology of at least one chosen case (" + ", ".join(
                                  sorted({c.topology for c in cases})) + "): an overlay applies "
                              "only to cases on the topology it was fitted on")


def run_cases(cases: list[Case], sets=(), jobs: int = 0, overlays=()) -> list[CaseResult]:
    """Check every case's inputs (files, ``set:`` entries, ``sets`` for all, the
    ``overlays`` that apply to it: those fitted on its topology), then run them; relative
    paths are read from the repository root (``resolve``)."""
    from simnode.runs.executor import execute
    from simnode.workloads.loader import load_inputs
    for s in sets:
        parse_assignment(s)                         # a malformed --set is the CLI's, not a case's
    specs, fits = [], []
    for c in cases:
        topology, workload = case_paths(c)
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
    return [CaseResult(c, c.model_value(result.to_dict()), fit, tuple(o.path for o in spec.overlays))
            for c, spec, fit, result in zip(cases, specs, fits, results)]


def _fit_of(c: Case, inputs, overlays: list) -> str:
    """What makes the case a fit ("": a check): an overlay fitted on it, or its own ``fit:``
    while the run uses the values it records."""
    from simnode.runs.provenance import same, value_in_use
    for o in overlays:
        if o.fitted(c.id, c.metric, c.published):
            return "overlay " + o.path
    if c.fit_pairs and all(same(v, value_in_use(inputs, k)) for k, v in c.fit_pairs):
        return "sets " + ", ".join(f"{k} = {v}" for k, v in c.fit_pairs) + f" ({c.fit_why})"
    return ""
