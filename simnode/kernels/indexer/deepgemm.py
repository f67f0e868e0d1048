"""One AI core's program of DeepGEMM-Ascend's paged MQA logits (1C2V, S3 ``mqa_logits.hpp``).

Per Q block (``work.Segment``: up to 8 tiles of 64 rows, one query token x 64 heads each) the AIC loads Q and its MX scales to L1 once and all its tiles to L0A (2 Q
stages). Per split of 512 keys (4 KV stages): MTE2 pages -> L1 (two pages per copy, as
``get_physical_page_batch``), MTE1 keys -> L0B and the keys' MX scales (which the split's
owner AIV brought GM -> UB -> L1, four splits ahead: the paged layout keeps them after each
page), then per active tile one MXFP8 MMAD 64 x 512 x D into one of 2 L0C stages and FixPipe
L0C -> the UB of the tile's owner AIV (tiles alternate AIVs; one destination), converting to
BF16 with ReLU on the path (``copy_l0c_to_ub`` with ``infer_quant_mode<bfloat16_t, float>``
and ReLU on): 64 x 512 x 2 B per tile, into one of 3 accumulator stages. The owner AIV runs the
weighted sum over heads (``vf.deepgemm_reduce``) and MTE3 stores the tile's BF16 logits row to
GM (``NOTALLOC_CLEAN``). No top-k: the logits go to a separate top-k kernel.

FixPipe and cube do the same 512 cycles per tile at the 950DT's rates (64 KB at 128 B/cycle;
4 x 32 x 4 FP8 fractal steps): which one binds is decided by the stalls between them. The
hardware hands L0C between MMAD and FixPipe by unit flags (``asc_unit_flag_mode``), at a
finer grain than the tile-level flags here, which therefore overstate their serialization.
"""

from __future__ import annotations

import math
from functools import lru_cache

from simnode.instr import isa
from simnode.instr.schedule import BufferUse, CoreProgram
from simnode.kernels.indexer import vf
from simnode.kernels.indexer.params import IndexerParams, keys_visible
from simnode.kernels.indexer.work import Q_TILES_PER_BLOCK, SPLIT_KV, Segment, mad_m, tokens_per_tile

Q_STAGES, KV_STAGES, CD_STAGES, ACCUM_STAGES, LOGITS_STAGES, WEIGHT_STAGES = 2, 4, 2, 3, 3, 2   # select_paged_mqa_logits_config
SF_UB_STAGES = KV_STAGES // 2           # kNumSFUBStages: SF stages alternate between the AIVs
SF_BYTES_PER_64 = 2                     # one UE8M0 pair (int16) per 64 K-elements (facts 1.1, S3)
LOGIT_BYTES = 2                         # BF16 logits
X_ACCUM, X_SF = 0, ACCUM_STAGES         # intra-block ids: accumulator stages, then the SF stages

Set, Wait = lru_cache(maxsize=None)(isa.SetFlag), lru_cache(maxsize=None)(isa.WaitFlag)
XSet, XWait = lru_cache(maxsize=None)(isa.CrossSet), lru_cache(maxsize=None)(isa.CrossWait)
Mmad, Fix = lru_cache(maxsize=None)(isa.Mmad), lru_cache(maxsize=None)(isa.Fixpipe)
Local = lru_cache(maxsize=None)(isa.Copy)


def sf_owner(stage: int) -> str:
    """The AIV that brings a KV stage's scales: ``(stage ^ 1) & 1``."""
    return f"aiv{(stage ^ 1) & 1}"


def _tiles(p: IndexerParams, seg: Segment, rel: int, s: int) -> list[tuple]:
    """(tile, its queries, owner AIV) of every tile of split ``s`` that some query of it sees
    (``is_tile_active``); tiles alternate AIVs, the odd one out alternating across splits."""
    per = tokens_per_tile(p)
    n = math.ceil(seg.queries / per)
    offset = n & rel & 1
    out = []
    for i in range(n):
        qs = tuple(range(seg.q0 + i * per, min(seg.q0 + (i + 1) * per, seg.q0 + seg.queries)))
        if any(s * SPLIT_KV < keys_visible(p, q) for q in qs):
            out.append((i, qs, f"aiv{(i + offset) & 1}"))
    return out


