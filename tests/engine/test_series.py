"""Binned utilization series: bytes preserved, memory bounded by merging bins."""

import numpy as np
import pytest

from simnode.engine.series import BinnedSeries


def test_bins_merge_when_time_runs_past_them_and_keep_every_byte():
    s = BinnedSeries(2, max_bins=4, bin_ns=10.0)
    s.add_rates(0.0, 25.0, np.array([1.0, 2.0]))          # bins of 10 ns: 10, 10, 5
    assert s.bytes[:3, 0].tolist() == [10.0, 10.0, 5.0]
    s.add_rates(25.0, 100.0, np.array([1.0, 0.0]))        # past 4 x 10 ns: 20 ns, then 40 ns bins
    assert s.bin_ns == 40.0 and s.bytes.shape == (4, 2)
    assert s.bytes[:, 0].sum() == pytest.approx(100.0)
    assert s.bytes[:, 1].sum() == pytest.approx(50.0)
    edges, util = s.utilization(np.array([1.0, 2.0]))
    assert edges.tolist() == [0.0, 40.0, 80.0, 120.0]
    assert util[:, 0].tolist() == pytest.approx([1.0, 1.0, 0.5])


def test_points_and_spans_land_in_their_bins():
    s = BinnedSeries(3, max_bins=8, bin_ns=10.0)
    s.add_points(np.array([5.0, 15.0]), np.array([0, 2]), np.array([3.0, 4.0]))
    s.add_span(10.0, 30.0, np.array([1]), np.array([8.0]))
    assert s.bytes[0].tolist() == [3.0, 0.0, 0.0]
    assert s.bytes[1].tolist() == [0.0, 4.0, 4.0]
    assert s.bytes[2].tolist() == [0.0, 4.0, 0.0]


def test_bad_shapes():
    with pytest.raises(ValueError, match="even"):
        BinnedSeries(1, max_bins=3)
    with pytest.raises(ValueError, match="bin_ns"):
        BinnedSeries(1, bin_ns=0)


class _MergeEveryRow(BinnedSeries):
    """The merge as it was: every row of the table summed pairwise at each doubling."""

    def _fit(self, t_ns: float) -> None:
        while t_ns >= self.max_bins * self.bin_ns:
            half = self.max_bins // 2
            self.bytes[:half] = self.bytes[0::2] + self.bytes[1::2]
            self.bytes[half:] = 0.0
            self.bin_ns *= 2


def test_merging_only_the_rows_with_data_gives_the_same_bytes_bit_for_bit():
    # _fit merges the rows up to end_ns only; adds of every kind, at bin edges (a point at
    # t1 lands in the bin after t1 - eps), far ahead (several doublings at once) and at
    # random, must leave exactly the table the full merge leaves
    rng = np.random.default_rng(7)
    fast, full = BinnedSeries(5, max_bins=8, bin_ns=10.0), _MergeEveryRow(5, max_bins=8, bin_ns=10.0)
    t = 0.0
    for step in range(400):
        kind = step % 4
        t1 = t + float(rng.choice([0.0, 10.0, 40.0, rng.uniform(0, 30), rng.uniform(0, 3000)]))
        if step % 37 == 0:
            t1 = fast.max_bins * fast.bin_ns           # exactly the end of the table
        for s in (fast, full):
            r = np.random.default_rng(step)
            if kind == 0:
                s.add_rates(t, t1, r.uniform(0, 5, 5))
            elif kind == 1:
                s.add_span(t, t1, r.integers(0, 5, 3), r.uniform(0, 9, 3))
            elif kind == 2:
                s.add_spans(np.array([t, (t + t1) / 2, t1]), t1, r.integers(-1, 5, (3, 2)),
                            r.uniform(0, 9, (3, 2)))
            else:
                s.add_points(np.array([t1, t]), r.integers(0, 5, 2), r.uniform(0, 9, 2))
        assert fast.bin_ns == full.bin_ns and fast.end_ns == full.end_ns
        assert fast.bytes.tobytes() == full.bytes.tobytes(), step
        t = t1
    assert fast.bin_ns > 10.0 * 2 ** 8                   # it did double, many times
