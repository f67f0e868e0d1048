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
