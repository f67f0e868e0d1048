"""Bounded least squares on relative errors, and profile intervals, for ``simnode calibrate``.

The model is a black box: ``evaluate(points) -> residuals`` runs it at a list of points
(one value per free parameter) and returns, per point, the vector of relative errors
``(model - measured) / measured`` of the cases. Nothing here runs a simulation; the
caller decides how (``simnode.calibrate.cases`` runs every point's cases in parallel).

- ``Free(key, lo, hi, integer)``: one free parameter and its bounds.
- ``fit(free, start, evaluate, tolerances)`` -> ``Fit``: the values minimizing the sum of
  squared relative errors inside the bounds (Levenberg-Marquardt with forward
  differences on the continuous parameters, a golden-section search over each integer
  one with the others re-fitted at every probe), then, per parameter, its *profile
  interval*: the values over which, the other parameters free to move, every case stays
  within its tolerance (``max |error| / tolerance <= 1``). A parameter the cases do not pin
  down has an interval as wide as its bounds. Each end is found on the model linearized
  at the fit (a small linear program: how far can this parameter go, the others moving
  along, before a case leaves its tolerance?) and then checked by a run; where the run
  disagrees, bisection on the segment from the fit finds the last point within every
  tolerance, so a reported end is one the model was run at. (A profile that re-fitted the
  others at every probe would cost a fit per probe: hours at EP128.)

Every search is a generator that yields a list of points and receives their residuals,
so independent searches (the two ends of every interval, the two probes of a golden
section) are run in lockstep and their points reach ``evaluate`` together: with N
worker processes, N runs at once. The order of points is fixed, so a fit is
deterministic: the same inputs give the same values, residuals and intervals.

Values are rounded to ``SIGNIFICANT`` digits before they are evaluated, so the value an
overlay records is exactly the one whose residuals it records. The fit is never worse than
a point run on the way: when one (a profile's end, a scan) beats it, the search starts again
from there (``MAX_RESTARTS``), and the intervals are those of the final fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: significant digits of every evaluated value (what an overlay records)
SIGNIFICANT = 6
#: forward-difference step, as a fraction of a parameter's range
DIFF_STEP = 0.01
#: a search stops when a step moves no parameter by more than this fraction of its range
X_TOL = 1e-5
#: most Levenberg-Marquardt iterations of one fit
MAX_ITER = 40
#: an interval end's bisection stops at this fraction of the segment from the fit
PROFILE_TOL = 0.01
#: where (fractions of the bounds) a fit first tries each continuous value (``_prescan``),
#: and tries again a value that moves no figure at a later start
FLAT_SCAN = (0.0, 0.25, 0.5, 0.75, 1.0)
#: values an integer search scans across the bounds before it narrows down
SCAN_POINTS = 9
#: sums of squares this close (relative) tie: the smaller parameter value wins
TIE_REL = 1e-6
#: searches again from the best point run when it beats the fit by this share of its sum of
#: squares (a profile or a scan found a lower valley), at most MAX_RESTARTS times
RESTART_GAIN = 0.01
MAX_RESTARTS = 3


@dataclass(frozen=True)
class Free:
    """A free parameter: the ``--set`` key it overrides and its bounds (inclusive)."""
    key: str
    lo: float
    hi: float
    integer: bool = False

    @property
    def span(self) -> float:
        return self.hi - self.lo

    def clip(self, value: float) -> float:
        v = min(max(value, self.lo), self.hi)
        if self.integer:
            return float(int(round(v)))
        return _round(v)

    def to_u(self, value: float) -> float:
        return (value - self.lo) / self.span if self.span > 0 else 0.0

    def from_u(self, u: float) -> float:
        return self.clip(self.lo + min(max(u, 0.0), 1.0) * self.span)


def _round(x: float) -> float:
    if x == 0 or not math.isfinite(x):
        return float(x)
    return float(f"{x:.{SIGNIFICANT}g}")


@dataclass
class Point:
    """A fitted point: parameter values, residuals and their sum of squares."""
    values: tuple
    residuals: np.ndarray

    @property
    def sse(self) -> float:
        return float(self.residuals @ self.residuals)


@dataclass
class Fit:
    """What ``fit`` found; ``intervals[k]`` is (lo, hi) or None if no value of parameter k
    keeps every case within its tolerance, ``at_bound[k]`` which ends reached the bounds."""
    free: tuple
    start: tuple
    best: Point
    intervals: list = field(default_factory=list)
    at_bound: list = field(default_factory=list)
    runs: int = 0                   #: distinct points evaluated


def worst(residuals: np.ndarray, tolerances: np.ndarray) -> float:
    """max |error| / tolerance over the cases: <= 1 when every case is within tolerance."""
    return float(np.max(np.abs(residuals) / tolerances)) if len(residuals) else 0.0


# -- running searches together -------------------------------------------------------------

def together(gens: list):
    """Run generator searches in lockstep (a generator itself): each round collects every
    live search's points, yields them as one list, and hands each its share of the
    residuals. Returns the searches' return values, in order."""
    results = [None] * len(gens)
    pending = {}
    for i, g in enumerate(gens):
        try:
            pending[i] = next(g)
        except StopIteration as stop:
            results[i] = stop.value
    while pending:
        order = sorted(pending)
        batch = [p for i in order for p in pending[i]]
        answers = yield batch
        nxt = {}
        pos = 0
        for i in order:
            n = len(pending[i])
            try:
                nxt[i] = gens[i].send(answers[pos:pos + n])
            except StopIteration as stop:
                results[i] = stop.value
            pos += n
        pending = nxt
    return results


