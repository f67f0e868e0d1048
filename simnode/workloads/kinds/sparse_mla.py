"""Workload kind ``sparse_mla``: FlashMLA-style sparse attention on one chip (facts 2.2, 3.4).

``mode: prefill`` runs ``n_q`` queries over one KV of ``kv_len`` tokens; ``mode: decode``
runs ``batch x s_q`` queries over a main and an extra cache; ``mode: v4`` runs DeepSeek-V4's
decode op on the 950 (each query over its window and its compressed entries,
``simnode.kernels.sparse_mla.v4``). Every field can be set with ``--set``. The result
reports tflops with the facts 2.2 FLOP convention, the bottleneck, the roofline bounds and
the L2 hit fraction of the KV gathers; v4 with ``split_kv`` adds the combine phase that
follows the attention (``combine_ns``, in the makespan).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from simnode import units
from simnode.config.params import params_of
from simnode.errors import ConfigError
from simnode.kernels.sparse_mla import (LOCKSTEP_MIN_ITEMS, SparseMlaParams, sparse_mla_roofline,
                                       sparse_mla_schedule, v4)
from simnode.report.result import fig
from simnode.workloads.chiprun import ChipFigures, chip_kind, kernel_build, run_schedule
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
    if params["mode"] == "v4":
        return v4.work(SimpleNamespace(**params))
    ks = (params["topk"],) if params["mode"] == "prefill" else (params["topk_main"], params["topk_extra"])
    n = items(params)
    return n * sum(-(-k // params["b_topk"]) for k in ks), n * sum(ks)


def cost(topology, params: dict) -> float:
    """Seconds of one core: the default prefill's ~9 s for its 40,960 blocks (or selected
    rows in blocks of 64, where blocks are few but long) in lock-step groups; every core
    simulated (decode, a small prefill, ``lockstep_groups=0``) takes ~2x as long (17-18 s
    for the default prefill, measured whole process); v4 by its selected rows."""
    blocks, rows = work(params)
    if params["mode"] == "v4":
        return rows / 64 * V4_SECONDS_PER_64_ROWS
    cores = params["num_cores"] or topology.chip.num_ai_cores
    grouped = params["mode"] == "prefill" and params["lockstep_groups"] > 0 \
        and items(params) // cores >= LOCKSTEP_MIN_ITEMS
    return max(blocks, rows / 64) * REFERENCE.seconds / 40960 * (1.0 if grouped else 2.0)


REFERENCE = Reference("the default prefill (4096 queries, top-640)", 9)
#: v4: seconds of one core per 64 selected rows (each core simulated, 128-token blocks):
#: measured 1.0 ms (V4-Flash CSA at 180 x s_q 2: 3.4 s) to 1.4 ms (V4-Pro, core pairs: 18 s)
V4_SECONDS_PER_64_ROWS = 1.2e-3


def _check(topology, params: dict, source: str) -> None:
    """Refuse a run too large to hold in memory, before any work (the schedule's own checks
    name the shapes it cannot tile)."""
    blocks, rows = work(params)
    sizes = {"prefill": "n_q, heads, heads_per_core, topk, b_topk",
             "decode": "batch, s_q, heads, heads_per_core, topk_main, topk_extra, b_topk",
             "v4": "batch, s_q, heads, layer, context_len, window, topk_extra, b_topk"}[params["mode"]]
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


_ATTENTION = chip_kind("sparse_mla", "FlashMLA-style sparse MLA attention (prefill / decode; "
                       "DeepSeek-V4's decode op) on one chip",
                       FIELDS, kernel_build(SparseMlaParams, sparse_mla_schedule), figures,
                       check=_check, cost=cost, reference=REFERENCE)


def run(topology, params: dict, options=None, name: str = "sparse_mla"):
    """The attention's run; v4 with split rows then runs the combine phase on the chip (the
    op's FD phase: after a SyncAll of the whole attention loop, so its time adds up)."""
    result = _ATTENTION.run(topology, params, options, name)
    if params["mode"] != "v4" or not params["split_kv"]:
        return result
    sched = v4.combine_schedule(topology.chip, SparseMlaParams(**params))
    if sched is None:
        return result
    combine_ns = run_schedule(topology, sched).makespan_ns
    span = result.makespan_ns + combine_ns
    top = result.kernels[0]
    figures = tuple(dataclasses.replace(f, value=units.tflops(top.figure("flops").value, span))
                    if f.name == "tflops" else f for f in top.figures)
    figures += (fig("combine_ns", combine_ns, doc="the split rows' combine after the attention "
                    "(SyncAll, then the vector cores' FD tasks), in the makespan"),
                fig("combine_vector_cores", sched.meta["vector_cores_used"], "",
                    "vector cores with combine tasks", digits=0))
    return dataclasses.replace(result, makespan_ns=span,
                               kernels=(dataclasses.replace(top, time_ns=span, figures=figures),))


KIND = dataclasses.replace(_ATTENTION, run=run)
