"""Workload kind ``topk``: per-row top-k selection on the vector cores (DeepSelect, facts S9).

Runs ``rows`` rows of ``n`` fp32 scores on every AIV of one chip with the DeepSelect
radix-select schedule or the sort-based baseline (``algorithm``). The result names
the bottleneck pipe and reports rows per second; its flops are 0 (no cube work).
"""

from __future__ import annotations

from simnode import units
from simnode.config.params import params_of
from simnode.errors import ConfigError
from simnode.kernels.topk import TopkParams, topk_schedule
from simnode.report.result import fig
from simnode.workloads.chiprun import ChipFigures, chip_kind, kernel_build
from simnode.workloads.registry import Reference

FIELDS = params_of(TopkParams)


#: the most scores one TopK run may scan (rows x n): 256x the 4096 x 8192 indexer case,
#: ~1.5 minutes and ~2 GB
MAX_SCORES = 2 ** 33


def cost(topology, params: dict) -> float:
    """Seconds of one core: workloads/topk-indexer.yaml's ~1 s for 4096 x 8192 scores."""
    return params["rows"] * params["n"] / (4096 * 8192)


REFERENCE = Reference("the indexer's top-512 of 8192 x 4096 rows", 1)


def _check(topology, params: dict, source: str) -> None:
    """Reject a TopK too large to simulate, or for more AIVs than the chip has, before
    building its schedule."""
    chip = topology.chip
    if params["num_aivs"] > chip.num_ai_cores * chip.aiv_per_core:
        raise ConfigError(source, "num_aivs", params["num_aivs"],
                          f"at most the chip's {chip.num_ai_cores * chip.aiv_per_core} vector cores (0 = all)")
    if params["k"] > params["n"]:
        return                                  # the schedule's own check names this one
    if params["rows"] * params["n"] > MAX_SCORES:
        raise ConfigError(source, "rows, n", (params["rows"], params["n"]),
                          f"at most {MAX_SCORES:,} scores (rows x n = {params['rows'] * params['n']:,}): "
                          f"one run holds its whole schedule in memory")


def figures(topology, p: TopkParams, sched) -> ChipFigures:
    def rows_per_s(run):
        span_s = run.makespan_ns / units.NS_PER_S
        return [fig("rows_per_s", p.rows / span_s if span_s else 0.0, "rows/s", "rows selected per second",
                    headline=True)]
    return ChipFigures(after=rows_per_s)


KIND = chip_kind("topk", "per-row top-k selection on the AIVs (DeepSelect or sort baseline)", FIELDS,
                 kernel_build(TopkParams, topk_schedule), figures,
                 check=_check, cost=cost, reference=REFERENCE)