def drive(search, evaluate, cache: dict | None = None):
    """Run a search to its end, answering its points with ``evaluate`` (through ``cache``,
    point -> residuals: a point is run once). Returns (the search's value, distinct points
    in the cache)."""
    cache = {} if cache is None else cache
    try:
        batch = next(search)
        while True:
            todo = list(dict.fromkeys(p for p in batch if p not in cache))
            if todo:
                for p, r in zip(todo, evaluate(todo)):
                    cache[p] = np.asarray(r, dtype=float)
            batch = search.send([cache[p] for p in batch])
    except StopIteration as stop:
        return stop.value, len(cache)


# -- the searches ------------------------------------------------------------------------------

def _lm(free: tuple, theta: tuple, fixed: frozenset):
    """Levenberg-Marquardt on the continuous parameters not in ``fixed`` (indices), from
    ``theta``; the others stay as given. Returns the best ``Point``."""
    theta = tuple(p.clip(v) for p, v in zip(free, theta))
    dims = [j for j, p in enumerate(free) if j not in fixed and not p.integer and p.span > 0]
    (r,) = yield [theta]
    best = Point(theta, r)
    lam = 1e-3
    scanned = False
    for _ in range(MAX_ITER):
        if not dims or best.sse < 1e-24:
            break
        u = np.array([free[j].to_u(best.values[j]) for j in dims])
        steps, probes = [], []
        for k, j in enumerate(dims):
            h = DIFF_STEP if u[k] + DIFF_STEP <= 1.0 else -DIFF_STEP
            moved = list(best.values)
            moved[j] = free[j].from_u(u[k] + h)
            steps.append(free[j].to_u(moved[j]) - u[k])
            probes.append(tuple(moved))
        rs = yield probes
        J = np.stack([(rk - best.residuals) / h if h else np.zeros_like(rk)
                      for rk, h in zip(rs, steps)], axis=1)
        flat = [k for k in range(len(dims)) if not np.any(J[:, k])]
        if flat and not scanned:
            # a value that moves no figure here may still matter elsewhere in its bounds (a
            # resource that binds only past some value): try it across them, once
            scanned = True
            tries = []
            for k in flat:
                for q in FLAT_SCAN:
                    moved = list(best.values)
                    moved[dims[k]] = free[dims[k]].from_u(q)
                    if tuple(moved) != best.values:
                        tries.append(tuple(moved))
            rts = yield tries
            cands = [Point(t, rt) for t, rt in zip(tries, rts)]
            pick = min(range(len(cands)), key=lambda i: (cands[i].sse, i), default=None)
            if pick is not None and cands[pick].sse < best.sse:
                best = cands[pick]
                continue
        A, g = J.T @ J, J.T @ best.residuals
        damp = np.maximum(np.diag(A), 1e-12)
        trials, lams = [], (lam, 10 * lam)
        for lk in lams:
            try:
                delta = np.linalg.solve(A + lk * np.diag(damp), -g)
            except np.linalg.LinAlgError:
                delta = -g / (damp * (1 + lk))
            moved = list(best.values)
            for k, j in enumerate(dims):
                moved[j] = free[j].from_u(u[k] + delta[k])
            trials.append(tuple(moved))
        rts = yield trials
        cands = [Point(t, rt) for t, rt in zip(trials, rts)]
        pick = min(range(len(cands)), key=lambda i: (cands[i].sse, i))
        if cands[pick].sse < best.sse:
            moved_by = max(abs(free[j].to_u(cands[pick].values[j]) - free[j].to_u(best.values[j]))
                           for j in dims)
            gain = best.sse - cands[pick].sse
            old = best.sse
            best = cands[pick]
            lam = max(lams[pick] / 10, 1e-9)
            if moved_by < X_TOL or gain <= 1e-12 * old:
                break
        else:
            lam *= 100
            if lam > 1e10:
                break
    return best


