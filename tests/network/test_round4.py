"""``workloads.supernode.round4``: the series' rounding in numpy, equal to Python's round."""

import numpy as np

from simnode.workloads.supernode import round4


def test_round4_equals_python_round_bit_for_bit():
    rng = np.random.default_rng(5)
    a = np.concatenate([
        rng.uniform(0.0, 1.0, 20000), rng.uniform(-3.0, 3.0, 2000),
        np.arange(-20000, 20001) / 20000.0,                  # ties and near-ties at k + 0.5
        (np.arange(0, 10000) + 0.5) / 1e4, np.nextafter((np.arange(0, 10000) + 0.5) / 1e4, 2.0),
        [0.0, -0.0, 1.0, 0.03125, 0.00005, 1e-300, 1e300, np.inf, -np.inf, 123456.78915]])
    got = round4(a.reshape(-1, 1)).ravel()
    want = np.array([round(float(x), 4) for x in a])
    assert got.tobytes() == want.tobytes()
