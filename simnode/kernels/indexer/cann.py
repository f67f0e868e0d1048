"""One AI core's program of CANN's quant lightning indexer on the 950 (1C2V).

After ops-transformer ``attention/quant_lightning_indexer/op_kernel/arch35`` (the op CR's V4
code calls, ``npu_quant_lightning_indexer``; on the 950 the FP8 path instantiates
``QLIType<fp8, fp8, float, uint16_t, int32_t>``: FP32 QK, 16-bit sortable scores). Per block
of one unit (``work.Part``: up to 4 query tokens x ``heads`` rows, 128 keys):

AIC (``QLIMatmul::ComputeMm1``):
  FIX: waits both AIVs' "UB slot free" (ping-pong); its completion is what the scalar's
       ``FIX_S`` wait sees before it issues the block's L1->L0 copies (and a unit's Q load),
       so the next MMAD never starts before the previous FixPipe finished (a FIX -> MTE1 /
       FIX -> MTE2 flag here). Then L0C -> both UBs (dual destination, split by M) as FP32,
       no ReLU on the path; "QK in UB" to both AIVs.
  MTE2: keys of the block GM -> L1 (3 slots), one copy per page; a unit's Q (2 slots).
  MTE1: Q -> L0A and keys -> L0B every block (2 L0 slots).  M: one FP8 MMAD, M rows padded to
       two queries (``CeilAlign(s1g, 2 * gSize)``) x keys x 128 into one of 2 L0C slots.
AIV (``QLIVector::ProcessVec1``; AIV0 takes the first ceil(n/2) queries of the unit, AIV1 the
rest): MTE2 loads the queries' weights, q-scales and the block's k-scales; V waits "QK in UB"
and runs the reduction VF (``vf.cann_reduce``); MTE3 stores the scores to a GM workspace.
The scalar waits for that store (``MTE3_S``) before it issues the next block's loads (an
MTE3 -> MTE2 flag here), and "UB slot free" goes to the AIC then. After a part's last block
each query's row is read back and its top-k taken (``ProcessTopK``, ``vf.cann_topk``), serially
(load, VFs, store); a part of a unit cut across cores keeps its top-k with their keys, and after
all their parts the AIVs of the unit's cores merge them, a query row each (the reduction, LD,
that the metadata op assigns; ``vf.cann_merge_index``).
Not modeled: the scalar's reads of the block table from GM (no source gives their cost), and
the merge's wait for the other cores' parts (the kernel's SyncAll; simnode has no flag between
AI cores, and the split is even, so the parts end within about a block of each other).
"""

from __future__ import annotations

import math
from functools import lru_cache

from simnode.instr import isa
from simnode.instr.schedule import BufferUse, CoreProgram
from simnode.kernels.indexer import vf
from simnode.kernels.indexer.params import IndexerParams, keys_visible
from simnode.kernels.indexer.work import S1_BASE, S2_BASE, Part

KEY_SLOTS, Q_SLOTS, L0_SLOTS, UB_SLOTS = 3, 2, 2, 2     # arch35 service_cube: KEY_BUF_NUM, QUERY_BUF_NUM, L0_BUF_NUM; ping-pong UB
TRUNK = 16384               # service_vector TRUNK_LEN_16K: scores per top-k pass
SCORE_BYTES = 2             # 16-bit sortable scores (uint16_t SCORE_T)
SCALE_BYTES = 4             # FP32 q- and k-scales (README: float32 on the 950)
WEIGHT_BYTES = 2            # BF16 weights
INDEX_BYTES = 4             # int32 indices out
X_FREE, X_READY = 0, 2      # CROSS_VC_EVENT (AIV -> AIC "UB slot free"), CROSS_CV_EVENT (AIC -> AIV)
TOPK_EV = 4                 # service_vector TOPK_MTE2_V_EVENT / TOPK_V_MTE3_EVENT

Set, Wait = lru_cache(maxsize=None)(isa.SetFlag), lru_cache(maxsize=None)(isa.WaitFlag)
XSet, XWait = lru_cache(maxsize=None)(isa.CrossSet), lru_cache(maxsize=None)(isa.CrossWait)
Mmad, Fix = lru_cache(maxsize=None)(isa.Mmad), lru_cache(maxsize=None)(isa.Fixpipe)
Local = lru_cache(maxsize=None)(isa.Copy)          # copies that name no GM region


def m_rows(p: IndexerParams, queries: int) -> int:
    """MMAD rows of a unit: its queries' heads, padded to a pair of queries."""
    return 2 * math.ceil(queries / 2) * p.heads


