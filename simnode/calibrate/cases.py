"""The measured cases of a calibration and the runs that evaluate a point.

``parse_fit("KEY=LO:HI")`` -> ``Free`` (``--fit``); ``calibration_cases(topology, cases,
patterns)``: the cases of a validation-format file (``simnode.commands.validate.load_cases``)
that a fit uses, each checked to run on ``topology``; ``Problem`` holds what a fit needs (the
topology, the cases, the free parameters with their kind, the fixed ``--set`` assignments
and overlays) and ``Problem.evaluate(points)`` parses every case at every point into a
``RunSpec`` and runs them all at once through the one executor
(``simnode.commands.executor.execute``: each distinct run once, in worker processes), and
returns each point's relative errors ``(model - measured) / measured``.

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
    from simnode.commands.baselines import select
    from simnode.commands.validate import resolve
    chosen = select(cases, list(patterns))
    target = Path(topology).resolve()
    for c in chosen:
        if resolve(c.topology, c.file).resolve() != target:
            raise ConfigError(c.where, c.key_path("topology"), c.topology,
                              f"the topology being calibrated ({topology}): a fit's values belong to "
                              f"one topology (choose this file's cases with --only)")
    return chosen


@dataclass
class Problem:
    """A calibration problem; see the module docstring."""
    topology: str
    cases: list                        #: simnode.commands.validate.Case records
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
        from simnode.commands.validate import resolve
        from simnode.workloads.loader import load_inputs
        workload = str(resolve(case.workload, case.file))
        return load_inputs(str(Path(self.topology)), workload,
                           list(self.sets) + list(case.sets) + list(extra), overlays=self.overlays)

    def _task(self, case, values: tuple):
        free_sets = [assignment_text(p.key, _typed(p, v)) for p, v in zip(self.free, values)]
        return self.load(case, free_sets)

    def evaluate(self, points: list) -> list:
        """Relative errors of every case at each point (a point: one value per free key)."""
        from simnode.commands.executor import execute
        from simnode.commands.validate import _numeric
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
                out = result.to_dict()
                if c.metric not in _numeric(out):
                    raise ConfigError(c.where, c.key_path("metric"), c.metric,
                                      "a numeric field of the run's JSON result: "
                                      + ", ".join(_numeric(out)))
                row.append((float(out[c.metric]) - c.published) / c.published)
            rows.append(np.array(row))
        if self.verbose:
            import sys
            for p, r in zip(points, rows):
                print(f"calibrate: {', '.join(f'{f.key}={v:g}' for f, v in zip(self.free, p))}: "
                      f"errors {', '.join(f'{100 * x:+.2f}%' for x in r)}", file=sys.stderr, flush=True)
        return rows

    def current(self, key: str):
        """The value of ``key`` the first case runs with (the fit's start, before clipping)."""
        from simnode.calibrate.provenance import value_in_use
        return value_in_use(self.load(self.cases[0]), key)


def _typed(p: Free, v: float):
    return int(v) if p.integer else float(v)


def free_params(problem: Problem, specs: list[str]) -> list:
    """The ``--fit`` specs as ``Free`` records, each key checked against every case at both
    bounds; an integer key (as the loader reads it) is fitted over integers."""
    from simnode.commands.validate import _set_key, in_entry
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
                    if _set_key(exc.key_path, [key]) is not None:
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