def _close(f1: float, f2: float) -> bool:
    """Whether two sums of squares tie (a plateau, up to a search's convergence noise)."""
    return abs(f1 - f2) <= TIE_REL * max(abs(f1), abs(f2)) + 1e-15


def _golden_int(free: tuple, theta: tuple, fixed: frozenset, k: int):
    """Minimize over the integer parameter k, the continuous others re-fitted at each
    probe: a scan of ``SCAN_POINTS`` values across the bounds (run together), then a
    golden section between the scanned neighbours of the best. On a plateau (values whose
    sums of squares tie) the smallest value is taken, here and in the scan, so a fit does
    not wander along a flat stretch; the profile interval then shows the stretch."""
    lo, hi = int(free[k].lo), int(free[k].hi)
    seen: dict = {}

    def at(c, seed):
        t = list(seed)
        t[k] = float(c)
        return _mixed(free, tuple(t), fixed | {k})

    def probe(cs, seed):
        new = [c for c in dict.fromkeys(cs) if c not in seen]
        pts = yield from together([at(c, seed) for c in new])
        seen.update(zip(new, pts))

    def best_of(cs):
        m = min(seen[c].sse for c in cs)
        return min(c for c in cs if _close(seen[c].sse, m))

    grid = sorted({int(round(lo + i * (hi - lo) / (SCAN_POINTS - 1))) for i in range(SCAN_POINTS)})
    yield from probe(grid, theta)
    c0 = best_of(grid)
    i0 = grid.index(c0)
    a, b = grid[max(i0 - 1, 0)], grid[min(i0 + 1, len(grid) - 1)]
    seed = seen[c0].values
    invphi = (math.sqrt(5) - 1) / 2
    while b - a > 3:
        c1 = a + int(round((1 - invphi) * (b - a)))
        c2 = max(a + int(round(invphi * (b - a))), c1 + 1)
        yield from probe([c1, c2], seed)
        f1, f2 = seen[c1].sse, seen[c2].sse
        if f1 < f2 or _close(f1, f2):
            b, seed = c2, seen[c1].values
        else:
            a, seed = c1, seen[c2].values
    yield from probe(list(range(a, b + 1)), seed)
    return seen[best_of(list(seen))]


def _mixed(free: tuple, theta: tuple, fixed: frozenset):
    """The least-squares point with ``fixed`` held: cyclic golden sections over the free
    integer parameters (each probe re-fitting the continuous ones), else one LM."""
    ints = [j for j, p in enumerate(free) if p.integer and j not in fixed and p.span > 0]
    if not ints:
        return (yield from _lm(free, theta, fixed))
    best = None
    for _ in range(3):
        before = best.values if best is not None else None
        for k in ints:
            best = yield from _golden_int(free, best.values if best else theta, fixed, k)
        if len(ints) == 1 or best.values == before:
            break
    return best


def _jacobian(free: tuple, best: Point):
    """Forward differences of the residuals at ``best`` in bounds-scaled units (one probe per
    parameter, a whole integer step for an integer one)."""
    probes, steps = [], []
    for j, p in enumerate(free):
        u = p.to_u(best.values[j])
        h = DIFF_STEP if u + DIFF_STEP <= 1.0 else -DIFF_STEP
        if p.integer and p.span > 0:
            h = max(abs(h), 1.0 / p.span) * (1 if h > 0 else -1)
        moved = list(best.values)
        moved[j] = p.from_u(u + h)
        probes.append(tuple(moved))
        steps.append(p.to_u(moved[j]) - u)
    rs = yield probes
    return np.stack([(r - best.residuals) / h if h else np.zeros_like(r) for r, h in zip(rs, steps)],
                    axis=1)


