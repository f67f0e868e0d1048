"""The one splitmix64 (``simnode.engine.mix``): the reference generator's outputs, the array
form equal to the scalar one, and the ECMP hash built on it pinned to its values."""

import numpy as np

from simnode.engine.mix import MASK64, sequence, splitmix64, splitmix64_array
from simnode.network.routes import ecmp_choice, ecmp_choices


def test_the_generator_seeded_with_zero_gives_the_reference_outputs():
    assert sequence(0, 3) == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    assert splitmix64(0) == 0xE220A8397B1DCDAF


def test_the_array_form_equals_the_scalar_form():
    xs = [0, 1, 17, 0x123456789ABCDEF, MASK64, MASK64 - 5, 1 << 63]
    got = splitmix64_array(np.array(xs, dtype=np.uint64)).tolist()
    assert got == [splitmix64(x) for x in xs]


def test_ecmp_picks_stay_what_they_were():
    """Routes (and every network result) depend on these picks: they must not move."""
    assert [ecmp_choice(s, d, k, 7) for s, d, k in [(0, 1, 0), (3, 9, 5), (100, 7, 123456789),
                                                    (5, 2, -1)]] == [3, 5, 1, 4]
    got = ecmp_choices(np.arange(10), np.arange(10)[::-1], np.arange(10) * 7 - 3, np.full(10, 5))
    assert got.tolist() == [2, 0, 2, 1, 0, 0, 0, 0, 1, 1]
    assert got.tolist() == [ecmp_choice(s, 9 - s, 7 * s - 3, 5) for s in range(10)]
