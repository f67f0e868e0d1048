"""Workload kind ``sparse_mla``: FlashMLA-style sparse attention on one chip (facts 2.2, 3.4).

``mode: prefill`` runs ``n_q`` queries over one KV of ``kv_len`` tokens; ``mode: decode``
runs ``batch x s_q`` queries over a main and an extra cache. Every field can be set
with ``--set``. The result reports tflops with the facts 2.2 FLOP convention, the
bottleneck, the roofline bounds and the L2 hit fraction of the KV gathers.
"""

from __future__ import annotations

from simnode.config.params import params_of
from simnode.errors import ConfigError
from simnode.kernels.sparse_mla import (LOCKSTEP_MIN_ITEMS, SparseMlaParams, sparse_mla_roofline,
                                       sparse_mla_schedule)
from simnode.workloads.chiprun import ChipFigures, chip_kind, kernel_build
from simnode.workloads.registry import Reference

FIELDS = params_of(SparseMlaParams)


#: the most pipeline blocks (items x ceil(top-k / b_topk), summed over the caches) and
#: selected rows (items x top-k) one run may simulate: the default prefill (4096 queries,
#: 64 heads, top-640) is 40,960 blocks and 2.6 M rows, ~640 MB and ~2.5 minutes on 2 cores;
#: the limits are ~5x that, ~3 GB, under the 4 GiB a run may use (one run holds its whole
#: schedule and the selected token ids in memory)
MAX_BLOCKS = 200_000
MAX_SELECTED_ROWS = 12_800_000


def items(params: dict) -> int:
    """Work items of a run (one query x one block of ``heads_per_core`` heads)."""
    queries = params["n_q"] if params["mode"] == "prefill" else params["batch"] * params["s_q"]
    return queries * max(1, params["heads"] // max(1, params["heads_per_core"]))


def work(params: dict) -> tuple[int, int]:
    """(pipeline blocks, selected rows) of a run, from its fields alone (no schedule)."""
    ks = (params["topk"],) if params["mode"] == "prefill" else (params["topk_main"], params["topk_extra"])
    n = items(params)
    return n * sum(-(-k // params["b_topk"]) for k in ks), n * sum(ks)


def cost(topology, params: dict) -> float:
    """Seconds of one core: the default prefill's ~9 s for its 40,960 blocks (or selected
    rows in blocks of 64, where blocks are few but long) in lock-step groups; every core
    simulated (decode, a small prefill, ``lockstep_groups=0``) takes ~2x as long (17-18 s
    for the default prefill, measured whole process)."""
    blocks, rows = work(params)
    cores = params["num_cores"] or topology.chip.num_ai_cores
    grouped = params["mode"] == "prefill" and params["lockstep_groups"] > 0 \
        and items(params) // cores >= LOCKSTEP_MIN_ITEMS
    return max(blocks, rows / 64) * REFERENCE.seconds / 40960 * (1.0 if grouped else 2.0)


REFERENCE = Reference("the default prefill (4096 queries, top-640)", 9)


def _check(topology, params: dict, source: str) -> None:
    """Refuse a run too large to hold in memory, before any work (the schedule's own checks
    name the shapes it cannot tile)."""
    blocks, rows = work(params)
    sizes = ("n_q, heads, heads_per_core, topk, b_topk" if params["mode"] == "prefill"
             else "batch, s_q, heads, heads_per_core, topk_main, topk_extra, b_topk")
    values = tuple(params[k.strip()] for k in sizes.split(","))
    if blocks > MAX_BLOCKS:
        raise ConfigError(source, sizes, values,
                          f"at most {MAX_BLOCKS:,} pipeline blocks (queries x head blocks x ceil(top-k / "
                          f"b_topk) = {blocks:,}): one run holds its whole schedule in memory")
    if rows > MAX_SELECTED_ROWS:
        raise ConfigError(source, sizes, values,
                          f"at most {MAX_SELECTED_ROWS:,} selected KV rows (queries x head blocks x top-k "
                          f"= {rows:,}): one run holds its whole schedule in memory")


def figures(topology, p: SparseMlaParams, sched) -> ChipFigures:
    return ChipFigures(sparse_mla_roofline(topology.chip, p),
                       {"peak_tflops": topology.chip.peak_tflops("bf16")})


KIND = chip_kind("sparse_mla", "FlashMLA-style sparse MLA attention (prefill / decode) on one chip",
                 FIELDS, kernel_build(SparseMlaParams, sparse_mla_schedule), figures,
                 check=_check, cost=cost, reference=REFERENCE)