def linear_extent(J: np.ndarray, r0: np.ndarray, tol: np.ndarray, u0: np.ndarray, k: int,
                  direction: int) -> np.ndarray | None:
    """The step x (bounds-scaled) that moves parameter k farthest in ``direction`` while the
    linearized residuals r0 + J x stay within +-tol and u0 + x within [0, 1]: a small linear
    program, solved by enumerating the vertices of its polytope (few parameters and cases).
    None if no step is feasible."""
    import itertools
    n = J.shape[1]
    A = np.vstack([J, -J, np.eye(n), -np.eye(n)])
    b = np.concatenate([tol - r0, tol + r0, 1.0 - u0, u0])
    if np.all(b >= -1e-12):
        best_x, best_v = np.zeros(n), 0.0
    else:
        best_x, best_v = None, -np.inf
    for rows in itertools.combinations(range(len(b)), n):
        M = A[list(rows)]
        if abs(np.linalg.det(M)) < 1e-12:
            continue
        x = np.linalg.solve(M, b[list(rows)])
        if np.all(A @ x <= b + 1e-9) and direction * x[k] > best_v + 1e-15:
            best_x, best_v = x, direction * x[k]
    return best_x


def _edge(free: tuple, best: Point, J: np.ndarray, k: int, direction: int, tolerances):
    """The far end, from the best value of parameter k toward ``direction``, of the values
    that keep every case within tolerance with the others moved along: the linear program's
    end (``linear_extent``), checked by a run; where the run leaves a tolerance, the last
    point within them on the segment from the best point, by bisection. Returns
    (value, reached the bound)."""
    p = free[k]
    u0 = np.array([q.to_u(v) for q, v in zip(free, best.values)])
    x = linear_extent(J, best.residuals, tolerances, u0, k, direction)
    if x is None:
        return None, False

    def at(t: float) -> tuple:
        return tuple(q.from_u(u + t * dx) for q, u, dx in zip(free, u0, x))

    (r,) = yield [at(1.0)]
    if worst(r, tolerances) <= 1:
        end = at(1.0)[k]
        return end, end == (p.hi if direction > 0 else p.lo)
    inside, outside = 0.0, 1.0
    while outside - inside > PROFILE_TOL and at(outside)[k] != at(inside)[k]:
        mid = (inside + outside) / 2
        (r,) = yield [at(mid)]
        if worst(r, tolerances) <= 1:
            inside = mid
        else:
            outside = mid
    return at(inside)[k], False


def _prescan(free: tuple, theta: tuple):
    """Each continuous value in turn tried across its bounds (``FLAT_SCAN``), the others
    held, keeping the best: a value whose resource binds only past some point (a copy
    engine hidden behind the links until its cost grows) has no slope to follow at the
    start, and a fit from there would never move it."""
    (r,) = yield [theta]
    best = Point(theta, r)
    for j, p in enumerate(free):
        if p.integer or p.span <= 0:
            continue
        tries = []
        for q in FLAT_SCAN:
            moved = list(best.values)
            moved[j] = p.from_u(q)
            if tuple(moved) != best.values:
                tries.append(tuple(moved))
        rts = yield tries
        for t, rt in zip(tries, rts):
            if Point(t, rt).sse < best.sse:
                best = Point(t, rt)
    return best


def _search(free: tuple, start: tuple, tolerances, profile: bool):
    seed = yield from _prescan(free, start)
    best = yield from _mixed(free, seed.values, frozenset())
    if not profile:
        return best, [], []
    if worst(best.residuals, tolerances) > 1:
        return best, [None] * len(free), [(False, False)] * len(free)
    J = yield from _jacobian(free, best)
    ends = yield from together([_edge(free, best, J, k, d, tolerances)
                                for k in range(len(free)) for d in (-1, 1)])
    intervals = [(ends[2 * k][0], ends[2 * k + 1][0]) for k in range(len(free))]
    at_bound = [(ends[2 * k][1], ends[2 * k + 1][1]) for k in range(len(free))]
    return best, intervals, at_bound


def fit(free: list, start: list, evaluate, tolerances, profile: bool = True) -> Fit:
    """Fit ``free`` parameters from ``start`` (clipped into the bounds); see the module
    docstring. ``tolerances``: each case's tolerance (fraction), in residual order."""
    free = tuple(free)
    start = tuple(p.clip(v) for p, v in zip(free, start))
    tol = np.asarray(tolerances, dtype=float)
    cache: dict = {}
    (best, intervals, at_bound), runs = drive(_search(free, start, tol, profile), evaluate, cache)
    for _ in range(MAX_RESTARTS):
        # a point run on the way (a profile's end, a scan) that beats the fit: the search
        # stopped in a local minimum (a value that binds only in a narrow valley); search
        # again from the best point run, so the fit is never worse than a point it has seen
        seen = min(cache, key=lambda t: (float(cache[t] @ cache[t]), t))
        if not float(cache[seen] @ cache[seen]) < best.sse * (1 - RESTART_GAIN):
            break
        (best, intervals, at_bound), runs = drive(_search(free, seen, tol, profile), evaluate, cache)
    return Fit(free, start, best, intervals, at_bound, runs)
