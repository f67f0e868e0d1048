"""DeepSeek-V4's decode attention on the 950: ``npu_kv_quant_sparse_attn_sharedkv`` (SAS).

One op attends each query to its sliding window and to a compressed cache (CR-code
modeling_deepseek.py; the kernel is hicann ops-transformer
``experimental/attention/kv_quant_sparse_attn_sharedkv``, arch35, ``...ScfaKernel`` with its
``SCFABlockVec`` / cube blocks). What decides its time at decode shapes, and how it is
modeled here on the family's pipeline (``core``, ``blocks``):

- Work: rows of one query x 64 heads (s1BaseSize 64), each a run of 128-token S2 blocks
  (s2BaseSize 128; ``b_topk``): the window's (band mask, ``ori_win_left`` 127: the 128
  positions ending at the query's), then the compressed cache's: CSA the indexer's top-k of
  the ``(pos + 1) // csa_ratio`` causal entries, HCA all ``(pos + 1) // hca_ratio`` of them
  (rightDownCausal), window-only none. A sequence's s_q queries (1 + MTP next_n) are rows of
  their own at consecutive positions: that is the causal mask among them.
- Tiling: the AICPU metadata op deals rows to cores (``metadata.balance``). Split-KV is off
  in the published op, so a row stays on one core: batch 1 x s_q 4 runs on 4 of 32 cores
  (V4-Pro: 4 pairs); ``split_kv`` is the what-if of the flash-decode path its code holds.
- Per block, as FlashMLA's Ascend kernel (facts 3.4) but: the AIVs gather 640-B C8 rows
  (plan.KV_ROW_BYTES "c8"), 16 per AIV per step into 2 UB slots (stage0InQue), dequantize
  them (vf ``dequant`` "c8") and push them to L1; window and HCA rows are read a page run per
  request (SAS CopyInKvNotSparse), CSA rows two per request (CopyInKvSparse); P V leaves L0C
  every block and the AIVs rescale and add it (FlashUpdateNew on every block: no
  skip-scale, so ``skip_scale_threshold`` must be 0). L1 holds one Q and three KV blocks
  (l1QBuffers single, l1RightBuffers 3 buffers); the AIVs convert one block ahead of their
  softmax (ProcessMainLoop: Vec0(t), then Vec1(t-1)).
- Launch: 1.9 us, then the calibrated cold start of an L2-flushed launch, or inside a graph
  replay ``replay_cold_start_ns`` (``graph_replay``; the package's REPLAY_COLD_START_NS).
- 128 heads (V4-Pro): a row runs on a core pair, 64 heads each (IS_SPLIT_G); the pair's four
  AIVs each convert a quarter of a block into a GM workspace of 3 slots, meet every AIV of
  the chip at a barrier after each block (mode-0 cross-core flag, ``sync_all_ns``, on the
  AIV's scalar pipe), and each AIC loads the whole block from there (``Plan.kv_gm_slots``).
- L2: the op's copies carry no cache hint, so the KV gathers allocate in L2 (a sequence's
  queries re-read their shared window from there).

Not modeled: the scalar unit's per-token address work for CSA gathers (SAS reads indices
and block-table entries with scalar loads; stood in for by FlashMLA's index fetch and
preprocessing VF), a pair partner's lateness (the pair's two cores run the same blocks).
Pure functions: no SimPy.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from simnode.instr import isa
from simnode.instr.schedule import CoreProgram, KernelSchedule
from simnode.kernels.sparse_mla import metadata, vf
from simnode.kernels.sparse_mla.blocks import cache_blocks, programs
from simnode.kernels.sparse_mla.plan import KV_ROW_BYTES, L0_TILE, choose_plan

LAYERS = ("csa", "hca", "window")
ROW_HEADS = 64              # SAS s1BaseSize: query heads of one row on one core
CHUNK = (16, 2, L0_TILE)    # SAS ProcessVec0: 16 rows per AIV per step, stage0InQue x 2
GM_SLOTS = 3                # SAS v0ResGmBuffers: BuffersPolicy3buff
S2_BASE = 128               # SAS s2BaseSize: tokens of one S2 block
#: the op's fixed tiling as ``SparseMlaParams`` fields (a caller's shape adds the rest):
#: 64 heads a row, 128-token blocks, O rescaled on every block, split-KV off (supportFd false)
OP_FIELDS = {"mode": "v4", "heads_per_core": ROW_HEADS, "b_topk": S2_BASE,
             "skip_scale_threshold": 0.0, "split_kv": False}


def problem(p, chip) -> str | None:
    """What is wrong with a v4 call, or None."""
    if p.layer not in LAYERS:
        return f"layer '{p.layer}': expected one of {', '.join(LAYERS)}."
    if p.heads_per_core != ROW_HEADS or p.heads not in (ROW_HEADS, 2 * ROW_HEADS):
        return (f"heads = {p.heads}, heads_per_core = {p.heads_per_core}: V4's op runs 64 heads "
                f"per core, a row of 64 or of 128 (on a core pair), so expected heads 64 or 128 "
                f"and heads_per_core 64.")
    if p.skip_scale_threshold != 0:
        return (f"skip_scale_threshold = {p.skip_scale_threshold}: V4's op rescales O on every "
                f"block (FlashUpdateNew, no skip-scale), so expected 0.")
    if p.context_len < p.s_q:
        return f"context_len = {p.context_len} below s_q = {p.s_q}: the queries are in the cache."
    for name, dt in (("main", p.main_dtype), ("extra", p.extra_dtype)):
        if dt not in KV_ROW_BYTES:
            return f"{name} dtype '{dt}': expected one of {', '.join(KV_ROW_BYTES)}."
    cores = p.num_cores or chip.num_ai_cores
    if p.heads == 2 * ROW_HEADS and cores % 2:
        return f"num_cores = {cores}: 128 heads run on core pairs, so expected an even count."
    return None


def positions(p) -> list[tuple[int, int]]:
    """(sequence, position) of every query: a sequence's s_q queries are the last s_q
    tokens of its ``context_len``."""
    return [(b, p.context_len - p.s_q + j) for b in range(p.batch) for j in range(p.s_q)]


def compressed_len(p, pos: int) -> int:
    """Compressed entries the query at ``pos`` may see (the op's rightDownCausal mask:
    ``(pos + 1) // ratio``, metadata CalcBlockRangeAndTailSize)."""
    if p.layer == "window":
        return 0
    return (pos + 1) // (p.csa_ratio if p.layer == "csa" else p.hca_ratio)


def selected(p, pos: int) -> int:
    """Compressed entries the query at ``pos`` reads (CSA: at most the top-k)."""
    n = compressed_len(p, pos)
    return min(p.topk_extra, n) if p.layer == "csa" else n


def window_len(p, pos: int) -> int:
    return min(p.window, pos + 1)


def row_caches(p, rng, pos: int) -> list:
    """A query's caches, as ``blocks.cache_blocks`` takes them: its window (positions
    ending at its own), then its compressed entries (CSA: a seeded uniform stand-in for the
    indexer's top-k, read through an index list; HCA: all, in order)."""
    out = [("main", tuple(range(pos - window_len(p, pos) + 1, pos + 1)), p.main_dtype, False)]
    n = compressed_len(p, pos)
    if p.layer == "csa" and n:
        toks = tuple(np.sort(rng.choice(n, selected(p, pos), replace=False)).tolist())
        out.append(("extra", toks, p.extra_dtype, True))
    elif p.layer == "hca" and n:
        out.append(("extra", tuple(range(n)), p.extra_dtype, False))
    return out


def contiguous(p) -> frozenset:
    """Caches read a page run per request: the window, and HCA's compressed cache."""
    return frozenset({"main", "extra"} if p.layer == "hca" else {"main"})


def _one_sequence(p) -> list[tuple[int, int]]:
    """(window rows, compressed rows) of each query of one sequence (all sequences of a
    call are alike: one context length)."""
    return [(window_len(p, pos), selected(p, pos)) for pos in range(p.context_len - p.s_q, p.context_len)]


def work(p) -> tuple[int, int]:
    """(pipeline blocks, selected rows) of a call, from its fields alone: each query's
    window and compressed blocks, on each core of its row."""
    per = _one_sequence(p)
    blocks = sum(-(-w // p.b_topk) + -(-c // p.b_topk) for w, c in per)
    halves = max(1, p.heads // max(1, p.heads_per_core))
    return blocks * halves * p.batch, sum(w + c for w, c in per) * halves * p.batch


def flops(p) -> float:
    """2 x heads x selected tokens x (d_qk + d_v), summed over the queries (facts 2.2's
    convention, with each query's own window and compressed entries)."""
    return 2.0 * p.heads * p.batch * sum(w + c for w, c in _one_sequence(p)) * (p.d_qk + p.d_v)


def _deal(chip, p) -> tuple:
    """(per query row its caches, per row its sequence, the metadata's parts per core or
    core pair, its FD tasks, cores per row)."""
    ncores = p.num_cores or chip.num_ai_cores
    halves = p.heads // ROW_HEADS               # 2: a row on a core pair (SAS IS_SPLIT_G)
    rng = np.random.default_rng(p.seed)
    qs = positions(p)
    rows = [row_caches(p, rng, pos) for _, pos in qs]
    seq_of = [b for b, _ in qs]
    tokens = [[len(blk.tokens) for blk in cache_blocks(p.b_topk, 0, 0, caches)] for caches in rows]
    parts, fd = metadata.balance(tokens, seq_of, p.heads, ncores // halves, p.split_kv)
    return rows, seq_of, parts, fd, halves


def schedule(chip, p) -> KernelSchedule:
    """Per-core programs of one call (``problem`` checked by the caller)."""
    ncores = p.num_cores or chip.num_ai_cores
    rows, seq_of, parts, fd, halves = _deal(chip, p)
    per_core = [[] for _ in range(ncores)]
    for k, core_parts in enumerate(parts):
        for h in range(halves):
            for part in core_parts:
                blocks = cache_blocks(p.b_topk, part.row * halves + h, seq_of[part.row], rows[part.row],
                                      (h, halves))[part.b0:part.b1]
                per_core[k * halves + h].extend(_part_start(p, blocks))
    dtypes = [p.main_dtype] + ([p.extra_dtype] if p.layer != "window" else [])
    plan = choose_plan(chip, p, dtypes, [CHUNK], GM_SLOTS if halves == 2 else 0, o_in_ub=True,
                       q_slots=1)
    cores, _ = programs(chip, p, plan, per_core, "normal", contiguous(p))
    used = [c for c in range(ncores) if per_core[c]]
    meta = {"kind": "sparse_mla", "mode": "v4", "layer": p.layer, "queries": len(rows),
            "heads_per_core": p.heads_per_core, "b_topk": p.b_topk,
            "entry_bytes": KV_ROW_BYTES[p.extra_dtype if p.layer != "window" else p.main_dtype],
            "cores_used": len(used), "row_cores": halves, "split_kv": p.split_kv,
            "split_rows": len(fd), "chunk_tokens": plan.chunk_tokens,
            "gather_ub_chunks": plan.gather_chunks, "kv_l1_stages": plan.kv_l1_stages,
            "kv_gm_slots": plan.kv_gm_slots, "kv_l2_hint": "normal",
            "blocks_per_core_max": max(len(b) for b in per_core)}
    return KernelSchedule("sparse_mla_v4", cores, flops(p), meta)


def combine_schedule(chip, p) -> KernelSchedule | None:
    """The split-KV what-if's second phase, or None without split rows: after a SyncAll of
    every core (``sync_all_ns``; the op's FD phase follows its attention loop), each vector
    core combines its share of the split rows (``metadata.split_fd``): reads the parts' fp32
    O and LSE, weights and sums them (vf ``combine``), writes the bf16 rows."""
    _, _, _, fd, _ = _deal(chip, p)
    if not fd:
        return None
    ncores = p.num_cores or chip.num_ai_cores
    n_aiv = p.vector_cores_per_cube
    splits = {t.row: t.splits for t in fd}
    progs: dict = {}
    for w, tasks in enumerate(metadata.split_fd(fd, p.heads, ncores * n_aiv)):
        if not tasks:
            continue
        prog = progs.setdefault(w // n_aiv, CoreProgram(w // n_aiv))
        unit = f"aiv{w % n_aiv}"
        mte2, vec, mte3 = prog.pipe(unit, "mte2"), prog.pipe(unit, "v"), prog.pipe(unit, "mte3")
        mte2.append(isa.Delay(p.sync_all_ns, "SyncAll before the combine"))
        for row, h0, nh in tasks:
            k = splits[row]
            mte2.append(isa.Copy("gm_to_ub", k * nh * (p.d_v + 1) * 4, None, "normal", "O parts + LSE",
                                 tuple(("o_part", row, h0, i) for i in range(k))))
            mte2.append(isa.SetFlag("mte2", "v", 0))
            vec.append(isa.WaitFlag("mte2", "v", 0))
            vec.extend(vf.combine(nh, k))
            vec.append(isa.SetFlag("v", "mte3", 0))
            mte3.append(isa.WaitFlag("v", "mte3", 0))
            mte3.append(isa.Copy("ub_to_gm", nh * p.d_v * 2, ("o", row, h0), "normal", "O -> GM"))
    meta = {"kind": "sparse_mla", "mode": "v4", "phase": "combine", "split_rows": len(fd),
            "vector_cores_used": sum(1 for t in metadata.split_fd(fd, p.heads, ncores * n_aiv) if t)}
    return KernelSchedule("sparse_mla_v4_combine", [progs[c] for c in sorted(progs)], 0.0, meta)


def _part_start(p, blocks: list) -> list:
    """A part of a row that starts past its first block (split-KV) starts an item on its
    core: its first block is one, and its first CSA compressed block fetches the indices."""
    if not blocks or blocks[0].first:
        return blocks
    out = [replace(blocks[0], first=True)] + blocks[1:]
    for i, blk in enumerate(out):
        if blk.cache == "extra":
            if p.layer == "csa" and blk.index_group < 0:
                out[i] = replace(blk, index_group=0)
            break
    return out


def roofline(chip, p) -> dict:
    """Lower bounds in ns: the cube at peak on the useful FLOPs; every row's entries through
    L2 once per core that reads them (a pair reads a row's block once into its workspace,
    then each AIC 1 KB a token in bf16); each sequence's distinct entries once through HBM
    (its window positions, and its compressed entries: CSA's expected union of its queries'
    uniform top-k)."""
    peak = 2 * chip.cube.macs_per_cycle["bf16"] * chip.aic_freq_GHz * chip.num_ai_cores
    halves = p.heads // ROW_HEADS
    per = _one_sequence(p)                      # every sequence is alike
    entry_w, entry_c = KV_ROW_BYTES[p.main_dtype], KV_ROW_BYTES[p.extra_dtype]
    gathered = p.batch * sum(w * entry_w + c * entry_c for w, c in per)
    if halves == 2:
        gathered += p.batch * halves * sum(w + c for w, c in per) * p.d_qk * 2
    mine = list(range(p.context_len - p.s_q, p.context_len))
    lo, hi = mine[0], mine[-1]
    hbm = (hi - (lo - window_len(p, lo) + 1) + 1) * entry_w
    n = compressed_len(p, hi)
    if p.layer == "csa" and n:
        hbm += n * (1.0 - np.prod([1.0 - selected(p, pos) / max(1, compressed_len(p, pos))
                                   for pos in mine])) * entry_c
    else:
        hbm += n * entry_c
    hbm *= p.batch
    compute_ns = flops(p) / peak
    l2_ns = gathered / chip.memory.l2_bandwidth_GBps
    hbm_ns = hbm / chip.memory.hbm_bandwidth_GBps
    return {"compute_ns": compute_ns, "l2_ns": l2_ns, "hbm_ns": hbm_ns,
            "gathered_bytes": gathered, "bound_ns": max(compute_ns, l2_ns, hbm_ns)}
