"""The indexer's schedule, its roofline and the work both are built from.

``indexer_schedule(chip, IndexerParams)`` deals the work (``work``) to the cores and builds each
core's program (``cann`` or ``deepgemm``); ``indexer_roofline`` gives the lower bounds in ns;
``useful`` counts the work a run does whatever the kernel (scored keys, FLOPs, bytes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simnode.config.chip import ChipSpec
from simnode.instr.schedule import CoreProgram, KernelSchedule
from simnode.kernels import builds_records
from simnode.kernels.indexer import cann, deepgemm
from simnode.kernels.indexer.params import IndexerParams, keys_visible, validate
from simnode.kernels.indexer.work import S1_BASE, S2_BASE, SPLIT_KV, cann_parts, deepgemm_segments

ENTRY_BYTES = 128 + 4       # facts v4-decode 1: an indexer-cache entry is 128 B FP8 + an FP32 scale
LOGIT_BYTES = {"cann": 4, "deepgemm": 2}          # what FixPipe moves per (head, key): FP32 / BF16
FIX_PATH = {"cann": "l0c_to_ub_dual", "deepgemm": "l0c_to_ub"}


@dataclass(frozen=True)
class Work:
    """What a call computes and moves, kernel-independent but for FixPipe's output dtype."""
    queries: int
    scored: int              #: (query, key) pairs scored: the sum of every query's visible keys
    flops: float             #: 2 x heads x head_dim per scored pair
    fix_bytes: float         #: logits FixPipe moves: heads x scored x LOGIT_BYTES
    cache_bytes: float       #: the indexer cache read once per sequence
    q_bytes: float           #: FP8 queries, weights (BF16) and q-scales (FP32)
    out_bytes: float         #: top-k indices (cann) or BF16 logits (deepgemm)


def useful(p: IndexerParams) -> Work:
    per_seq = sum(keys_visible(p, q) for q in range(p.q_per_seq))
    scored = p.batch * per_seq
    queries = p.batch * p.q_per_seq
    out = queries * p.topk * 4 if p.kernel == "cann" else scored * 2
    return Work(queries, scored, 2.0 * p.heads * p.head_dim * scored,
                float(p.heads * scored * LOGIT_BYTES[p.kernel]),
                float(p.batch * keys_visible(p, p.q_per_seq - 1) * ENTRY_BYTES),
                float(queries * p.heads * (p.head_dim + 2 + 4)), float(out))


@builds_records
def indexer_schedule(chip: ChipSpec, p: IndexerParams) -> KernelSchedule:
    """The per-core programs of one indexer call; raises ScheduleError for a shape the kernel
    cannot run or a buffer plan over capacity."""
    validate(p, chip)
    cores = p.num_cores or chip.num_ai_cores
    progs = []
    meta = {"kind": "lightning_indexer", "kernel": p.kernel}
    if p.kernel == "cann":
        per_core = cann_parts(p, cores)
        plan = cann.buffer_plan(p)
        merges = cann.merge_tasks(per_core)
        for c, parts in enumerate(per_core):
            if not parts:
                continue
            prog = CoreProgram(c)
            cann.core_program(prog, parts, p, merges.get(c, ()))
            prog.buffers = plan
            progs.append(prog)
        meta.update(units=sum(part.part == 0 for parts in per_core for part in parts),
                    blocks=sum(part.blocks for parts in per_core for part in parts),
                    cut_units=sum(part.parts > 1 and part.part == 0 for parts in per_core for part in parts),
                    busiest_core_blocks=max(sum(x.blocks for x in parts) for parts in per_core))
    else:
        per_core = deepgemm_segments(p, cores)
        plan = deepgemm.buffer_plan(p)
        for c, segs in enumerate(per_core):
            if not segs:
                continue
            prog = CoreProgram(c)
            deepgemm.core_program(prog, segs, p)
            prog.buffers = plan
            progs.append(prog)
        splits = [sum(s.end_split - s.first_split for s in segs) for segs in per_core]
        meta.update(q_blocks=sum(len(segs) for segs in per_core), splits=sum(splits),
                    busiest_core_splits=max(splits))
    meta["cores_used"] = len(progs)
    w = useful(p)
    sched = KernelSchedule(f"lightning_indexer_{p.kernel}_{p.batch}x{p.q_per_seq}_ctx{p.context}", progs,
                           w.flops, meta)
    sched.check_buffers(chip)
    return sched


def indexer_roofline(chip: ChipSpec, p: IndexerParams) -> dict:
    """Lower bounds in ns: the cube at its FP8 peak, FixPipe moving the logits at its path's
    rate (dual destination for cann, one for deepgemm) on every core, HBM reading the indexer
    cache and the queries once and writing the output."""
    cores = p.num_cores or chip.num_ai_cores
    w = useful(p)
    f = chip.aic_freq_GHz
    compute_ns = w.flops / (2 * chip.cube.macs_per_cycle["fp8"] * f * cores)
    fix_rate = chip.paths[FIX_PATH[p.kernel]].bandwidth_B_per_cycle * f * cores     # B/ns
    fixpipe_ns = w.fix_bytes / fix_rate
    hbm_ns = (w.cache_bytes + w.q_bytes + w.out_bytes) / chip.memory.hbm_bandwidth_GBps
    terms = {"compute_ns": compute_ns, "fixpipe_ns": fixpipe_ns, "hbm_ns": hbm_ns}
    bound = max(terms, key=terms.get)
    return {**terms, "bound_ns": terms[bound], "binds": bound[:-3]}


def tile_count(p: IndexerParams) -> int:
    """The MMADs a run issues, from its fields alone (a schedule's size, known before it is
    built); past a million query groups, the bound that every group sees every key."""
    groups = math.ceil(p.q_per_seq / S1_BASE)
    if p.kernel == "cann":
        if groups > 10 ** 6:
            return p.batch * groups * math.ceil(keys_visible(p, p.q_per_seq - 1) / S2_BASE)
        return sum(math.ceil(keys_visible(p, min((g + 1) * S1_BASE, p.q_per_seq) - 1) / S2_BASE)
                   for g in range(groups)) * p.batch
    return p.batch * p.q_per_seq * math.ceil(keys_visible(p, p.q_per_seq - 1) / SPLIT_KV)
