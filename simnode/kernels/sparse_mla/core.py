"""One AI core's sparse MLA program (facts 3.4): the six pipes' records.

``core_program`` fills a ``CoreProgram`` for a list of ``sparse_mla.Block`` steps under a
``Plan`` (``plan``: tile depths and the buffers they claim); the AIVs' vector functions are
costed by ``vf``.

AIC (per block b, cube order P[b] then O[b-1], so P[b+1] is issued before O[b]):
  MTE2: Q of each item -> L1 (2 slots).  MTE1: Q / K k-tiles, then S and V n-tiles,
  into ``l0_slots`` L0A/L0B slots.  M: 4 MMADs of P = Q K^T, 4 of O += S V.
  FIX: P -> both UBs (dual) or one (1C1V); O drains (rescale or item end) in fp32
  fragments, each after the AIV freed a fragment buffer. L0C holds one O and one P at
  fixed places (S2 kernel_body.h: l0c_p_buf = l0c_out_buf + MMA_M * D_VO), so P[b+1]
  waits for P[b]'s copy-out, an item's first O += S V waits n-tile by n-tile for the
  previous item's copy-out (unit_flag), and an O += S V after a rescale drain waits for
  the whole drain (L0C_O_FULL / L0C_O_EMPTY).
AIV (each holds ``heads_per_core / vector_cores`` softmax rows and deals the block's
32-token chunks round-robin), per step j in program order:
  V: index preprocessing (j+lead_g); ND2NZ/dequant of block j+lead_n's chunks;
     softmax of block j+1; O-fragment scale/accumulate for a drain before block j.
  MTE2: index group fetch, then per-token KV gather of block j+lead_g.
  MTE3: NZ chunk -> L1 KV slot, S -> L1, final O fragments -> GM.

MTE2 queue (facts 1.4, S1: 16 issued-but-incomplete requests per AIV): instructions
reach the pipes through the AIV's in-order dispatch, so a gather of more than 16
descriptors blocks dispatch until descriptor n-16 completes; the next step's
vector work waits for that (an mte2->v flag set after that descriptor). gather2
(facts 3.4) halves the descriptors, so 32 tokens fit the queue.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import deque

import numpy as np

from simnode.instr import isa
from simnode.kernels.sparse_mla import vf
from simnode.kernels.sparse_mla.plan import (FRAG_BUFFERS, INDEX_BLOCK_TOKENS, INDEX_BYTES,
                                             KV_ROW_BYTES, L0_TILE, Q_L1_SLOTS, Plan,
                                             gather_slot_bytes, ub_row)

MAX_EVENT_IDS = 8         # facts 3.2, S3: 8 event ids per (src, dst) pipe pair
STAT_BYTES = 4            # fp32 LSE (and prefill's max logit) per row, written per item (S2)

# cross-core flag ids, AIC -> AIV and AIV -> AIC (16 per AIV, facts 3.2)
X_P, X_FRAG, X_KVFREE, X_SFREE = 0, 1, 2, 3
X_KV, X_S, X_PFREE, X_FRAGFREE = 0, 1, 2, 3


def _memo(cls):
    cache = {}

    def make(*args):
        obj = cache.get(args)
        if obj is None:
            obj = cache[args] = cls(*args)
        return obj
    return make


Set, Wait, XSet, XWait = _memo(isa.SetFlag), _memo(isa.WaitFlag), _memo(isa.CrossSet), _memo(isa.CrossWait)
Vec, Mmad, Scal = _memo(isa.VecOp), _memo(isa.Mmad), _memo(isa.Scalar)
Copy, Fix = _memo(isa.Copy), _memo(isa.Fixpipe)




def _copy_slots():
    """The slot setters of ``isa.Copy`` in field order, if its fields are the ones
    ``_new_copies`` fills; else None (then ``isa.Copy`` itself builds the gathers)."""
    names = tuple(f.name for f in dataclasses.fields(isa.Copy))
    if names != ("path", "size_bytes", "gm_key", "l2_hint", "label", "regions"):
        return None
    return tuple(getattr(isa.Copy, n).__set__ for n in names)


_SLOTS = _copy_slots()
_NEW = object.__new__


def _new_copies(n: int, fields: tuple) -> list:
    """``n`` records ``isa.Copy(*fields)``, a field given as a list giving each record its own
    value. Made by filling new records' slots, a field at a time for all of them (C-level
    maps): the frozen dataclass's ``__init__`` without its six ``object.__setattr__`` calls.
    Gathers are the most numerous new records of a prefill (~315 k at n_q 4096);
    tests/kernels/test_sparse_mla.py checks the records equal ``isa.Copy``'s own."""
    cols = [f if type(f) is list else itertools.repeat(f, n) for f in fields]
    if _SLOTS is None:
        return list(map(isa.Copy, *cols))
    recs = list(map(_NEW, itertools.repeat(isa.Copy, n)))
    for setter, col in zip(_SLOTS, cols):
        deque(map(setter, recs, col), maxlen=0)
    return recs


