"""Calibration overlays: values fitted to measured cases, kept as data with their provenance.

An overlay is a YAML file that ``simnode calibrate`` writes and that a run applies on top
of a topology (``--topology-overlay FILE`` of run, sweep, validate, describe and calibrate;
``simnode sweep --band A.yaml,B.yaml`` runs every point under each)::

    overlay: 1                              # format version
    topology: topologies/atlas950-supernode.yaml   # the topology it was fitted on
    values:                                 # --set keys (topology.* or workload fields)
      topology.supernode.urma_wqe_ns_per_peer: 0.0813
    fit:                                    # how the values came to be
      cases_file: validation/published.yaml
      cases: [{id: ..., metric: ..., measured: ..., tolerance: ..., workload: ..., set: {...}}]
      objective: ...
      bounds: {KEY: [LO, HI]}
      start: {KEY: V}
      residuals: {CASE: fraction}
      intervals: {KEY: [LO, HI] or null}
      runs: N
      date: YYYY-MM-DD
      simnode_version: 0.1.0
    note: what the values stand for (optional)

``load_overlay(path)`` reads and checks one (errors name the file, key path, value and what
was expected; a ``topology.*`` key must be a declared parameter, ``simnode.config.params``);
``Overlay.sets()`` gives its values as ``--set`` assignments, which
``simnode.workloads.loader.load_inputs`` applies before the user's own ``--set`` (which
therefore win), recording each value's origin as the overlay; ``Overlay.fitted(case)`` says
whether a validation case is one the values were fitted to (same id, metric and measured
value), so ``simnode validate`` shows it as ``fit``, not as a check. ``dump_overlay``
writes one (deterministic: keys in a fixed order, no timestamps beyond the given date).

Relative paths in an overlay are read next to it if they are there, else from the
repository root (as a validation file's).

A topology file may itself name overlays (the ``overlay:`` key), so a calibrated topology is
a file a user passes where any topology goes::

    # topologies/calibrated/atlas950-supernode-peer-cost.yaml
    base: ../atlas950-supernode.yaml          # the topology the overlays were fitted on
    overlay: deepep-peer-cost.yaml            # or a list, applied in order
    note: what this calibrated topology is    # optional

``expand_topology(path)`` turns such a file into (its base topology file, the overlays, each
read by ``load_overlay``); ``simnode.workloads.loader`` does this for every run, describe and
calibration and applies the overlays exactly as ``--topology-overlay`` ones (the file's
first, then the command line's), so there is one way an overlay reaches a run. Its paths
are read from the file's own folder; a base may again say ``base:``/``overlay:`` (its
overlays come first); a missing file, an overlay fitted on another topology and a chain of
bases that comes back to itself are each a one-paragraph error naming the file and key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from simnode.config.fields import Reader, load_yaml, resolve_path
from simnode.config.overrides import assignment_text
from simnode.config.topology import based_mapping
from simnode.errors import ConfigError

VERSION = 1
HEADER = """\
# simnode calibration overlay, written by `simnode calibrate`. The values under `values:`
# were FITTED to the measured cases listed under `fit:` (a fit, not a source): apply it with
# --topology-overlay FILE (run, sweep, validate, describe), sweep --band, or a topology file's
# `overlay:` key; `simnode validate` with it shows those cases as `fit`, never as checks. The
# uncalibrated topology stays the default.
"""


@dataclass(frozen=True)
class FittedCase:
    id: str
    metric: str
    measured: float
    tolerance: float
    workload: str = ""
    sets: tuple = ()


@dataclass(frozen=True)
class Overlay:
    path: str
    topology: str                  #: the topology it was fitted on, as written
    values: dict                   #: --set key -> fitted value
    cases: tuple = ()              #: FittedCase records
    cases_file: str = ""
    date: str = ""
    simnode_version: str = ""
    note: str = ""
    record: dict = field(default_factory=dict, compare=False)   #: the whole ``fit:`` mapping

    def sets(self) -> list[str]:
        """The values as ``--set`` assignments (typed values survive: ``assignment_text``)."""
        return [assignment_text(k, v) for k, v in self.values.items()]

    def fitted(self, case_id: str, metric: str, measured: float) -> bool:
        """Whether the case (by id, metric and measured value) is one the values were fitted to."""
        return any(c.id == case_id and c.metric == metric and c.measured == measured
                   for c in self.cases)

    def base_path(self) -> Path:
        return resolve_path(self.topology, self.path)

    def describe(self) -> str:
        """One line: where the values come from (``simnode describe``, validate's summary)."""
        ids = ", ".join(c.id for c in self.cases) or "no cases"
        when = f", {self.date}" if self.date else ""
        return f"calibrated on {ids} (overlay {self.path}{when})"


def _near(written: str, file: Path) -> Path:
    """A path written in ``file``: relative ones from the file's folder (normalized, so a
    ``../`` does not show in messages and describe)."""
    p = Path(written).expanduser()
    return p if p.is_absolute() else Path(os.path.normpath(file.parent / p))


def expand_topology(path) -> tuple[str, tuple]:
    """(the topology file that holds the chip and supernode, the ``Overlay``s to apply on
    it in order) for a topology path: a file with ``base:``/``overlay:`` keys gives its
    base (followed while the base says so again) and its overlays, every overlay checked to
    be fitted on that base; any other path (a plain topology, or one that does not exist,
    which the loader reports) gives itself and none. See the module docstring."""
    first = Path(path)
    chain: list[Path] = []
    levels: list[list] = []
    current = first
    while True:
        data = based_mapping(current)
        if data is None:
            break
        chain.append(current)
        r = Reader(data, str(current))
        written = r.raw("base", None)
        if not isinstance(written, str) or not written.strip():
            raise r.error("base", written, "the topology file the overlays apply to (a path, "
                          "relative to this file), beside overlay:" + (
                              " (a topology that names overlays holds no chip of its own: an "
                              "overlay is fitted on one topology file, named here as base:)"
                              if r.has("chip") or r.has("supernode") else ""))
        raw = r.raw("overlay", [])
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not items or not all(isinstance(i, str) and i.strip()
                                                              for i in items):
            raise r.error("overlay", raw, "an overlay file or a list of them (paths relative to "
                          "this file; calibration overlays written by `simnode calibrate`)")
        r.string("note", default="")
        r.finish()
        mine = []
        for i, item in enumerate(items):
            at = Path(_near(item, current))
            key = "overlay" if isinstance(raw, str) else f"overlay[{i}]"
            if not at.is_file():
                raise r.error(key, item, f"an existing overlay file (relative paths are read from "
                              f"this file's folder: {at} does not exist)")
            mine.append((key, item, load_overlay(str(at), f"{current}: {key}")))
        levels.append(mine)
        base = _near(written, current)
        if not base.is_file():
            raise r.error("base", written, f"an existing topology file (relative paths are read "
                          f"from this file's folder: {base} does not exist)")
        if any(base.resolve() == c.resolve() for c in chain):
            loop = " -> ".join(str(c) for c in chain + [base])
            raise r.error("base", written, f"a topology that does not lead back to this file "
                          f"(the bases go round: {loop})")
        current = base
    if not chain:
        return str(path), ()
    overlays = []
    for file, mine in zip(reversed(chain), reversed(levels)):     # the deepest base's first
        for key, item, o in mine:
            if o.base_path().resolve() != current.resolve():
                raise ConfigError(str(file), key, item, f"an overlay fitted on this file's base "
                                  f"topology ({current}); {o.path} was fitted on {o.topology}, and an "
                                  f"overlay's values apply to the topology they were fitted on alone")
            if not any(Path(o.path).resolve() == Path(k.path).resolve() for k in overlays):
                overlays.append(o)
    return str(current), tuple(overlays)


def _scalar(value) -> bool:
    return isinstance(value, (int, float, str, bool)) or value is None


def load_overlay(path, option: str = "--topology-overlay") -> Overlay:
    """Read and check the overlay at ``path``; ``option`` names where the path was given
    (an empty or missing path is an error of that option)."""
    if not str(path).strip():
        raise ConfigError(option, option.lstrip("-"), path, "an overlay file path (it is empty)")
    if not Path(path).is_file():
        raise ConfigError(option, option.lstrip("-"), path, "an existing overlay file (a YAML "
                          "written by `simnode calibrate`, e.g. topologies/calibrated/*.yaml)")
    try:
        data = load_yaml(path)
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), "", f"<byte {exc.start}>", "a UTF-8 text file of YAML") from None
    r = Reader(data, str(path))
    version = r.raw("overlay")
    if isinstance(version, bool) or version != VERSION:
        raise r.error("overlay", version, f"the overlay format version {VERSION} (a calibration "
                      "overlay written by `simnode calibrate`)")
    topology = r.string("topology")
    if not topology.strip():
        raise r.error("topology", topology, "the topology file the overlay was fitted on")
    values = r.raw("values")
    if not isinstance(values, dict) or not values:
        raise r.error("values", values, "a non-empty mapping of --set keys to fitted values")
    for k, v in values.items():
        if not isinstance(k, str) or not k.strip() or "=" in k:
            raise r.error(f"values.{k}", v, "a --set key (topology.KEY... or a workload field)")
        if not _scalar(v) or v is None:
            raise r.error(f"values.{k}", v, "a number, string or boolean")
        _check_declared(r, k, v)
    note = r.string("note", default="")
    fit = r.raw("fit", {})
    if not isinstance(fit, dict):
        raise r.error("fit", fit, "a mapping (how the values were fitted)")
    f = Reader(fit, str(path), "fit")
    cases_file = f.string("cases_file", default="")
    raw_cases = f.raw("cases", [])
    if not isinstance(raw_cases, list):
        raise f.error("cases", raw_cases, "a list of the cases the values were fitted to")
    cases = []
    for i, item in enumerate(raw_cases):
        c = Reader(item, str(path), f"fit.cases[{i}]")
        sets = c.raw("set", {})
        if not isinstance(sets, dict):
            raise c.error("set", sets, "a mapping of field: value")
        cases.append(FittedCase(c.string("id"), c.string("metric"), c.number("measured"),
                                c.number("tolerance", positive=True), c.string("workload", default=""),
                                tuple(assignment_text(k, v) for k, v in sets.items())))
        c.finish()
    date = f.raw("date", "")
    version_text = f.raw("simnode_version", "")
    for _ in ("objective", "bounds", "start", "residuals", "intervals", "within_tolerance",
              "runs", "sets", "overlays"):
        f.raw(_, None)
    f.finish()
    r.finish()
    return Overlay(str(path), topology, dict(values), tuple(cases), cases_file, str(date),
                   str(version_text), note, dict(fit))


