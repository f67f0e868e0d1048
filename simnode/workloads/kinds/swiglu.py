"""Workload kind ``swiglu``: SwiGLU + per-token FP8 cast of ``rows`` gate/up rows on the
vector cores of one chip (TileKernels swiglu_forward_and_per_token_cast, moe-layer facts 3;
kernel in ``simnode.kernels.swiglu``).

Besides the common figures the result gives achieved_GBps (GM bytes read and written per
ns of makespan), the roofline terms (HBM bytes, vector work, the AIV copy paths) and which
of them binds; tflops is 0 (no cube work).
"""

from __future__ import annotations

from simnode.config.params import params_of
from simnode.errors import ConfigError
from simnode.kernels.swiglu import SwigluParams, swiglu_roofline, swiglu_schedule
from simnode.report.result import fig
from simnode.workloads.chiprun import ChipFigures, check_num_cores, chip_kind, kernel_build
from simnode.workloads.registry import Reference

FIELDS = params_of(SwigluParams)

#: the most rows one run may simulate: ~17 instructions per row, so 16.7 M records at the
#: limit, which a run holds in memory with ~2 GB (the gemm kind's scale of limit)
MAX_ROWS = 1 << 20


def cost(topology, params: dict) -> float:
    """Seconds of one core: workloads/swiglu.yaml's ~7 s for 98304 rows of 2 x 2048."""
    return params["rows"] * params["intermediate"] * 7 / (98304 * 2048)


REFERENCE = Reference("SwiGLU of 98304 rows x 2048", 7)


def _check(topology, params: dict, source: str) -> None:
    chip = topology.chip
    check_num_cores(topology, params, source)
    if params["rows"] > MAX_ROWS:
        raise ConfigError(source, "rows", params["rows"],
                          f"at most {MAX_ROWS:,}: one run holds its whole schedule in memory")
    i, b = params["intermediate"], params["scale_block"]
    if i % 128 or i % b:
        raise ConfigError(source, "intermediate", i,
                          f"a multiple of 128 and of scale_block ({b})")
    if params["stages"] > chip.sync.pipe_events_per_pair:
        raise ConfigError(source, "stages", params["stages"],
                          f"at most {chip.sync.pipe_events_per_pair} (event ids per pipe pair)")


def figures(topology, p: SwigluParams, sched) -> ChipFigures:
    bound = swiglu_roofline(topology.chip, p)
    extra = {f"bound_{k}": bound[k] for k in ("vector_ns", "mte2_ns", "mte3_ns")}
    extra["bound_binds"] = bound["binds"]
    def achieved(run):
        span = run.makespan_ns
        return [fig("gm_bytes", bound["hbm_bytes"], "B", "GM bytes read and written"),
                fig("achieved_GBps", bound["hbm_bytes"] / span if span else 0.0,
                    doc="GM bytes / makespan", headline=True)]
    return ChipFigures(bound, extra, achieved)


KIND = chip_kind("swiglu", "SwiGLU + per-token FP8 cast on the AIVs (TileKernels)", FIELDS,
                 kernel_build(SwigluParams, swiglu_schedule), figures,
                 check=_check, cost=cost, reference=REFERENCE)