def _gathers(row: int, hint: str, cache: str, seq: int, firsts: list, seconds: list | None,
             row_keys: dict) -> list:
    """The KV gathers of one token each (``seconds`` None) or of a pair of tokens each
    (``firsts[i]``, ``seconds[i]``), of rows of ``row`` bytes of cache ``cache`` of sequence
    ``seq``. ``row_keys``: (cache, sequence) -> {token: its KV row's GM region key}, one key
    object per row shared by every gather of it in the schedule (less memory, and the L2
    model finds the same object again); the schedule's own, so it does not outlive it."""
    rows = row_keys.get((cache, seq))
    if rows is None:
        rows = row_keys[(cache, seq)] = {}
    for tok in set(firsts).union(seconds or ()):
        if tok not in rows:
            rows[tok] = ("kv", cache, seq, tok)
    keys = list(map(rows.__getitem__, firsts))
    if seconds is None:
        return _new_copies(len(keys), ("gm_to_ub", row, keys, hint, "KV gather", ()))
    # gather2 (facts 3.4, S1): ONE request (burst_count 2, src_stride = token distance) whose
    # two rows each hit or miss in L2 on their own
    regions = list(zip(keys, map(rows.__getitem__, seconds)))
    return _new_copies(len(keys), ("gm_to_ub", row * 2, None, hint, "KV gather2", regions))


def _chunk_spans(t: int, plan: Plan) -> list[tuple[int, int, int]]:
    """A block of ``t`` tokens as its chunks: (AIV, first token, end token) each, the chunks
    dealt round-robin to the AIVs."""
    c = plan.chunk_tokens
    return [(i % plan.n_aiv, i * c, min((i + 1) * c, t)) for i in range(math.ceil(t / c))]