def applying(overlays: list, topology_path) -> list:
    """The overlays among ``overlays`` fitted on ``topology_path`` (same file; for a file
    that names overlays, its base: ``expand_topology``)."""
    try:
        target = Path(expand_topology(topology_path)[0]).resolve()
    except OSError:
        return []
    return [o for o in overlays if o.base_path().resolve() == target]


def _check_declared(r: Reader, key: str, value) -> None:
    """A ``topology.*`` key must name a declared parameter (``simnode.config.params``); a
    workload key is checked against the workload's fields when a run loads the overlay."""
    if not key.startswith("topology."):
        return
    from simnode.config.fields import did_you_mean
    from simnode.config.topology import declared_keys
    keys = declared_keys()
    dotted = key[len("topology."):]
    if dotted not in keys:
        raise r.error(f"values.{key}", value, "a declared topology parameter (topology.chip.KEY "
                      "or topology.supernode.KEY; `simnode describe TOPOLOGY` lists them)",
                      did_you_mean(key, ["topology." + k for k in keys]))


class _Dumper(yaml.SafeDumper):
    """Block mappings, flow lists and small mappings of scalars (bounds, a case's set:)."""


def _short(dumper, data):
    flow = all(_scalar(v) for v in data) and len(data) <= 8
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


def _mapping(dumper, data):
    flow = 0 < len(data) <= 4 and all(_scalar(v) for v in data.values()) and \
        all(len(str(k)) < 24 for k in data)
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow)


_Dumper.add_representer(list, _short)
_Dumper.add_representer(dict, _mapping)


def dump_overlay(topology: str, values: dict, fit: dict, note: str = "") -> str:
    """The overlay file's text (see the module docstring); ``fit`` in the documented keys."""
    body = {"overlay": VERSION, "topology": topology, "values": dict(values)}
    if note:
        body["note"] = note
    body["fit"] = fit
    return HEADER + yaml.dump(body, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