def aiv_queries(part: Part) -> tuple[tuple, tuple]:
    """The unit's queries of AIV0 (the first ceil(n / 2)) and of AIV1 (the rest)."""
    h = math.ceil(len(part.queries) / 2)
    return part.queries[:h], part.queries[h:]


def _pages(p: IndexerParams, key0: int, keys: int):
    """(first key, keys) of each page piece of keys [key0, key0 + keys)."""
    k = key0
    while k < key0 + keys:
        n = min(p.page_size - k % p.page_size, key0 + keys - k)
        yield k, n
        k += n


def core_program(prog: CoreProgram, parts: list[Part], p: IndexerParams, merges=()) -> None:
    """Fill ``prog`` with one core's program for ``parts``, then the merges it owes
    (``merges``: (the cut unit's parts, query, AIV), from ``merge_tasks``)."""
    mte2, mte1 = prog.pipe("aic", "mte2").append, prog.pipe("aic", "mte1").append
    mm, fix = prog.pipe("aic", "m").append, prog.pipe("aic", "fix").append
    aiv = {u: (prog.pipe(u, "mte2").append, prog.pipe(u, "v").append, prog.pipe(u, "mte3").append)
           for u in ("aiv0", "aiv1")}
    hd = p.head_dim
    # AllocEventID: every slot starts free
    for s in range(KEY_SLOTS):
        mte1(Set("mte1", "mte2", s))
    for s in range(Q_SLOTS):
        mte1(Set("mte1", "mte2", KEY_SLOTS + s))
    for s in range(L0_SLOTS):
        mm(Set("m", "mte1", s))
        fix(Set("fix", "m", s))
    for u, (_m2, v, m3) in aiv.items():
        for s in range(UB_SLOTS):
            v(Set("v", "mte2", s))
            m3(Set("mte3", "v", s))
            v(XSet("aic", X_FREE + s))
        m3(Set("mte3", "mte2", 0))
    t = 0
    for n_part, part in enumerate(parts):
        rows = m_rows(p, len(part.queries))
        split = aiv_queries(part)
        for j in range(part.blocks):
            first, last = j == 0, j == part.blocks - 1
            kb = part.block_keys(j)
            key0 = (part.first_block + j) * S2_BASE
            slot = t % UB_SLOTS
            # -- AIC
            mte2(Wait("mte1", "mte2", t % KEY_SLOTS))
            for k0, n in _pages(p, key0, kb):
                mte2(isa.Copy("gm_to_l1", n * hd, ("idx_k", part.seq, k0), label="keys -> L1"))
            mte2(Set("mte2", "mte1", 0))
            if first:
                mte2(Wait("fix", "mte2", 0))                 # the scalar's FIX_S wait
                mte2(Wait("mte1", "mte2", KEY_SLOTS + n_part % Q_SLOTS))
                mte2(isa.Copy("gm_to_l1", rows * hd, ("idx_q", part.seq, part.group), label="Q -> L1"))
                mte2(Set("mte2", "mte1", 0))
            mte1(Wait("mte2", "mte1", 0))
            mte1(Wait("fix", "mte1", 0))                     # the scalar's FIX_S wait
            if first:
                mte1(Wait("mte2", "mte1", 0))
            mte1(Wait("m", "mte1", t % L0_SLOTS))
            mte1(Local("l1_to_l0", rows * hd, label="Q -> L0A"))
            mte1(Local("l1_to_l0", 16 * math.ceil(kb / 16) * hd, label="keys -> L0B"))
            mte1(Set("mte1", "m", 0))
            if last:
                mte1(Set("mte1", "mte2", KEY_SLOTS + n_part % Q_SLOTS))
            mte1(Set("mte1", "mte2", t % KEY_SLOTS))
            mm(Wait("mte1", "m", 0))
            mm(Wait("fix", "m", t % L0_SLOTS))
            mm(Mmad(rows, kb, hd, "fp8", "QK^T"))
            mm(Set("m", "mte1", t % L0_SLOTS))
            mm(Set("m", "fix", 0))
            fix(XWait("aiv0", X_FREE + slot))
            fix(XWait("aiv1", X_FREE + slot))
            fix(Set("fix", "mte1", 0))
            if first:
                fix(Set("fix", "mte2", 0))
            fix(Wait("m", "fix", 0))
            # N in 32 B steps; over 64 keys two ND blocks of 64 (the 512 B path)
            fix(Fix(rows, 128 if kb > 64 else 8 * math.ceil(kb / 8), "fp32", "ub_dual", label="QK -> both UBs"))
            fix(Set("fix", "m", t % L0_SLOTS))
            fix(XSet("aiv0", X_READY + slot))
            fix(XSet("aiv1", X_READY + slot))
            # -- AIVs
            for (u, (m2, v, m3)), qs in zip(aiv.items(), split):
                if not qs:                                   # curAivS1ProcNum == 0
                    v(XWait("aic", X_READY + slot))
                    v(XSet("aic", X_FREE + slot))
                    continue
                nq = len(qs)
                m2(Wait("v", "mte2", slot))
                m2(Wait("mte3", "mte2", 0))                  # the scalar's MTE3_S wait
                m2(isa.Copy("gm_to_ub", nq * p.heads * WEIGHT_BYTES, ("idx_w", part.seq, qs[0]), label="weights"))
                m2(isa.Copy("gm_to_ub", nq * p.heads * SCALE_BYTES, ("idx_qs", part.seq, qs[0]), label="q scales"))
                for k0, n in _pages(p, key0, kb):
                    m2(isa.Copy("gm_to_ub", n * SCALE_BYTES, ("idx_ks", part.seq, k0), label="k scales"))
                m2(Set("mte2", "v", slot))
                v(Wait("mte2", "v", slot))
                v(Wait("mte3", "v", slot))
                v(XWait("aic", X_READY + slot))
                for rec in vf.cann_reduce(nq, p.heads):
                    v(rec)
                v(Set("v", "mte2", slot))
                v(Set("v", "mte3", slot))
                m3(Wait("v", "mte3", slot))
                m3(isa.Copy("ub_to_gm", nq * S2_BASE * SCORE_BYTES, ("idx_score", prog.core, u, t), label="scores"))
                m3(Set("mte3", "v", slot))
                m3(Set("mte3", "mte2", 0))
                m3(XSet("aic", X_FREE + slot))               # issued on V after MTE3_S: the store's end
            t += 1
        for u, qs in zip(aiv, split):
            for q in qs:
                _row_topk(aiv[u], p, part, q, t, prog.core, u)
    for unit, q, u in merges:
        _merge(aiv[u], p, unit, q)
    for s in range(UB_SLOTS):                                 # FreeEventID: the last releases
        fix(XWait("aiv0", X_FREE + (t + s) % UB_SLOTS))
        fix(XWait("aiv1", X_FREE + (t + s) % UB_SLOTS))