def gather_chunks(p, plan: Plan, per_core: list, kv_hint: str) -> list:
    """Per core (``per_core``: its blocks), per AIV, per block: that AIV's chunks of the block
    as (tokens, its KV gather records, one per MTE2 descriptor).

    One record per (row bytes, L2 hint, cache, sequence, tokens of the descriptor), shared by
    every query and core that gathers the same tokens. The descriptors of every block are
    found at once: blocks of one cache and length have their descriptors at the same token
    positions, so each such group is a token matrix whose descriptors are coded as integers,
    made unique (numpy) and turned into records once, in code order; a chunk's records are
    then a slice of its block's row (no dict lookup per descriptor)."""
    per_desc = 2 if p.gather2 else 1
    rows = [[[] for _ in blocks] for blocks in per_core]        # per core, per block: chunks
    groups: dict = {}                     # (cache, row bytes, tokens) -> [(core, index, block)]
    for ci, blocks in enumerate(per_core):
        for bi, blk in enumerate(blocks):
            groups.setdefault((blk.cache, KV_ROW_BYTES[blk.dtype], len(blk.tokens)), []).append(
                (ci, bi, blk))
    mats = {key: np.fromiter(itertools.chain.from_iterable(blk.tokens for _, _, blk in members),
                             dtype=np.int64, count=len(members) * key[2]).reshape(len(members), key[2])
            for key, members in groups.items()}
    # code base: above every token (whatever their order in a block); token m - 1: no second
    m = max((int(x.max()) for x in mats.values() if x.size), default=0) + 2
    by_space: dict = {}                   # (cache, row bytes) -> [(group members, layout, codes)]
    for (cache, row, t), members in groups.items():
        # the block's chunks (``_chunk_spans``) and each chunk's descriptors: (start, tokens)
        layout, starts, lens = [], [], []
        for v, c0, c1 in _chunk_spans(t, plan):
            d0 = len(starts)
            for s in range(c0, c1, per_desc):
                starts.append(s)
                lens.append(min(per_desc, c1 - s))
            layout.append((v, c1 - c0, d0, len(starts)))
        toks = mats[(cache, row, t)]
        seqs = np.array([blk.seq for _, _, blk in members], dtype=np.int64)[:, None]
        st = np.array(starts, dtype=np.int64)
        second = np.where(np.array(lens) == 2, toks[:, np.minimum(st + 1, t - 1)], m - 1)
        codes = (seqs * m + toks[:, st]) * m + second
        by_space.setdefault((cache, row), []).append((members, layout, codes))
    row_keys: dict = {}                   # (``_gathers``)
    for (cache, row), parts in by_space.items():
        uniq, inv = np.unique(np.concatenate([x[2].ravel() for x in parts]), return_inverse=True)
        recs = np.empty(len(uniq), dtype=object)
        seqs, firsts, seconds = uniq // (m * m), uniq // m % m, uniq % m
        bounds = [0, *(np.flatnonzero(np.diff(seqs)) + 1).tolist(), len(uniq)]
        for lo, hi in zip(bounds, bounds[1:]):          # one sequence's gathers (uniq is sorted)
            one = seconds[lo:hi] == m - 1
            for idx, single in ((np.flatnonzero(one) + lo, True), (np.flatnonzero(~one) + lo, False)):
                if len(idx):
                    recs[idx] = _gathers(row, kv_hint, cache, int(seqs[lo]), firsts[idx].tolist(),
                                         None if single else seconds[idx].tolist(), row_keys)
        at = 0
        for members, layout, codes in parts:
            occ = recs[inv[at:at + codes.size]].reshape(codes.shape)
            at += codes.size
            # each chunk's records as lists made straight from the array's columns (every
            # step over them touches each record: ~1.3 M at n_q 4096, most of them cache misses)
            cols = [(v, n, occ[:, d0:d1].tolist()) for v, n, d0, d1 in layout]
            for r, (ci, bi, _) in enumerate(members):
                rows[ci][bi] = [(v, n, col[r]) for v, n, col in cols]
    out = []
    for blocks_rows in rows:
        per_aiv = [[[(n, r) for v, n, r in chunks if v == a] for chunks in blocks_rows]
                   for a in range(plan.n_aiv)]
        out.append(per_aiv)
    return out


