"""The KV reads of a sparse MLA call: every core's gather records, made at once.

``gather_chunks(p, plan, per_core, hint, contiguous)`` gives, per core, per AIV and per
block, that AIV's chunks of the block as (tokens, the MTE2 records that read them);
``chunk_spans`` deals a block's chunks to the AIVs (and, for V4's core pairs, to the
pair's cores). A gathered cache reads one or two rows per request (gather2, facts 3.4); a
cache read in order (V4's window and HCA caches) reads a run of rows per request, one per
page. Each row is its own L2 region (a multi-region request: ``isa.Copy.regions``). Pure
functions: no SimPy.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import deque

import numpy as np

from simnode.instr import isa
from simnode.kernels.sparse_mla.plan import KV_ROW_BYTES, Plan


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


def chunk_spans(t: int, plan: Plan, share: tuple = (0, 1)) -> list[tuple[int, int, int]]:
    """A block of ``t`` tokens as its chunks: (AIV, first token, end token) each, the chunks
    dealt round-robin to the AIVs. ``share`` (k, n): the block's conversion is split over
    n cores (V4's op on a core pair, SAS IS_SPLIT_G): the chunks dealt round-robin to the n
    cores' AIVs, and the k-th core's alone are kept."""
    c = plan.chunk_tokens
    k, n = share
    out = []
    for i in range(math.ceil(t / c)):
        w = i % (plan.n_aiv * n)
        if w // plan.n_aiv == k:
            out.append((w % plan.n_aiv, i * c, min((i + 1) * c, t)))
    return out


def gather_chunks(p, plan: Plan, per_core: list, kv_hint: str,
                  contiguous: frozenset = frozenset()) -> list:
    """Per core (``per_core``: its blocks), per AIV, per block: that AIV's chunks of the block
    as (tokens, its KV gather records, one per MTE2 descriptor). A cache in ``contiguous`` is
    read a run of consecutive rows per descriptor (``_row_runs``); the others are gathered
    one or two rows per descriptor (gather2).

    One record per (row bytes, L2 hint, cache, sequence, tokens of the descriptor), shared by
    every query and core that gathers the same tokens. The descriptors of every block are
    found at once: blocks of one cache and length have their descriptors at the same token
    positions, so each such group is a token matrix whose descriptors are coded as integers,
    made unique (numpy) and turned into records once, in code order; a chunk's records are
    then a slice of its block's row (no dict lookup per descriptor)."""
    per_desc = 2 if p.gather2 else 1
    rows = [[[] for _ in blocks] for blocks in per_core]        # per core, per block: chunks
    groups: dict = {}                     # (cache, row bytes, tokens) -> [(core, index, block)]
    row_keys: dict = {}                   # (``_gathers``)
    for ci, blocks in enumerate(per_core):
        for bi, blk in enumerate(blocks):
            if blk.cache in contiguous:
                rows[ci][bi] = _row_runs(plan, blk, kv_hint, row_keys)
                continue
            groups.setdefault((blk.cache, KV_ROW_BYTES[blk.dtype], len(blk.tokens), blk.share),
                              []).append((ci, bi, blk))
    mats = {key: np.fromiter(itertools.chain.from_iterable(blk.tokens for _, _, blk in members),
                             dtype=np.int64, count=len(members) * key[2]).reshape(len(members), key[2])
            for key, members in groups.items()}
    # code base: above every token (whatever their order in a block); token m - 1: no second
    m = max((int(x.max()) for x in mats.values() if x.size), default=0) + 2
    by_space: dict = {}                   # (cache, row bytes) -> [(group members, layout, codes)]
    for (cache, row, t, share), members in groups.items():
        # the block's chunks (``chunk_spans``) and each chunk's descriptors: (start, tokens)
        layout, starts, lens = [], [], []
        for v, c0, c1 in chunk_spans(t, plan, share):
            d0 = len(starts)
            for s in range(c0, c1, per_desc):
                starts.append(s)
                lens.append(min(per_desc, c1 - s))
            layout.append((v, c1 - c0, d0, len(starts)))
        toks = mats[(cache, row, t, share)]
        seqs = np.array([blk.seq for _, _, blk in members], dtype=np.int64)[:, None]
        st = np.array(starts, dtype=np.int64)
        second = np.where(np.array(lens) == 2, toks[:, np.minimum(st + 1, t - 1)], m - 1)
        codes = (seqs * m + toks[:, st]) * m + second
        by_space.setdefault((cache, row), []).append((members, layout, codes))
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


#: tokens of one page of a paged cache (CR's KV cache block size, 128; the op reads a run of
#: rows with one DataCopyPad per page, SAS CopyInKvNotSparse)
PAGE_TOKENS = 128


def _row_runs(plan: Plan, blk, kv_hint: str, row_keys: dict) -> list:
    """A contiguously read block's chunks as (AIV, tokens, records): one descriptor per run of
    consecutive tokens within a page, its rows each their own L2 region (a multi-region
    request: ``isa.Copy.regions``), one record per (cache, sequence, run) shared by all."""
    row = KV_ROW_BYTES[blk.dtype]
    rows = row_keys.setdefault((blk.cache, blk.seq), {})
    runs = row_keys.setdefault(("runs", blk.cache, blk.seq, row), {})
    out = []
    for v, c0, c1 in chunk_spans(len(blk.tokens), plan, blk.share):
        toks, recs, start = blk.tokens[c0:c1], [], 0
        for i in range(1, len(toks) + 1):
            if i == len(toks) or toks[i] != toks[i - 1] + 1 or toks[i] % PAGE_TOKENS == 0:
                run = toks[start:i]
                rec = runs.get((run[0], len(run)))
                if rec is None:
                    keys = tuple(rows.setdefault(t, ("kv", blk.cache, blk.seq, t)) for t in run)
                    rec = runs[(run[0], len(run))] = isa.Copy("gm_to_ub", row * len(run), None, kv_hint,
                                                              "KV rows", keys)
                recs.append(rec)
                start = i
        out.append((v, c1 - c0, recs))
    return out