def merge_tasks(per_core: list[list[Part]]) -> dict:
    """Core -> its merges, (the unit's parts, query, AIV) each: a cut unit's query rows dealt one
    per AIV over the AIVs of the cores holding its parts, in part order (the metadata op gives
    every AIV its own reduction rows, mStart / mNum)."""
    cut: dict = {}
    for c, parts in enumerate(per_core):
        for part in parts:
            if part.parts > 1:
                cut.setdefault((part.seq, part.group), []).append((c, part))
    out: dict = {}
    for held in cut.values():
        unit = [part for _c, part in held]
        aivs = [(c, u) for c, _part in held for u in ("aiv0", "aiv1")]
        for j, q in enumerate(unit[0].queries):
            c, u = aivs[j % len(aivs)]
            out.setdefault(c, []).append((unit, q, u))
    return out


def part_keys(p: IndexerParams, part: Part, q: int) -> int:
    """Keys of ``part`` that query ``q`` sees."""
    lo = part.first_block * S2_BASE
    return max(0, min(lo + part.blocks * S2_BASE, keys_visible(p, q)) - lo)


def _serial(pipes, loads, recs, stores) -> None:
    """One top-k row as the scalar runs it: load, VFs, store, each after the previous."""
    m2, v, m3 = pipes
    m2(Wait("mte3", "mte2", 0))
    for c in loads:
        m2(c)
    m2(Set("mte2", "v", TOPK_EV))
    v(Wait("mte2", "v", TOPK_EV))
    for rec in recs:
        v(rec)
    v(Set("v", "mte3", TOPK_EV))
    m3(Wait("v", "mte3", TOPK_EV))
    for c in stores:
        m3(c)
    m3(Set("mte3", "mte2", 0))


