"""Workload kind ``tile``: a tile program from a Python file, run on one chip.

The workload names the file (``program: path/to/kernel.py``, relative to the workload
file) and gives the program's parameters as its other keys; the program's signature
declares them (``simnode.tile.program``), so they are validated and ``--set`` reaches them
like any kind's fields. The program is traced, lowered to a ``KernelSchedule``
(``simnode.tile``) and run by the chip engine like the hand-written kernels.

Details: ``program``, the program's own meta, the bound terms (``bound_vector_ns``,
``bound_pipe_ns`` and ``bound_pipe`` beside compute, L2 and HBM), ``bound_term`` and the
bottleneck it predicts, the intensities against the chip's balance points,
``hbm_unique_bytes``, ``achieved_GBps`` (unique GM bytes / makespan, TileKernels'
bandwidth convention) and ``tile_sim_over_bound`` (makespan / roofline bound).
"""

from __future__ import annotations

from pathlib import Path

from simnode.report.result import fig
from simnode.tile import lower, program as programs, roofline
from simnode.workloads.chiprun import ChipFigures, chip_kind
from simnode.workloads.registry import Field

FIELDS = (
    Field("program", "str", doc="the tile program's Python file (relative to the workload file)"),
)


def _fields(data: dict, source: str) -> tuple:
    """The program's parameters as fields (the program file is imported to read them)."""
    path = data.get("program")
    if not isinstance(path, str):
        return ()                          # reading `program` names the mistake
    return programs.load(path, source).fields()


def build(topology, params: dict, keep_meta: bool = False):
    spec = programs.load(params["program"], "workload")
    args = {k: v for k, v in params.items() if k != "program"}
    b = programs.build(spec, topology.chip, args, keep_meta)
    sched = lower.to_schedule(b, Path(spec.path).stem)
    return (args, b), sched


def figures(topology, built: tuple, sched) -> ChipFigures:
    _, b = built
    bound = roofline.bounds(topology.chip, sched, b)
    extra = {"bound_vector_ns": bound["vector_ns"], "bound_pipe_ns": bound["pipe_ns"],
             "bound_pipe": bound["pipe"], "bound_term": bound["bound_term"],
             "predicted_bottleneck": bound["predicted_bottleneck"],
             "hbm_unique_bytes": bound["hbm_unique_bytes"],
             "intensity_vec_ops_per_B": bound["intensity_vec_ops_per_B"],
             "balance_vec_ops_per_B": bound["balance_vec_ops_per_B"],
             "intensity_flop_per_B": bound["intensity_flop_per_B"],
             "balance_flop_per_B": bound["balance_flop_per_B"]}
    if b.flops:
        extra["peak_tflops"] = topology.chip.peak_tflops(b.gemms[0][3])
    def achieved(run):
        span = run.makespan_ns
        return [fig("achieved_GBps", bound["hbm_unique_bytes"] / span if span else 0.0,
                    doc="unique GM bytes / makespan (TileKernels' convention)", headline=True),
                fig("tile_sim_over_bound", span / bound["bound_ns"] if bound["bound_ns"] else 0.0, "ratio",
                    "makespan / roofline bound", headline=True)]
    return ChipFigures(bound, extra, achieved)


KIND = chip_kind("tile", "a tile program (Python file) on one chip", FIELDS, build, figures,
                 more_fields=_fields, path_fields=("program",))
