"""The measured cases of a calibration and the runs that evaluate a point.

``prepare(topology, cases_file, ...)`` -> (``Problem``, start point): everything a fit needs,
checked before anything runs. ``parse_fit("KEY=LO:HI")`` reads a ``--fit`` and
``parse_starts`` the ``--start`` values; ``calibration_cases(topology, cases, patterns)``:
the cases of a validation-format file (``simnode.runs.cases.load_cases``) that a fit uses,
each checked to run on ``topology``; ``Problem`` holds what a fit needs (the topology, the
cases, the free parameters with their kind, the fixed ``--set`` assignments and overlays)
and ``Problem.evaluate(points)`` parses every case at every point into a ``RunSpec`` and
runs them all at once through the one executor (``simnode.runs.executor.execute``: each
distinct run once, in worker processes), and returns each point's relative errors ``(model
- measured) / measured``.

A free key is checked before anything runs: its bounds must load (``--set KEY=LO`` and
``KEY=HI`` are valid for every case), and a key the loader reads as an integer is fitted
over integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simnode.calibrate.solver import Free
from simnode.config.overrides import assignment_text, parse_assignment, parse_value
from simnode.errors import ConfigError
from simnode.config.fields import resolve_path
from simnode.runs.entries import in_entry, select, set_key


def parse_fit(spec: str) -> tuple[str, float, float]:
    """``KEY=LO:HI`` -> (key, lo, hi); errors name ``--fit``."""
    key, _ = parse_assignment(spec, "--fit")
    # the raw text, not the YAML value: YAML 1.1 reads 200:400 as a base-60 number
    raw = spec.partition("=")[2].strip()
    parts = raw.split(":")
    if len(parts) != 2:
        raise ConfigError("--fit", key, raw, "LO:HI, the bounds of the fitted value (e.g. "
                          "topology.supernode.urma_wqe_ns_per_peer=0:0.5)")
    bounds = []
    for part in parts:
        v = parse_value(part.strip())
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError("--fit", key, raw, "LO:HI with two finite numbers")
        bounds.append(float(v))
    lo, hi = bounds
    if not lo < hi:
        raise ConfigError("--fit", key, raw, "LO:HI with LO < HI")
    return key, lo, hi


def calibration_cases(topology, cases: list, patterns=()) -> list:
    """The cases a fit uses: those matching ``patterns`` (all if none); each must run on
    ``topology`` (a fit's values belong to one topology)."""
    chosen = select(cases, list(patterns))
    target = Path(topology).resolve()
    for c in chosen:
        if resolve_path(c.topology, c.file).resolve() != target:
            raise ConfigError(c.where, c.key_path("topology"), c.topology,
                              f"the topology being calibrated ({topology}): a fit's values belong to "
                              f"one topology (choose this file's cases with --only)")
    return chosen


@dataclass
class Problem:
    """A calibration problem; see the module docstring."""
    topology: str
    cases: list                        #: simnode.runs.cases.Case records
    free: list = field(default_factory=list)   #: Free records
    sets: tuple = ()                   #: the user's --set assignments, for every case
    user_sets: tuple = ()              #: the same (kept for the overlay's record)
    overlays: tuple = ()               #: Overlay records applied beneath the fit
    jobs: int = 0
    runs: int = 0                      #: simulations run so far
    verbose: bool = False              #: a line on stderr per batch of points (long fits)

    @property
    def tolerances(self) -> np.ndarray:
        return np.array([c.tolerance for c in self.cases], dtype=float)

    def load(self, case, extra=()):
        """The case's ``RunSpec`` with the fixed sets, the overlays and ``extra`` assignments."""
        from simnode.workloads.loader import load_inputs
        workload = str(resolve_path(case.workload, case.file))
        return load_inputs(str(Path(self.topology)), workload,
                           list(self.sets) + list(case.sets) + list(extra), overlays=self.overlays)

    def _task(self, case, values: tuple):
        free_sets = [assignment_text(p.key, _typed(p, v)) for p, v in zip(self.free, values)]
        return self.load(case, free_sets)

    def evaluate(self, points: list) -> list:
        """Relative errors of every case at each point (a point: one value per free key)."""
        from simnode.runs.executor import execute
        specs = [self._task(c, p) for p in points for c in self.cases]
        labels = [c.where for _ in points for c in self.cases]
        results = execute(specs, self.jobs, labels=labels, title="calibrate",
                          progress=False if self.verbose else None)
        self.runs += len({s.key for s in specs})
        n = len(self.cases)
        rows = []
        for i in range(len(points)):
            row = []
            for c, result in zip(self.cases, results[i * n:(i + 1) * n]):
                row.append((c.model_value(result.to_dict()) - c.published) / c.published)
            rows.append(np.array(row))
        if self.verbose:
            import sys
            for p, r in zip(points, rows):
                print(f"calibrate: {', '.join(f'{f.key}={v:g}' for f, v in zip(self.free, p))}: "
                      f"errors {', '.join(f'{100 * x:+.2f}%' for x in r)}", file=sys.stderr, flush=True)
        return rows

    def current(self, key: str):
        """The value of ``key`` the first case runs with (the fit's start, before clipping)."""
        from simnode.runs.provenance import value_in_use
        return value_in_use(self.load(self.cases[0]), key)


def _typed(p: Free, v: float):
    return int(v) if p.integer else float(v)


def free_params(problem: Problem, specs: list[str]) -> list:
    """The ``--fit`` specs as ``Free`` records, each key checked against every case at both
    bounds; an integer key (as the loader reads it) is fitted over integers."""
    out, seen = [], set()
    for spec in specs:
        key, lo, hi = parse_fit(spec)
        if key in seen:
            raise ConfigError("--fit", key, spec.partition("=")[2], "each key once")
        seen.add(key)
        for c in problem.cases:
            for v in (lo, hi):
                try:
                    problem.load(c, [assignment_text(key, v)])
                except ConfigError as exc:
                    if set_key(exc.key_path, [key]) is not None:
                        raise ConfigError("--fit", key, spec.partition("=")[2], f"bounds the run accepts (at {v:g}, "
                                          f"{c.where}: expected {exc.expected})", exc.hint) from None
                    if any(exc.source == o.path for o in problem.overlays):
                        raise
                    raise in_entry(exc, c.where, c.key_path("set"), c.sets, problem.sets) from None
        integer = not _accepts_fraction(problem, problem.cases[0], key, lo, hi)
        if integer and not (float(lo).is_integer() and float(hi).is_integer()):
            raise ConfigError("--fit", key, spec.partition("=")[2], "integer bounds: the key takes integers")
        out.append(Free(key, lo, hi, integer))
    if not out:
        raise ConfigError("--fit", "", "<none>", "at least one --fit KEY=LO:HI")
    return out


def _accepts_fraction(problem: Problem, case, key: str, lo: float, hi: float) -> bool:
    """Whether ``key`` accepts a non-integer value between the bounds (False: an integer key)."""
    mid = lo + (hi - lo) / 2
    if float(mid).is_integer():
        mid += 0.25 if mid + 0.25 <= hi else -0.25
    try:
        problem.load(case, [assignment_text(key, mid)])
    except ConfigError as exc:
        if exc.expected.startswith("an integer"):
            return False
    return True


def parse_starts(specs: list, free: list) -> dict:
    """``--start KEY=VALUE`` -> {key: value}: each a key of a --fit, once, a finite number
    within its bounds (a whole number for an integer key)."""
    bounds = {p.key: p for p in free}
    out = {}
    for spec in specs:
        key, value = parse_assignment(spec, "--start")
        raw = spec.partition("=")[2].strip()
        p = bounds.get(key)
        if p is None:
            raise ConfigError("--start", key, raw, "a key fitted with --fit (fitted: "
                              + ", ".join(sorted(bounds)) + ")")
        if key in out:
            raise ConfigError("--start", key, raw, "each key once")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not p.lo <= value <= p.hi:
            raise ConfigError("--start", key, raw, f"a number within the --fit bounds {p.lo:g}..{p.hi:g}")
        if p.integer and not float(value).is_integer():
            raise ConfigError("--start", key, raw, "a whole number: the key takes integers")
        out[key] = value
    return out


def prepare(topology, cases_file, patterns=(), fits=(), starts=(), sets=(), overlays=(),
            jobs: int = 0, verbose: bool = False) -> tuple[Problem, list]:
    """The calibration problem of ``topology`` on the cases of ``cases_file`` matching
    ``patterns``, with the free keys of ``fits`` (``--fit`` text), the fixed ``sets``
    (``--set`` text) and ``overlays`` (``Overlay`` records) for every case, and its start
    point: a ``starts`` value (``--start`` text) where given, else the value the first case
    runs with (the middle of the bounds if that is no number). A topology file that names
    overlays is calibrated as its base, with those overlays beneath the fit. Every case
    loads and every free key is checked at its bounds before this returns."""
    from simnode.runs.cases import load_cases
    from simnode.workloads.loader import check_overlays, with_named_overlays
    topology, overlays = with_named_overlays(topology, overlays)
    cases = calibration_cases(topology, load_cases(cases_file), patterns)
    check_overlays(overlays, topology)
    problem = Problem(topology, cases, sets=tuple(sets), user_sets=tuple(sets), overlays=overlays,
                      jobs=jobs, verbose=verbose)
    for c in cases:
        problem.load(c)                      # every case loads with the overlays, before any run
    problem.free = free_params(problem, fits)
    chosen = parse_starts(starts, problem.free)
    start = []
    for p in problem.free:
        v = chosen[p.key] if p.key in chosen else problem.current(p.key)
        start.append(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                     else (p.lo + p.hi) / 2)
    return problem, start
