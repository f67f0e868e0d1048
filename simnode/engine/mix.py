"""splitmix64: the one fixed 64-bit mixing function of simnode.

Used wherever a number must be scrambled the same way in every run and process (Python's
``hash`` is salted per process): the network's ECMP flow hash
(``simnode.network.routes.ecmp_choice``) and the sharing engine's row hash
(``simnode.engine.share``). ``splitmix64(x)`` is one step of Steele, Lea and Flood's
SplitMix64 generator from state ``x``: the state advanced by the golden-ratio increment,
then finalized. ``splitmix64_array`` is the same for a uint64 array (wrapping arithmetic).
"""

from __future__ import annotations

import numpy as np

MASK64 = (1 << 64) - 1
#: the generator's state increment, 2^64 / golden ratio (odd)
GOLDEN = 0x9E3779B97F4A7C15


def splitmix64(x: int) -> int:
    """The 64-bit output of one SplitMix64 step from state ``x`` (an int below 2^64)."""
    x = (x + GOLDEN) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def splitmix64_array(x: np.ndarray) -> np.ndarray:
    """``splitmix64`` of each element of the uint64 array ``x`` (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(GOLDEN)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def sequence(seed: int, n: int) -> list[int]:
    """The first ``n`` outputs of the SplitMix64 generator seeded with ``seed``."""
    return [splitmix64((seed + k * GOLDEN) & MASK64) for k in range(n)]
