"""Workload kind ``swiglu``: SwiGLU + per-token FP8 cast of ``rows`` gate/up rows on the
vector cores of one chip (TileKernels swiglu_forward_and_per_token_cast, moe-layer facts 3;
kernel in ``simnode.kernels.swiglu``).

Besides the common figures the result gives achieved_GBps (GM bytes read and written per
ns of makespan), the roofline terms (HBM bytes, vector work, the AIV copy paths) and which
of them binds; tflops is 0 (no cube work).
"""

from __future__ import annotations

from simnode.errors import ConfigError
from simnode.kernels.swiglu import IN_DTYPES, OUT_DTYPES, SF_BYTES, SwigluParams, swiglu_roofline, swiglu_schedule
from simnode.workloads.chiprun import chip_kind_result
from simnode.workloads.registry import Field, WorkloadKind, register

FIELDS = (
    Field("rows", "int", doc="valid rows (routed tokens of the rank's experts)", min_value=0),
    Field("intermediate", "int", doc="I: output values per row; a row reads 2 I (gate, up)", min_value=128),
    Field("in_dtype", "str", "bf16", "dtype of the gate/up rows", IN_DTYPES),
    Field("out_dtype", "str", "fp8", "dtype of the output rows (e4m3)", OUT_DTYPES),
    Field("scale_block", "int", 128, "values per scale (TileKernels num_per_channels)", min_value=1),
    Field("sf_dtype", "str", "fp32", "scale format: fp32 or one UE8M0 byte", tuple(SF_BYTES)),
    Field("num_cores", "int", 0, "AI cores whose two AIVs run it (0 = all)", min_value=0),
    Field("stages", "int", 3, "row buffers per AIV (S3 num_stages = 3)", min_value=1),
)

#: the most rows one run may simulate: ~17 instructions per row, so 16.7 M records at the
#: limit, which a run holds in memory with ~2 GB (the gemm kind's scale of limit)
MAX_ROWS = 1 << 20


def _check(topology, params: dict, source: str) -> None:
    chip = topology.chip
    if params["num_cores"] > chip.num_ai_cores:
        raise ConfigError(source, "num_cores", params["num_cores"],
                          f"at most the chip's {chip.num_ai_cores} AI cores (0 = all)")
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


def build(topology, params: dict):
    p = SwigluParams(**params)
    return p, swiglu_schedule(topology.chip, p)


def run(topology, params: dict, options=None, name: str = "swiglu"):
    p, sched = build(topology, params)
    bound = swiglu_roofline(topology.chip, p)
    extra = {f"bound_{k}": bound[k] for k in ("vector_ns", "mte2_ns", "mte3_ns")}
    extra["bound_binds"] = bound["binds"]
    result, chip_run = chip_kind_result(name, "swiglu", topology, sched, options, bound, extra)
    span = chip_run.makespan_ns
    result.details["gm_bytes"] = bound["hbm_bytes"]
    result.details["achieved_GBps"] = bound["hbm_bytes"] / span if span else 0.0
    return result


KIND = register(WorkloadKind("swiglu", FIELDS, run,
                             "SwiGLU + per-token FP8 cast on the AIVs (TileKernels)",
                             build=build, check=_check))