def leads(p, plan: Plan) -> tuple[int, int]:
    """(ND2NZ lead, gather lead) of the AIV step: step j converts block j + the first and
    gathers block j + the second (facts 3.4: i+3 and i+5 in FlashMLA's configuration)."""
    # pushing block j+a reuses the L1 slot of block j+a-stages, whose O (and any drain
    # before it) must not come after step j in the AIV order
    a_lead = min(3, plan.kv_l1_stages - 1)
    m = math.ceil(math.ceil(p.b_topk / plan.chunk_tokens) / plan.n_aiv)
    return a_lead, a_lead + max(0, plan.gather_chunks // m - 1)


def core_program(prog, chip, p, plan: Plan, blocks: list, drain: list,
                 kv_hint: str = "normal", chunks: list | None = None) -> None:
    """Fill ``prog`` with one core's records; ``kv_hint`` is the L2 hint of the KV gathers;
    ``chunks``: this core's part of ``gather_chunks`` (made here if None)."""
    a_lead, g_lead = leads(p, plan)
    if chunks is None:
        chunks = gather_chunks(p, plan, [blocks], kv_hint)[0]
    _aic(prog, p, plan, blocks, drain)
    limit = chip.sync.mte2_outstanding_per_aiv
    for v in range(plan.n_aiv):
        _aiv(prog, f"aiv{v}", v, p, plan, blocks, drain, a_lead, g_lead, limit, kv_hint, chunks[v])
    _launch(prog, p.kernel_launch_ns, p.cold_start_ns)


def _launch(prog, launch_ns: float, cold_ns: float) -> None:
    """The per-launch time before any unit's first instruction: kernel launch + InitSocState
    (facts 1.2, S6: ~1.9 us; S2 calls AscendC::InitSocState() first) and the cold start
    (calibrated; 0 for warm caches: see sparse_mla.COLD_START_NS). Each unit's scalar pipe spends it,
    then releases the unit's other pipes (set s -> pipe, event 0)."""
    delays = [isa.Delay(ns, label) for ns, label in ((launch_ns, "kernel launch + InitSocState"),
                                                     (cold_ns, "cold start")) if ns > 0]
    if not delays:
        return
    for unit in sorted({u for u, _ in prog.pipes}):
        pipes = sorted(pp for (u, pp), ins in prog.pipes.items() if u == unit and ins and pp != "s")
        head = delays + [Set("s", pp, 0) for pp in pipes]
        prog.pipe(unit, "s")[:0] = head
        _shift_repeats(prog, (unit, "s"), len(head))
        for pp in pipes:
            prog.pipes[(unit, pp)].insert(0, Wait("s", pp, 0))
            _shift_repeats(prog, (unit, pp), 1)


def _shift_repeats(prog, key, k: int) -> None:
    """``k`` records were put before a pipe's: its repeat notes move on by ``k``."""
    notes = prog.repeats.get(key)
    if notes:
        prog.repeats[key] = [(start + k, length, src + k) for start, length, src in notes]


def _aic(prog, p, plan: Plan, blocks, drain) -> None:
    """The AIC's records. A step (``p_phase`` of block g, ``o_phase`` of block g - 1) emits
    to MTE1 and the cube records that follow from a few properties of the two blocks and
    the running L0 slot; each such step is built once and placed again (``CoreProgram.
    place``: noted as a repeat, which the check and the compile skip). FixPipe likewise."""
    mte2, mte1 = prog.pipe("aic", "mte2"), prog.pipe("aic", "mte1")
    prog.pipe("aic", "m")                 # (the pipes' order is the launch's: kept)
    fix = prog.pipe("aic", "fix")
    aivs = [f"aiv{v}" for v in range(plan.n_aiv)]
    xw_kv = [XWait(x, X_KV) for x in aivs]
    hpc, d = p.heads_per_core, p.d_qk
    n = len(blocks)
    dst = "ub_dual" if plan.n_aiv == 2 else "ub"
    u = 0                                 # running L0 slot use
    items = 0
    qslot = {}

    # the flags of each L0 slot, looked up in their memo once
    slots = plan.l0_slots
    w_m_mte1 = [Wait("m", "mte1", s) for s in range(slots)]
    s_mte1_m = [Set("mte1", "m", s) for s in range(slots)]
    w_mte1_m = [Wait("mte1", "m", s) for s in range(slots)]
    s_m_mte1 = [Set("m", "mte1", s) for s in range(slots)]
    # and the other records repeated per block, likewise (the same memo objects)
    nt = d // L0_TILE                     # O n-tiles (and Q K^T k-tiles)
    w_fix_m = [(Wait("fix", "m", e),) for e in range(1 + nt)]
    s_m_fix = [(Set("m", "fix", e),) for e in range(1 + nt)]
    w_m_fix = [Wait("m", "fix", e) for e in range(1 + nt)]
    s_fix_m = [Set("fix", "m", e) for e in range(1 + nt)]
    w_fix_all = tuple(Wait("fix", "m", 1 + r) for r in range(nt))
    xw_s, xw_pfree, xw_fragfree = ([XWait(x, f) for x in aivs] for f in (X_S, X_PFREE, X_FRAGFREE))
    xs_sfree, xs_kvfree, xs_p, xs_frag = ([XSet(x, f) for x in aivs]
                                          for f in (X_SFREE, X_KVFREE, X_P, X_FRAG))
    loads_of = {}                         # sizes of a unit's L1 -> L0 loads: their records
    m1: list = []                         # the step being built: its MTE1 and cube records
    cb: list = []

    def unit(loads, mm, pre=(), post=()):
        nonlocal u
        s = u % slots
        if u >= slots:
            m1.append(w_m_mte1[s])
        recs = loads_of.get(loads)
        if recs is None:
            recs = loads_of[loads] = [Copy("l1_to_l0", size) for size in loads]
        m1.extend(recs)
        m1.append(s_mte1_m[s])
        cb.append(w_mte1_m[s])
        cb.extend(pre)
        cb.append(mm)
        cb.extend(post)
        cb.append(s_m_mte1[s])
        u += 1

    def p_phase(first, t, later, last, qs):
        """Block b's P = Q K^T (``later``: b >= 1; ``last``: b ends its item; ``qs``: its
        item's Q slot)."""
        if first:
            m1.append(Wait("mte2", "mte1", qs))
        for v, _, _ in _chunk_spans(t, plan):
            m1.append(xw_kv[v])
        kt = d // L0_TILE
        mm = Mmad(t, hpc, L0_TILE, "bf16") if plan.transposed else Mmad(hpc, t, L0_TILE, "bf16")
        loads = (hpc * L0_TILE * 2, t * L0_TILE * 2)
        for k in range(kt):
            # one P in L0C (S2): P[b] overwrites P[b-1] once FixPipe has copied it out
            # (the MMADs' unit_flag handoff)
            pre = w_fix_m[0] if k == 0 and later else ()
            post = s_m_fix[0] if k == kt - 1 else ()
            unit(loads, mm, pre, post)
        if last:
            m1.append(Set("mte1", "mte2", qs))

    # O sits at one place in L0C (S2), n-tile j in region j, FIX <-> M event 1 + j

    def o_phase(t, rescale, drained, post_fix):
        """Block b's O += S V (``rescale``: a rescale drain before it; ``drained``: O was
        drained before it; ``post_fix``: O is drained after it)."""
        m1.extend(xw_s)
        mm = Mmad(L0_TILE, hpc, t, "bf16") if plan.transposed else Mmad(hpc, L0_TILE, t, "bf16")
        for j in range(nt):
            if rescale:
                # a rescale drain is a full barrier (S2 trigger_o_copy_out: M waits on
                # L0C_O_EMPTY after all fragments): the block's first n-tile waits for all
                pre = w_fix_all if j == 0 else ()
            else:
                # an item's first O += S V reuses n-tile j once FIX has copied the previous
                # item's n-tile j out (unit_flag, S2: "synchronize by unit_flag")
                pre = w_fix_m[1 + j] if drained else ()
            post = s_m_fix[1 + j] if post_fix else ()
            loads = ((hpc * t * 2, t * L0_TILE * 2) if j == 0 else (t * L0_TILE * 2,))
            unit(loads, mm, pre, post)
            if j == 0:
                m1.extend(xs_sfree)
        m1.extend(xs_kvfree)

    steps: dict = {}                      # step key -> (MTE1 records, cube records, L0 units)
    place_m1, place_cb = prog.placer("aic", "mte1"), prog.placer("aic", "m")
    for g in range(n + 1):
        pk = ok = None
        if g < n:
            blk = blocks[g]
            if blk.first:
                qs = qslot[blk.item] = items % Q_L1_SLOTS
                if items >= Q_L1_SLOTS:
                    mte2.append(Wait("mte1", "mte2", qs))
                mte2.append(isa.Copy("gm_to_l1", hpc * d * 2, ("q", blk.item), label="Q -> L1"))
                mte2.append(Set("mte2", "mte1", qs))
                items += 1
            pk = (blk.first, len(blk.tokens), g >= 1, g + 1 == n or blocks[g + 1].first,
                  qslot[blk.item])
        if g >= 1:
            b = g - 1
            ok = (len(blocks[b].tokens), drain[b] and not blocks[b].first, drain[b],
                  b + 1 == n or drain[b + 1])
        # the cube's order: P[g] = Q K[g]^T, then O += S[g-1] V[g-1]
        key = (pk, ok, u if u < slots else slots + u % slots)
        step = steps.get(key)
        if step is None:
            m1, cb, u0 = [], [], u
            if pk is not None:
                p_phase(*pk)
            if ok is not None:
                o_phase(*ok)
            step = steps[key] = (m1, cb, u - u0)
        else:
            u += step[2]
        place_m1(step[0], key)
        place_cb(step[1], key)

    frags = 0
    per_tile = L0_TILE // plan.frag_cols
    fx: list = []                         # the FixPipe records of the step being built

    def drain_frags():
        """FixPipe all O fragments out of L0C, each into a free UB buffer (2 per AIV)."""
        nonlocal frags
        for f in range(plan.fragments):
            j = f // per_tile
            if f % per_tile == 0:
                fx.append(w_m_fix[1 + j])
            if frags >= FRAG_BUFFERS:
                fx.extend(xw_fragfree)
            fx.append(Fix(hpc, plan.frag_cols, "fp32", dst, None, "normal", "O fragment -> UB"))
            fx.extend(xs_frag)
            frags += 1
            if f % per_tile == per_tile - 1:
                fx.append(s_fix_m[1 + j])

    # FixPipe in S2's program order: the cube issues P[g] = Q K[g]^T, then O += S[g-1] V[g-1];
    # a rescale drain is triggered inside the latter, before its MMADs, and an item's final
    # copy-out right after them. So FIX copies P[g], then the rescale drain before O[g-1],
    # then, if g-1 ends an item, that item's O; then P[g+1]. Fragments past the 2 UB buffers
    # wait for the AIVs, which take them after softmax(g) (facts 3.4 vector order).
    fsteps: dict = {}                     # step key -> (FixPipe records, fragments)
    place_fix = prog.placer("aic", "fix")
    for g in range(n + 1):
        key = (len(blocks[g].tokens) if g < n else None, g >= 1,
               g >= 1 and drain[g - 1] and not blocks[g - 1].first,
               g >= 1 and (g == n or blocks[g].first), min(frags, FRAG_BUFFERS))
        step = fsteps.get(key)
        if step is None:
            fx, f0 = [], frags
            t, later, rescale, ends, _ = key
            if t is not None:
                fx.append(w_m_fix[0])
                if later:
                    fx.extend(xw_pfree)
                fx.append(Fix(hpc, t, "fp32", dst, None, "normal", "P -> UB"))
                fx.append(s_fix_m[0])
                fx.extend(xs_p)
            if rescale:
                drain_frags()                           # rescale drain before O[g-1]
            if ends:
                drain_frags()                           # the item ending at g-1: its O
            step = fsteps[key] = (fx, frags - f0)
        else:
            frags += step[1]
        place_fix(step[0], key)


def _aiv(prog, unit, v, p, plan: Plan, blocks, drain, a_lead, g_lead, limit, kv_hint,
         chunks) -> None:
    """One AIV's records; ``chunks``: per block, its chunks as (tokens, their KV gather
    records) (``gather_chunks``).

    A step's MTE2 records (the index group and the KV gathers: records of their own) are made
    step by step. Its vector and MTE3 records follow from a few properties of the blocks it
    touches and a little running state (``key`` below), so each kind of step is built once
    and placed again (``CoreProgram.place``: noted as a repeat, which the check and the
    compile skip); a step that writes an item's LSE or O to GM gets those copies (records
    of their own) filled into its slots and is not a repeat."""
    mte2, vec, mte3 = prog.pipe(unit, "mte2"), prog.pipe(unit, "v"), prog.pipe(unit, "mte3")
    n = len(blocks)
    rows, d = plan.rows, p.d_v
    gathered = converted = 0
    stores_pending = 0
    prev_dispatch = False
    o_blocks = 0              # rescale drains of the current item so far (S2 o_block_idx)
    topk_of = {"kv": p.topk, "main": p.topk_main, "extra": p.topk_extra}
    # the gather slots start zeroed (S2 clear_all_kv_bufs), before the first gather
    vec.extend(vf.clear_kv(sum(gather_slot_bytes(p, plan))))
    # the flags this AIV repeats per chunk or block, looked up in their memo once
    w_v_mte2_0, w_mte2_v_0, w_mte2_v_2 = Wait("v", "mte2", 0), Wait("mte2", "v", 0), Wait("mte2", "v", 2)
    s_mte2_v_0, s_mte2_v_2 = Set("mte2", "v", 0), Set("mte2", "v", 2)
    w_mte3_v_0, s_v_mte2_0, s_v_mte3_0 = Wait("mte3", "v", 0), Set("v", "mte2", 0), Set("v", "mte3", 0)
    w_v_mte3_0, s_mte3_v_0, w_v_mte3_1 = Wait("v", "mte3", 0), Set("mte3", "v", 0), Wait("v", "mte3", 1)
    s_v_mte3_1 = Set("v", "mte3", 1)
    xw_frag, xs_fragfree = XWait("aic", X_FRAG), XSet("aic", X_FRAGFREE)
    w_mte3_v_1, s_v_mte3_2, w_v_mte3_2 = Wait("mte3", "v", 1), Set("v", "mte3", 2), Wait("v", "mte3", 2)
    s_mte3_v_1 = Set("mte3", "v", 1)
    xw_kvfree, xw_p, xw_sfree = XWait("aic", X_KVFREE), XWait("aic", X_P), XWait("aic", X_SFREE)
    xs_kv, xs_s, xs_pfree = XSet("aic", X_KV), XSet("aic", X_S), XSet("aic", X_PFREE)
    gather_chunks = plan.gather_chunks
    vv: list = []             # the step being built: its vector and MTE3 records, and the
    m3: list = []             # slots of its GM writes in m3: (position, bytes, what, label)
    holes: list = []

    def drain_in(final):
        """Consume one O drain: scale-and-add each fragment into the O accumulator; at an
        item's end (``final``) normalize, cast to bf16 and store it to GM, fragment by fragment (the 2
        output-fragment buffers, facts 3.4). The first rescale drain of an item only scales,
        later ones also add; the final VF adds the accumulator only if a rescale drain left
        one (S2 o_block_idx: add_and_scale_o_vf<true, o_block_idx != 0>,
        get_final_output_vf<o_block_idx != 0>).

        The bf16 result is written over its own fp32 columns of the O accumulator (S2
        get_final_output_vf), so a fragment buffer is free again as soon as the VF has read
        it; the accumulator columns are rewritten only by the next item's first drain, which
        waits for their store (mte3 -> v event 1)."""
        nonlocal stores_pending, o_blocks
        e = rows * plan.frag_cols
        for f in range(plan.fragments):
            vv.append(xw_frag)
            if stores_pending:
                vv.append(w_mte3_v_1)
                stores_pending -= 1
            if not final:
                vv.extend(vf.scale_o(rows, plan.frag_cols, o_blocks > 0))
                vv.append(xs_fragfree)
                continue
            vv.extend(vf.final_output(rows, plan.frag_cols, o_blocks > 0))
            vv.append(xs_fragfree)
            vv.append(s_v_mte3_2)
            m3.append(w_v_mte3_2)
            holes.append((len(m3), e * 2, ("o", f), "O -> GM"))     # ("o", item, v, f)
            m3.append(None)
            m3.append(s_mte3_v_1)
        if not final:
            o_blocks += 1
        else:
            stores_pending = plan.fragments

    def build(w2, cnt, nb, sb, dr):
        """A step's vector and MTE3 records (``key`` below)."""
        nonlocal converted, o_blocks
        preproc = []          # V work of block gb's indices, issued after softmax (S2 order)
        if cnt is not None:
            # S2 run_process_index: once per group of 640 indices of one cache
            preproc.append(Wait("mte2", "v", 1))
            preproc.extend(vf.process_index(p.mode, cnt))
            preproc.append(Set("v", "mte2", 1))
        if w2:
            vv.append(w_mte2_v_2)
        if g_lead <= a_lead:
            # the gather lead is the ND2NZ lead (few UB buffers, e.g. 1C1V): block gb's
            # ND2NZ comes this step and needs its gather, so the preprocessing goes first
            vv.extend(preproc)
            preproc = []
        if nb is not None:
            stage_reused, dtype, sizes = nb
            if stage_reused:
                m3.append(xw_kvfree)
            for t in sizes:
                vv.append(w_mte2_v_0)
                if converted >= 1:
                    vv.append(w_mte3_v_0)
                if dtype == "bf16":
                    vv.extend(vf.nd2nz(t))
                else:
                    vv.extend(vf.dequant(dtype, t, ub_row(dtype)))
                vv.append(s_v_mte2_0)
                vv.append(s_v_mte3_0)
                converted += 1
                m3.append(w_v_mte3_0)
                m3.append(Copy("ub_to_l1", t * d * 2, None, "normal", "KV chunk -> L1"))
                m3.append(s_mte3_v_0)
                m3.append(xs_kv)
        if sb is not None:
            t, first, later, last = sb
            vv.append(xw_p)
            vv.extend(vf.softmax(rows, t, first))
            vv.append(s_v_mte3_1)
            m3.append(w_v_mte3_1)
            if later:
                m3.append(xw_sfree)
            m3.append(Copy("ub_to_l1", rows * t * 2, None, "normal", "S -> L1"))
            m3.append(xs_s)
            m3.append(xs_pfree)
            if last:
                # the item's last softmax: its LSE and 1 / row sum, written out (prefill also
                # writes the max logits) right after it (S2 run_softmax, last block)
                vv.extend(vf.final_lse(p.sinks))
                vv.append(Set("v", "mte3", 3))
                m3.append(Wait("v", "mte3", 3))
                for what in (("lse",) if p.mode == "decode" else ("lse", "max_logits")):
                    holes.append((len(m3), rows * STAT_BYTES, (what,), f"{what} -> GM"))
                    m3.append(None)                                   # (what, item, v)
        # index preprocessing (j+g_lead) after softmax (j+1), as S2's step issues them
        vv.extend(preproc)
        # O scale (j) after softmax (j+1) (facts 3.4; S2 run_scale_o): a rescale drain before
        # O[j], then, if block j ends its item, the item's final O
        if dr is not None:
            first, rescale, final = dr
            if first:
                o_blocks = 0
            if rescale:
                drain_in(False)
            if final:
                drain_in(True)

    steps: dict = {}          # key -> (vector records, MTE3 records, holes, state after)
    place_v, place_m3 = prog.placer(unit, "v"), prog.placer(unit, "mte3")
    for j in range(-g_lead, n):
        gb = j + g_lead
        w2, cnt = prev_dispatch, None
        if gb < n:
            blk = blocks[gb]
            mine = chunks[gb]
            if blk.index_group >= 0:
                # S2 run_issue_index_fetch / run_process_index: once per group of 640 indices
                # of one cache (decode: main and extra each start a group), on all of them
                cnt = min(INDEX_BLOCK_TOKENS, topk_of[blk.cache] - blk.index_group * INDEX_BLOCK_TOKENS)
                mte2.append(isa.Copy("gm_to_ub", cnt * INDEX_BYTES,
                                     ("idx", blk.item, blk.cache, blk.index_group), label="indices"))
                mte2.append(Set("mte2", "v", 1))
                mte2.append(Wait("v", "mte2", 1))
            ndesc = sum(len(c[1]) for c in mine)
            stall_at = ndesc - limit      # descriptor after which dispatch may go on
            desc = 0
            for _, recs_of in mine:
                if gathered >= gather_chunks:
                    mte2.append(w_v_mte2_0)
                if desc < stall_at <= desc + len(recs_of):
                    # dispatch goes on once descriptor ``stall_at`` has completed
                    mte2.extend(recs_of[:stall_at - desc])
                    mte2.append(s_mte2_v_2)
                    mte2.extend(recs_of[stall_at - desc:])
                else:
                    mte2.extend(recs_of)
                desc += len(recs_of)
                mte2.append(s_mte2_v_0)
                gathered += 1
            prev_dispatch = stall_at > 0
        else:
            prev_dispatch = False
        nb = j + a_lead
        nbk = None
        if 0 <= nb < n:
            blk = blocks[nb]
            nbk = (nb >= plan.kv_l1_stages, blk.dtype, tuple(n for n, _ in chunks[nb]))
        sb = j + 1
        sbk = None
        if 0 <= sb < n:
            blk = blocks[sb]
            sbk = (len(blk.tokens), blk.first, sb >= 1, sb + 1 == n or blocks[sb + 1].first)
        drk = None
        if 0 <= j < n:
            drk = (blocks[j].first, drain[j] and not blocks[j].first, j + 1 == n or blocks[j + 1].first)
        key = (w2, cnt, nbk, sbk, drk, converted >= 1, stores_pending, o_blocks > 0)
        step = steps.get(key)
        if step is None:
            vv, m3, holes = [], [], []
            build(w2, cnt, nbk, sbk, drk)
            step = steps[key] = (vv, m3, holes, (converted, stores_pending, o_blocks))
        else:
            converted = max(converted, step[3][0])      # (only >= 1 matters: counted on)
            stores_pending, o_blocks = step[3][1], step[3][2]
        place_v(step[0], key)
        if not step[2]:
            place_m3(step[1], key)
        else:
            seq = list(step[1])
            for at, size, what, label in step[2]:
                item = blocks[sb].item if len(what) == 1 else blocks[j].item
                seq[at] = isa.Copy("ub_to_gm", size, (what[0], item, v) + what[1:], label=label)
            mte3.extend(seq)
