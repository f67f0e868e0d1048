"""Workload kind ``gemm``: one dense GEMM on one chip (facts 2.1, 3.5)."""

from __future__ import annotations

from simnode.config.chip import DTYPE_BITS
from simnode.config.params import params_of
from simnode.errors import ConfigError
from simnode.kernels.gemm import GemmParams, gemm_roofline, gemm_schedule
from simnode.workloads.chiprun import ChipFigures, check_num_cores, chip_kind, kernel_build
from simnode.workloads.registry import Reference

FIELDS = params_of(GemmParams)


#: the most tile steps (output tiles x K blocks) one GEMM run may simulate: 70x the
#: published 4096x7168x16384 case, ~3 minutes and ~2.5 GB (the schedule is held in memory)
MAX_TILE_STEPS = 4_000_000


def tile_steps(params: dict) -> tuple[int, tuple]:
    """Output tiles x K blocks at the heuristic's starting tiles (or the given ones), and the
    tiles: the work a run simulates, known before its schedule is built."""
    # the heuristic's K block starts at 256 B of elements (facts 3.5): 128 bf16, 256 fp8, 512 fp4, 64 fp32
    bits = DTYPE_BITS[params["dtype"]]
    bm, bn, bk = params["block_m"] or 256, params["block_n"] or 256, params["block_k"] or 256 * 8 // bits
    return (params["gemms"] * -(-params["m"] // bm) * -(-params["n"] // bn) * -(-params["k"] // bk),
            (bm, bn, bk))


def cost(topology, params: dict) -> float:
    """Seconds of one core: the published GEMM's ~0.8 s for its 16 x 28 x 128 tile steps
    (measured whole process: 0.6-0.8 s; block_m=7, 37x the steps: 31 s; the schedule is built
    for every core, the run simulates a lock-step group's cores once)."""
    return tile_steps(params)[0] * REFERENCE.seconds / 57344


REFERENCE = Reference("the published 4096x7168x16384 BF16 GEMM", 0.8)


def _check(topology, params: dict, source: str) -> None:
    """Reject a GEMM too large to simulate, or for more cores than the chip has, before
    building its schedule."""
    check_num_cores(topology, params, source)
    steps, (bm, bn, bk) = tile_steps(params)
    if steps > MAX_TILE_STEPS:
        raise ConfigError(source, "m, n, k", (params["m"], params["n"], params["k"]),
                          f"at most {MAX_TILE_STEPS:,} tile steps (ceil(m/{bm}) x ceil(n/{bn}) x "
                          f"ceil(k/{bk}) = {steps:,}): one run holds its whole schedule in memory")


def figures(topology, p: GemmParams, sched) -> ChipFigures:
    return ChipFigures(gemm_roofline(topology.chip, p, sched),
                       {"peak_tflops": topology.chip.peak_tflops(p.dtype)})


KIND = chip_kind("gemm", "dense GEMM C = A x B on one chip", FIELDS,
                 kernel_build(GemmParams, gemm_schedule), figures,
                 check=_check, cost=cost, reference=REFERENCE)
