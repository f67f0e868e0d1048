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


def cycles_to_ns(cycles: float, freq_GHz: float) -> float:
    """Cycles of a clock at ``freq_GHz`` to nanoseconds."""
    return cycles / freq_GHz


def ns_to_cycles(time_ns: float, freq_GHz: float) -> float:
    """Nanoseconds to cycles of a clock at ``freq_GHz``."""
    return time_ns * freq_GHz


def bytes_per_cycle_to_GBps(bytes_per_cycle: float, freq_GHz: float) -> float:
    """A per-cycle rate to GB/s (= bytes/ns)."""
    return bytes_per_cycle * freq_GHz


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
