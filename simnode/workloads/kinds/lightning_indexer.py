"""Workload kind ``lightning_indexer``: V4's FP8 MQA logits + top-k on one chip (kernels.indexer).

Every field can be set with ``--set``. The result reports TFLOPS (2 x heads x head_dim per
scored (query, key) pair), the bottleneck, the pipe utilizations and the roofline's terms
(cube, FixPipe, HBM) with the one that binds.
"""

from __future__ import annotations

from simnode import units
from simnode.config.params import params_of
from simnode.errors import ConfigError
from simnode.kernels.indexer import IndexerParams, indexer_roofline, indexer_schedule, tile_count, useful
from simnode.report.result import fig
from simnode.workloads.chiprun import ChipFigures, chip_kind, kernel_build
from simnode.workloads.registry import Reference

FIELDS = params_of(IndexerParams)

#: the most MMADs (tiles) one run may simulate: ~60x the V4-Flash decode preset's 2880 (CANN
#: blocks), a V4 prefill of 8192 tokens at context 8192 (~16 K blocks) among them
MAX_TILES = 200_000


def cost(topology, params: dict) -> float:
    """Seconds of one core: the decode preset's ~1.5 s for its 2880 blocks (measured whole
    process, 2 cores under load)."""
    return tile_count(IndexerParams(**params)) * REFERENCE.seconds / 2880


REFERENCE = Reference("the V4-Flash decode preset (180 x 2 queries, context 8192)", 1.5)


def _check(topology, params: dict, source: str) -> None:
    """Refuse a run too large to hold in memory, or for more cores than the chip has, before
    building its schedule (the schedule's own checks name the shapes the kernel cannot run)."""
    if params["num_cores"] > topology.chip.num_ai_cores:
        raise ConfigError(source, "num_cores", params["num_cores"],
                          f"at most the chip's {topology.chip.num_ai_cores} AI cores (0 = all)")
    tiles = tile_count(IndexerParams(**params))
    if tiles > MAX_TILES:
        raise ConfigError(source, "batch, q_per_seq, context", (params["batch"], params["q_per_seq"],
                          params["context"]), f"at most {MAX_TILES:,} MMAD tiles ({tiles:,} here): one run "
                          f"holds its whole schedule in memory")


build = kernel_build(IndexerParams, indexer_schedule)


def figures(topology, p: IndexerParams, sched) -> ChipFigures:
    bound = indexer_roofline(topology.chip, p)
    w = useful(p)
    extra = {"peak_tflops": topology.chip.peak_tflops("fp8"),
             "bound_fixpipe_ns": bound["fixpipe_ns"],
             "bound_binds": bound["binds"],
             "scored_pairs": w.scored,
             "fixpipe_bytes": fig("fixpipe_bytes", w.fix_bytes, "B", "logits FixPipe moves (heads x "
                                  "scored pairs, FP32 for cann, BF16 for deepgemm)", digits=0),
             "cache_bytes": fig("cache_bytes", w.cache_bytes, "B", "the indexer cache read (132 B per "
                                "entry per sequence)", digits=0)}

    def per_query(run):
        span_us = units.ns_to_us(run.makespan_ns)
        return [fig("us_per_layer", span_us, "us", "the call's time (one CSA layer)", headline=True),
                fig("queries_per_us", w.queries / span_us if span_us else 0.0, "queries/us",
                    "query tokens scored and selected per microsecond")]
    return ChipFigures(bound, extra, per_query)


KIND = chip_kind("lightning_indexer", "V4 lightning indexer: FP8 MQA logits + top-k on one chip "
                 "(CANN or DeepGEMM-Ascend kernel)", FIELDS, build, figures, check=_check, cost=cost,
                 reference=REFERENCE)