def _row_topk(pipes, p: IndexerParams, part: Part, q: int, t_end: int, core: int, u: str) -> None:
    """Top-k of query ``q``'s scores of this part (``ProcessTopK``): the whole row, or a part's."""
    n = part_keys(p, part, q)
    if n == 0:
        return
    regions = tuple(("idx_score", core, u, t) for t in range(t_end - part.blocks, t_end))
    whole = part.parts == 1
    if n <= p.topk:                             # CreateVecIndex: nothing to select, nothing read
        loads, recs = [], vf.cann_keep_all(p.topk)
    else:
        loads = [isa.Copy("gm_to_ub", min(n, TRUNK) * SCORE_BYTES, None, label="scores", regions=regions)]
        recs = vf.cann_topk(min(n, TRUNK), p.topk, values=not whole)
        for extra in range(1, math.ceil(n / TRUNK)):          # rows over 16K: trunk by trunk
            recs = recs + vf.cann_topk(min(TRUNK, n - extra * TRUNK) + p.topk, p.topk, values=True)
            loads.append(isa.Copy("gm_to_ub", min(TRUNK, n - extra * TRUNK) * SCORE_BYTES, None,
                                  label="scores", regions=regions))
    if whole:
        stores = [isa.Copy("ub_to_gm", p.topk * INDEX_BYTES, ("idx_out", part.seq, q), label="top-k out")]
    else:                                       # its selected scores and indices, for the merge
        stores = [isa.Copy("ub_to_gm", min(n, p.topk) * (SCORE_BYTES + INDEX_BYTES),
                           ("idx_part", part.seq, q, part.part), label="part top-k")]
    _serial(pipes, loads, recs, stores)


def _merge(pipes, p: IndexerParams, unit: list[Part], q: int) -> None:
    """The reduction of a unit cut across cores: query ``q``'s part lists (each part's top-k,
    or all its keys if fewer) read back and one top-k taken over them, then the indices
    gathered from the parts' (``FindRealIndexVFImpl``). The source of the 950's reduction task
    is not public (the metadata op's README names it): this follows the op's own multi-trunk
    path, which merges a trunk's top-k with the next trunk's scores the same way."""
    kept = [min(part_keys(p, part, q), p.topk) for part in unit]
    n = sum(kept)
    if n == 0:
        return
    regions = tuple(("idx_part", part.seq, q, part.part) for part, k in zip(unit, kept) if k)
    loads = [isa.Copy("gm_to_ub", n * (SCORE_BYTES + INDEX_BYTES), None, label="part top-k lists",
                      regions=regions)]
    recs = (vf.cann_topk(n, p.topk) if n > p.topk else vf.cann_keep_all(p.topk)) + vf.cann_merge_index(p.topk)
    stores = [isa.Copy("ub_to_gm", p.topk * INDEX_BYTES, ("idx_out", unit[0].seq, q), label="top-k out")]
    _serial(pipes, loads, recs, stores)


def buffer_plan(p: IndexerParams) -> list[BufferUse]:
    """The buffers ``InitBuffers`` claims (arch35 service_cube / service_vector)."""
    m = S1_BASE * p.heads                       # mBaseSize
    kalign = 256 * math.ceil(p.topk / 256)
    plan = [BufferUse("aic", "l1", f"Q x {Q_SLOTS}", Q_SLOTS * m * p.head_dim),
            BufferUse("aic", "l1", f"keys x {KEY_SLOTS}", KEY_SLOTS * S2_BASE * p.head_dim),
            BufferUse("aic", "l0a", f"Q x {L0_SLOTS}", L0_SLOTS * m * p.head_dim),
            BufferUse("aic", "l0b", f"keys x {L0_SLOTS}", L0_SLOTS * S2_BASE * p.head_dim),
            BufferUse("aic", "l0c", f"FP32 QK x {L0_SLOTS}", L0_SLOTS * m * S2_BASE * 4)]
    half = S1_BASE // 2 * p.heads
    for u in ("aiv0", "aiv1"):
        plan += [BufferUse(u, "ub", f"FP32 QK rows x {UB_SLOTS}", UB_SLOTS * half * S2_BASE * 4),
                 BufferUse(u, "ub", "weights, scales, scores", 4 * half * WEIGHT_BYTES + 2 * half * 4
                           + 2 * S2_BASE * SCALE_BYTES + 2 * half * SCALE_BYTES + 2 * 2 * S2_BASE * SCORE_BYTES),
                 BufferUse(u, "ub", "top-k rows, indices, histograms",
                           2 * (kalign + TRUNK) * SCORE_BYTES + (kalign + 64) * INDEX_BYTES + kalign * SCORE_BYTES
                           + (2 * kalign + 3 * 256 + 64) * 4 + p.topk * INDEX_BYTES)]
    return plan
