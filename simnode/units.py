"""Unit conversions: the only module that writes powers of ten.

Simulation time is float nanoseconds. 1 GB = 1e9 B, so 1 GB/s = 1 B/ns.
"""

NS_PER_US = 1e3
NS_PER_MS = 1e6
NS_PER_S = 1e9
BYTES_PER_KiB = 1024
BYTES_PER_MiB = 1024 * 1024
BYTES_PER_GB = 1e9
FLOP_PER_TFLOP = 1e12


def KiB_to_bytes(capacity_KiB: float) -> int:
    return int(capacity_KiB * BYTES_PER_KiB)


def MiB_to_bytes(capacity_MiB: float) -> int:
    return int(capacity_MiB * BYTES_PER_MiB)


def GB_to_bytes(capacity_GB: float) -> int:
    return int(capacity_GB * BYTES_PER_GB)


def tflops(flops: float, time_ns: float) -> float:
    """Achieved TFLOPS of ``flops`` floating-point operations in ``time_ns``."""
    return flops / time_ns / (FLOP_PER_TFLOP / NS_PER_S) if time_ns > 0 else 0.0


def ns_to_us(time_ns: float) -> float:
    return time_ns / NS_PER_US