def core_program(prog: CoreProgram, segments: list[Segment], p: IndexerParams) -> None:
    """Fill ``prog`` with one core's program for ``segments``."""
    mte2, mte1 = prog.pipe("aic", "mte2").append, prog.pipe("aic", "mte1").append
    mm, fix = prog.pipe("aic", "m").append, prog.pipe("aic", "fix").append
    aiv = {u: (prog.pipe(u, "mte2").append, prog.pipe(u, "v").append, prog.pipe(u, "mte3").append)
           for u in ("aiv0", "aiv1")}
    hd = p.head_dim
    sf_row = hd // 64 * SF_BYTES_PER_64
    steps = [(seg, s) for seg in segments for s in range(seg.first_split, seg.end_split)]
    for e in (0, 1):
        mm(Set("m", "mte1", e))
    for s in range(Q_STAGES + KV_STAGES):
        mte1(Set("mte1", "mte2", s))
    for s in range(KV_STAGES):
        mte1(XSet(sf_owner(s), X_SF + s))
    for s in range(CD_STAGES):
        fix(Set("fix", "m", s))
    for m2, v, m3 in aiv.values():
        for s in range(ACCUM_STAGES):
            v(XSet("aic", X_ACCUM + s))
        for s in range(LOGITS_STAGES):
            m3(Set("mte3", "v", s))
        for s in range(WEIGHT_STAGES):
            v(Set("v", "mte2", s))
        for s in range(SF_UB_STAGES):
            m3(Set("mte3", "mte2", 2 + s))

    def sf_prefetch(i):
        seg, s = steps[i]
        stage = i % KV_STAGES
        m2, _v, _m3 = aiv[sf_owner(stage)]
        m2(Wait("mte3", "mte2", 2 + stage // 2))
        m2(isa.Copy("gm_to_ub", seg.split_keys(s) * sf_row, ("idx_ksf", seg.seq, s), label="key scales"))
        m2(Set("mte2", "v", 2 + stage // 2))

    def sf_publish(i):
        seg, s = steps[i]
        stage = i % KV_STAGES
        _m2, v, m3 = aiv[sf_owner(stage)]
        v(Wait("mte2", "v", 2 + stage // 2))
        v(Set("v", "mte3", 4 + stage // 2))
        m3(Wait("v", "mte3", 4 + stage // 2))
        m3(XWait("aic", X_SF + stage))
        m3(Local("ub_to_l1", seg.split_keys(s) * sf_row, label="key scales -> L1"))
        m3(XSet("aic", X_SF + stage))
        m3(Set("mte3", "mte2", 2 + stage // 2))

    for i in range(min(KV_STAGES, len(steps))):
        sf_prefetch(i)
    for i in range(min(KV_STAGES, len(steps))):
        sf_publish(i)
    acc = {"aiv0": 0, "aiv1": 0}           # each AIV's accumulator stage uses
    logits = {"aiv0": 0, "aiv1": 0}
    cd = i = 0
    for n_seg, seg in enumerate(segments):
        qst = n_seg % Q_STAGES
        tiles = math.ceil(seg.queries / tokens_per_tile(p))
        rows = seg.queries * p.heads
        mte2(Wait("mte1", "mte2", qst))
        mte2(isa.Copy("gm_to_l1", rows * hd, ("idx_q", seg.seq, seg.q0), label="Q -> L1"))
        mte2(isa.Copy("gm_to_l1", rows * sf_row, ("idx_qsf", seg.seq, seg.q0), label="Q scales -> L1"))
        mte2(Set("mte2", "mte1", qst))
        mte1(Wait("mte2", "mte1", qst))
        mte1(Wait("m", "mte1", 1))
        for _ in range(tiles):
            mte1(Local("l1_to_l0", mad_m(p) * hd, label="Q tile -> L0A"))
            mte1(Local("l1_to_l0_scale", mad_m(p) * sf_row, label="Q scales -> L0A"))
        mte1(Set("mte1", "m", 1))
        mm(Wait("mte1", "m", 1))
        ws = n_seg % WEIGHT_STAGES
        for m2, v, _m3 in aiv.values():
            m2(Wait("v", "mte2", ws))
            m2(isa.Copy("gm_to_ub", seg.queries * p.heads * 2, ("idx_w", seg.seq, seg.q0), label="weights"))
            m2(Set("mte2", "v", ws))
            v(Wait("mte2", "v", ws))
        for rel, s in enumerate(range(seg.first_split, seg.end_split)):
            stage = i % KV_STAGES
            keys = seg.split_keys(s)
            issued = 128 * math.ceil(keys / 128)        # mqa_logits_issued_n: whole BF16 registers
            if i + KV_STAGES < len(steps):
                sf_prefetch(i + KV_STAGES)
            mte2(Wait("mte1", "mte2", Q_STAGES + stage))
            k0 = s * SPLIT_KV
            for a in range(k0, k0 + keys, 2 * p.page_size):
                n = min(2 * p.page_size, k0 + keys - a)
                pages = tuple(("idx_k", seg.seq, b) for b in range(a, a + n, p.page_size))
                mte2(isa.Copy("gm_to_l1", n * hd, None, label="key pages -> L1", regions=pages))
            mte2(Set("mte2", "mte1", Q_STAGES + stage))
            mte1(Wait("mte2", "mte1", Q_STAGES + stage))
            mte1(Wait("m", "mte1", 0))
            mte1(Local("l1_to_l0", issued * hd, label="keys -> L0B"))
            mte1(XWait(sf_owner(stage), X_SF + stage))
            mte1(Local("l1_to_l0_scale", issued * sf_row, label="key scales -> L0B"))
            mte1(XSet(sf_owner(stage), X_SF + stage))
            mte1(Set("mte1", "m", 0))
            mte1(Set("mte1", "mte2", Q_STAGES + stage))
            mm(Wait("mte1", "m", 0))
            for _t, qs, owner in _tiles(p, seg, rel, s):
                a = acc[owner] % ACCUM_STAGES
                acc[owner] += 1
                mm(Wait("fix", "m", cd % CD_STAGES))
                mm(Mmad(len(qs) * p.heads, issued, hd, "fp8", "QK^T"))
                mm(Set("m", "fix", cd % CD_STAGES))
                fix(Wait("m", "fix", cd % CD_STAGES))
                fix(XWait(owner, X_ACCUM + a))
                fix(Fix(len(qs) * p.heads, issued, "bf16", "ub", label="ReLU(QK) -> UB as BF16"))
                fix(XSet(owner, X_ACCUM + a))
                fix(Set("fix", "m", cd % CD_STAGES))
                cd += 1
                _m2, v, m3 = aiv[owner]
                ls = logits[owner] % LOGITS_STAGES
                logits[owner] += 1
                v(XWait("aic", X_ACCUM + a))
                v(Wait("mte3", "v", ls))
                for rec in vf.deepgemm_reduce(len(qs), p.heads, issued):
                    v(rec)
                v(XSet("aic", X_ACCUM + a))
                v(Set("v", "mte3", ls))
                m3(Wait("v", "mte3", ls))
                for q in qs:
                    valid = min(keys, keys_visible(p, q) - k0)
                    if valid > 0:
                        m3(isa.Copy("ub_to_gm", valid * LOGIT_BYTES, ("idx_logits", seg.seq, q, s),
                                    "notalloc", label="logits"))
                m3(Set("mte3", "v", ls))
            mm(Set("m", "mte1", 0))
            if i + KV_STAGES < len(steps):
                sf_publish(i + KV_STAGES)
            i += 1
        mm(Set("m", "mte1", 1))
        mte1(Set("mte1", "mte2", qst))
        for _m2, v, _m3 in aiv.values():
            v(Set("v", "mte2", ws))


def buffer_plan(p: IndexerParams) -> list[BufferUse]:
    """The buffers ``mqa_logits_core_impl`` lays out (its static_asserts check the same)."""
    hd, rows = p.head_dim, Q_TILES_PER_BLOCK * mad_m(p)
    sf_row = hd // 64 * SF_BYTES_PER_64
    plan = [BufferUse("aic", "l1", f"Q x {Q_STAGES}", Q_STAGES * rows * hd),
            BufferUse("aic", "l1", f"keys x {KV_STAGES}", KV_STAGES * SPLIT_KV * hd),
            BufferUse("aic", "l1", "Q and key scales", Q_STAGES * rows * sf_row + KV_STAGES * SPLIT_KV * sf_row),
            BufferUse("aic", "l0a", f"{Q_TILES_PER_BLOCK} Q tiles", rows * hd),
            BufferUse("aic", "l0b", "keys", SPLIT_KV * hd),
            BufferUse("aic", "l0c", f"FP32 QK x {CD_STAGES}", CD_STAGES * mad_m(p) * SPLIT_KV * 4)]
    for u in ("aiv0", "aiv1"):
        plan += [BufferUse(u, "ub", f"BF16 scores x {ACCUM_STAGES}", ACCUM_STAGES * mad_m(p) * SPLIT_KV * 2),
                 BufferUse(u, "ub", "weights, logits rows, key scales",
                           WEIGHT_STAGES * Q_TILES_PER_BLOCK * tokens_per_tile(p) * p.heads * 2
                           + LOGITS_STAGES * tokens_per_tile(p) * SPLIT_KV * LOGIT_BYTES + 256 + 64
                           + SF_UB_STAGES * SPLIT_KV * sf_row)]
    return plan
