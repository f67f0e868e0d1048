"""The calibration solver on closed-form residuals (no simulation): recovery, integer
search, profile intervals, determinism, and lockstep batching of independent searches."""

from __future__ import annotations

import numpy as np
import pytest

from simnode.calibrate.solver import Free, drive, fit, together, worst


def linear(points):
    """Two cases that depend on a only (a = 3 fits both), none on b."""
    return [np.array([(2 * a + 1) / 7.0 - 1.0, a * a / 9.0 - 1.0]) for a, _b in points]


def test_recovers_a_known_value_from_a_wrong_start():
    f = fit([Free("a", 0, 10)], [8.0], lambda pts: linear([(p[0], 0) for p in pts]), [0.05, 0.05])
    assert f.best.values[0] == pytest.approx(3.0, rel=1e-4)
    assert f.best.sse < 1e-12


def test_the_profile_interval_is_where_every_case_stays_within_tolerance():
    f = fit([Free("a", 0, 10), Free("b", -5, 5)], [8.0, 1.0], linear, [0.05, 0.05])
    lo, hi = f.intervals[0]
    # |(2a+1)/7 - 1| <= 0.05 and |a^2/9 - 1| <= 0.05: a in [2.924, 3.074]
    assert 2.924 <= lo < 2.95 and 3.05 < hi <= 3.0742
    assert f.at_bound[0] == (False, False)


def test_a_value_no_case_depends_on_has_an_interval_as_wide_as_its_bounds():
    f = fit([Free("a", 0, 10), Free("b", -5, 5)], [8.0, 1.0], linear, [0.05, 0.05])
    assert f.intervals[1] == (-5, 5) and f.at_bound[1] == (True, True)


def test_no_interval_when_no_value_keeps_every_case_within_tolerance():
    # the two cases want a = 3 and a = 4: no a is within 1% of both
    def ev(points):
        return [np.array([p[0] / 3 - 1, p[0] / 4 - 1]) for p in points]
    f = fit([Free("a", 0, 10)], [1.0], ev, [0.01, 0.01])
    assert f.intervals == [None]
    assert 3 < f.best.values[0] < 4


def cache_like(points):
    """A cost that misses 1 - C/P of the time at P = 7 and 127 peers (C entries, m ns)."""
    out = []
    for c, m in points:
        out.append(np.array([(1 - 0.02 * max(0.0, 1 - c / p) * m) / target - 1
                             for p, target in ((7, 0.97), (127, 0.80))]))
    return out


def test_an_integer_value_is_searched_over_integers_with_the_others_refitted():
    f = fit([Free("C", 1, 127, integer=True), Free("m", 0, 50)], [64, 5], cache_like, [0.03, 0.03])
    c, m = f.best.values
    assert c == 6 and float(c).is_integer()
    assert m == pytest.approx(10.5, rel=0.01)
    assert f.best.sse < 1e-8
    assert f.intervals[0][0] <= 6 <= f.intervals[0][1]


def test_fits_are_deterministic():
    a = fit([Free("C", 1, 127, integer=True), Free("m", 0, 50)], [64, 5], cache_like, [0.03, 0.03])
    b = fit([Free("C", 1, 127, integer=True), Free("m", 0, 50)], [64, 5], cache_like, [0.03, 0.03])
    assert a.best.values == b.best.values and a.intervals == b.intervals and a.runs == b.runs


def test_independent_searches_hand_their_points_over_together():
    def search(x):
        (r,) = yield [(x,)]
        (s, t) = yield [(x + 1,), (x + 2,)]
        return float(r[0] + s[0] + t[0])

    calls = []

    def ev(points):
        calls.append(list(points))
        return [np.array([p[0]]) for p in points]
    values, runs = drive(together([search(0.0), search(10.0)]), ev)
    assert values == [3.0, 33.0]
    assert calls == [[(0.0,), (10.0,)], [(1.0,), (2.0,), (11.0,), (12.0,)]]
    assert runs == 6


def test_worst_is_the_largest_error_over_tolerance():
    assert worst(np.array([0.01, -0.06]), np.array([0.02, 0.03])) == pytest.approx(2.0)


def test_a_value_that_binds_only_past_a_threshold_is_found():
    # the figure moves only once a > 6 (a resource that binds late): flat at the start
    def ev(points):
        return [np.array([max(p[0], 6.0) / 8.0 - 1.0]) for p in points]
    f = fit([Free("a", 0, 10)], [2.0], ev, [0.05])
    assert f.best.values[0] == pytest.approx(8.0, rel=1e-3)


def test_a_value_with_a_misleading_slope_at_the_start_is_still_found():
    # below 6 the value barely moves the figure (and the wrong way for the fit); past it, a
    # resource binds: the first try across the bounds finds the region
    def ev(points):
        out = []
        for (a,) in points:
            y = 0.9 + 0.0005 * a if a < 6 else 0.903 + (a - 6) * 0.05
            out.append(np.array([y - 1.0]))
        return out
    f = fit([Free("a", 0, 10)], [0.0], ev, [0.05])
    assert f.best.values[0] == pytest.approx(7.94, rel=1e-3)


def valley(points):
    """A value w hidden below 40, that meets its case at 43 and overshoots past 46 (a cost
    that binds only in a narrow valley, as a WQE time behind a busier resource), and a."""
    def r2(w):
        if w <= 40:
            return 0.04
        if w <= 46:
            return 0.04 - (w - 40) * 0.04 / 3
        return -0.04 - (w - 46) * 0.1
    return [np.array([a - 0.3, r2(w)]) for a, w in points]


def test_a_point_run_on_the_way_that_beats_the_fit_restarts_the_search():
    # from w = 10 the scans (0, 25, 50, ...) miss the valley and the slope there is 0; the
    # profile's bisection toward 100 runs w = 43.75, better than the fit: search again there
    f = fit([Free("a", 0, 1), Free("w", 0, 100)], [0.5, 10.0], valley, [0.06, 0.06])
    assert f.best.values[0] == pytest.approx(0.3, abs=1e-4)
    assert f.best.values[1] == pytest.approx(43.0, abs=0.05)
    assert f.best.sse < 1e-6
