"""What DeepEP-Ascend dispatch and combine move, as counts: pure numpy, no SimPy.

``record_sizes(p)`` gives the bytes of every record (facts 4.2, 4.3, 2.4);
``build_plan(topk_by_rank, p)`` turns each rank's top-k expert ids into a
``DeepEPPlan`` (a ``simnode.ep.phase.TrafficPlan``): tokens, send-queue entries and
reduction rows per (rank, AIV, peer), which the timing model in ``simnode.ep.deepep``
turns into work and flows.

Conventions (facts 4.2): rank r's tokens are split into 64 contiguous ranges, one
per AIV (``ceil(T/64)`` tokens each); a token is sent once per destination rank
(deduplicated), the entries of one AIV to one peer are packed 6 tokens per SQE; a
token whose destination is its own rank is copied locally, not sent.
Combine (facts 4.3): the owner rank d returns one partial row per (token, source
rank r); d's tokens from r are strided over its 64 AIVs with a rotation by r and
grouped in tasks of 8; a token with two or more of its experts on d is reduced
first (MTE2 reads of its k rows), one with exactly one is sent straight from x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from simnode.config.chip import DTYPE_BITS
from simnode.ep.phase import TrafficPlan
from simnode.ep.routing import sort_rows

ALIGN_BYTES = 32             # UB/MTE row alignment (facts 1.3, S3)


@dataclass(frozen=True)
class DeepEPParams:
    """The kernels' shape (the EP family's fields, ``simnode.ep.fields``) and the DeepEP
    constants the code fixes."""
    num_ranks: int
    tokens_per_rank: int
    hidden: int
    top_k: int
    num_experts: int
    dispatch_dtype: str              #: "fp8" (with row-major scales, facts 2.4) or "bf16"
    combine_dtype: str               #: "bf16" (facts 2.4)
    scale_block: int = 128           #: channels per FP8 scale (DeepEP's per-128 fp32 scales; exact pack size open, facts 5.6)
    num_aiv: int = 64                #: AIVs per rank, one Jetty each (facts 4.1)
    tokens_per_sqe: int = 6          #: SGE pairs per dispatch SQE (facts 4.2 step 2)
    combine_task_tokens: int = 8     #: facts 4.3 step 2
    combine_doorbell_tasks: int = 8  #: facts 4.3 step 4
    wqebb_bytes: int = 64            #: facts 1.5, S6/S7


@dataclass(frozen=True)
class RecordSizes:
    hidden_row_bytes: int        #: dispatch payload row (FP8 hidden)
    scales_bytes: int            #: FP8 scales of one row
    metadata_bytes: int          #: dispatch metadata record: scales + top-k ids + weights + source index
    dispatch_wire_bytes: int     #: payload per (token, remote rank): hidden row + metadata record
    dispatch_logical_bytes: int  #: DeepEP's benchmark bytes per received token: x + scales + ids + weights
    sqe_bytes: int               #: one dispatch SQE: 4 WQEBBs (48 B header + 12 x 16 B SGEs)
    combine_row_bytes: int       #: BF16 combine row = DeepEP's combine benchmark bytes per token
    combine_wire_bytes: int      #: combine row + top-k weights rounded to 32 B
    combine_wqe_bytes: int       #: one combine WQE: 2 WQEBBs (48 B header + 2 SGEs)
    expert_row_bytes: int        #: one expert-output row read by the combine reduction (BF16)


def _align(n: int, a: int = ALIGN_BYTES) -> int:
    return -(-n // a) * a


def record_sizes(p: DeepEPParams) -> RecordSizes:
    hidden_row = p.hidden * DTYPE_BITS[p.dispatch_dtype] // 8
    scales = (p.hidden // p.scale_block) * 4 if DTYPE_BITS[p.dispatch_dtype] <= 8 else 0
    ids, weights, src_index = p.top_k * 8, p.top_k * 4, 8      # int64 ids, fp32 weights, int64 index
    metadata = _align(scales + ids + weights + src_index)
    combine_row = p.hidden * DTYPE_BITS[p.combine_dtype] // 8
    return RecordSizes(
        hidden_row_bytes=hidden_row, scales_bytes=scales, metadata_bytes=metadata,
        dispatch_wire_bytes=hidden_row + metadata,
        dispatch_logical_bytes=hidden_row + scales + ids + weights,
        sqe_bytes=4 * p.wqebb_bytes,
        combine_row_bytes=combine_row,
        combine_wire_bytes=combine_row + _align(p.top_k * 4),
        combine_wqe_bytes=2 * p.wqebb_bytes,
        expert_row_bytes=combine_row)


@dataclass(frozen=True)
class DeepEPPlan(TrafficPlan):
    """Counts per (source rank, destination rank), and per AIV if asked for: only
    ``aiv_tokens`` is [r, a, d] (int32: 256 MB at EP1024, kept only for in-order Jetties);
    SQEs and combine rows per AIV follow from it and are derived per rank (``aiv_sqes_of``,
    ``combine_tokens_of``) or reduced to [r, d], so a large EP size does not hold several
    [R, A, R] arrays at once."""
    params: DeepEPParams
    sizes: RecordSizes
    aiv_tokens: np.ndarray | None  #: int32 [r, a, d] tokens AIV a of rank r sends to rank d (d == r:
                                   #: local copy); None unless asked for (256 MB at EP1024)
    pair_tokens: np.ndarray       #: int64 [r, d] tokens rank r dispatches to rank d (diagonal: self-rank copies)
    pair_sqes: np.ndarray         #: [r, d] SQEs rank r posts for rank d, summed over its AIVs (0 for d == r)
    aiv_sqes_max: np.ndarray      #: [r] SQEs of rank r's busiest AIV, over all its peers
    reduce_tokens: np.ndarray     #: combine: [d, r] tokens from r with >= 2 experts on d (reduced)
    reduce_rows: np.ndarray       #: combine: [d, r] expert rows those reductions read
    expert_tokens: np.ndarray     #: [e] (token, expert) entries received by expert e

    def aiv_sqes_of(self, r: int) -> np.ndarray:
        """[a, d] SQEs AIV a of rank r posts for rank d: ceil(tokens / 6), none to itself."""
        return _sqes(self.aiv_tokens[r], r, self.params.tokens_per_sqe)

    def combine_tokens_of(self, d: int) -> np.ndarray:
        """[a, r] rows AIV a of owner d returns to rank r: d's tokens from r strided over its
        AIVs from AIV (r mod A) on (facts 4.3 step 2), so they differ by at most one."""
        A = self.params.num_aiv
        n = self.pair_tokens[:, d]                                   # [r]
        offset = (np.arange(A)[:, None] - np.arange(n.size)[None, :] % A) % A   # [a, r]
        return n // A + (offset < n % A)

    def combine_tasks_of(self, d: int) -> np.ndarray:
        """[a, r] tasks of <= 8 rows AIV a of owner d posts for rank r."""
        return -(-self.combine_tokens_of(d) // self.params.combine_task_tokens)

    @cached_property
    def combine_pair_tasks(self) -> np.ndarray:
        """[d, r] tasks owner d posts for rank r over all its AIVs: of the A AIVs, n mod A
        carry n // A + 1 rows and the others n // A (``combine_tokens_of``)."""
        A, task = self.params.num_aiv, self.params.combine_task_tokens
        n = self.pair_tokens.T
        base, extra = n // A, n % A
        return extra * -(-(base + 1) // task) + (A - extra) * -(-base // task)

    # whole [R, A, R] arrays, for tests and small studies (each call builds one)
    @property
    def aiv_sqes(self) -> np.ndarray:
        return np.stack([self.aiv_sqes_of(r) for r in range(self.params.num_ranks)])

    @property
    def combine_tokens(self) -> np.ndarray:
        """[d, a, r]"""
        return np.stack([self.combine_tokens_of(d) for d in range(self.params.num_ranks)])

    @property
    def combine_tasks(self) -> np.ndarray:
        """[d, a, r]"""
        return np.stack([self.combine_tasks_of(d) for d in range(self.params.num_ranks)])

    @property
    def pair(self) -> np.ndarray:
        return self.pair_tokens

    def wire_row_bytes(self, kind: str) -> int:
        """Dispatch: a row and its metadata per (token, remote rank); combine: a BF16 row and
        its top-k weights."""
        sz = self.sizes
        return sz.dispatch_wire_bytes if kind == "dispatch" else sz.combine_wire_bytes

    def counted_row_bytes(self, kind: str) -> int:
        """DeepEP's benchmark bytes per received token (facts 2.4)."""
        sz = self.sizes
        return sz.dispatch_logical_bytes if kind == "dispatch" else sz.combine_row_bytes


def _sqes(tokens: np.ndarray, rank: int, per_sqe: int) -> np.ndarray:
    """[a, d] SQEs for one rank's [a, d] tokens: ceil(tokens / per_sqe), self-rank column 0."""
    sqes = -(-tokens.astype(np.int64) // per_sqe)
    sqes[:, rank] = 0                                           # self-rank tokens are not sent
    return sqes


def aiv_ranges(num_tokens: int, num_aiv: int) -> np.ndarray:
    """Start index of each AIV's contiguous token range (``ceil(T/A)`` tokens each)."""
    per = math.ceil(num_tokens / num_aiv)
    return np.minimum(np.arange(num_aiv) * per, num_tokens)


def token_destinations(topk: np.ndarray, experts_per_rank: int):
    """Deduplicated (token, destination rank) entries of one rank's [T, k] expert ids, with the
    number of the token's experts on that rank. Returns (token, rank, k_on) int arrays."""
    ranks = sort_rows(np.asarray(topk) // experts_per_rank)
    t, k = ranks.shape
    first = np.ones((t, k), dtype=bool)
    first[:, 1:] = ranks[:, 1:] != ranks[:, :-1]
    tok = np.nonzero(first)[0]
    dst = ranks[first]
    # run length of each destination within its (sorted) row
    pos = np.nonzero(first.reshape(-1))[0]
    k_on = np.diff(np.append(pos, t * k))
    return tok, dst, k_on


def rank_tallies(topk: np.ndarray, experts_per_rank: int):
    """What ``build_plan`` needs of ``token_destinations``, without sorting rows: (the
    destination ranks, a mask of each (token, rank)'s first pick, the number of the token's
    experts on that rank at those picks), all [k, T] (pick-major: each pick's column is
    contiguous, ~8x faster than strided columns). Pick j is a first if no earlier pick of
    its token has its rank; its count is 1 + the later picks with that rank. The same
    (token, rank) entries and counts as ``token_destinations``, in another order."""
    ranks = (np.asarray(topk) // experts_per_rank).T.copy()
    k, t = ranks.shape
    first = np.ones((k, t), dtype=bool)
    k_on = np.ones((k, t), dtype=np.int64)
    for j in range(1, k):
        for i in range(j):                      # k(k-1)/2 compares of whole picks (k small)
            same = ranks[i] == ranks[j]
            first[j] &= ~same
            k_on[i] += same
    return ranks, first, k_on


def build_plan(topk_by_rank, p: DeepEPParams, keep_aiv: bool = True) -> DeepEPPlan:
    """Counts of everything dispatch and combine move, from each rank's [T, k] expert ids
    (any iterable, consumed once in rank order, so the routes need not all be in memory).
    ``keep_aiv``: keep the [r, a, d] per-AIV counts (only in-order Jetties read them)."""
    R, A = p.num_ranks, p.num_aiv
    epr = p.num_experts // R
    starts = aiv_ranges(p.tokens_per_rank, A)
    aiv_tokens = np.zeros((R, A, R), dtype=np.int32) if keep_aiv else None  # <= tokens each
    pair_tokens = np.zeros((R, R), dtype=np.int64)
    pair_sqes = np.zeros((R, R), dtype=np.int64)
    aiv_sqes_max = np.zeros(R, dtype=np.int64)
    reduce_tokens = np.zeros((R, R), dtype=np.int64)
    reduce_rows = np.zeros((R, R), dtype=np.int64)
    expert_tokens = np.zeros(p.num_experts, dtype=np.int64)
    aiv_of = np.repeat(np.arange(A), np.diff(np.append(starts, p.tokens_per_rank)))
    ranks_seen = 0
    for r, topk in enumerate(topk_by_rank):
        if r >= R:
            raise ValueError(f"build_plan: routing for more than {R} ranks")
        if np.shape(topk)[1] <= 16:             # few columns: compares, no sort
            # counts as weights rather than selected entries (exact: integers far below 2^53)
            ranks, first, k_on = rank_tallies(topk, epr)
            key = (ranks + aiv_of * R).reshape(-1)
            toks = np.bincount(key, weights=first.reshape(-1), minlength=A * R)
            multi = np.flatnonzero(first & (k_on >= 2))     # few: selected, not weighted
            dst = ranks.reshape(-1)[multi]
            reduce_tokens[:, r] = np.bincount(dst, minlength=R)
            reduce_rows[:, r] = np.bincount(dst, weights=k_on.reshape(-1)[multi], minlength=R)
        else:
            tok, dst, k_on = token_destinations(topk, epr)
            toks = np.bincount(aiv_of[tok] * R + dst, minlength=A * R)
            multi = k_on >= 2
            reduce_tokens[:, r] = np.bincount(dst[multi], minlength=R)
            reduce_rows[:, r] = np.bincount(dst[multi], weights=k_on[multi], minlength=R)
        toks = toks.reshape(A, R).astype(np.int32)
        if keep_aiv:
            aiv_tokens[r] = toks
        pair_tokens[r] = toks.sum(axis=0, dtype=np.int64)
        sqes = _sqes(toks, r, p.tokens_per_sqe)
        pair_sqes[r] = sqes.sum(axis=0)
        aiv_sqes_max[r] = sqes.sum(axis=1).max(initial=0)
        expert_tokens += np.bincount(np.asarray(topk).reshape(-1), minlength=p.num_experts)
        ranks_seen += 1
    if ranks_seen != R:
        raise ValueError(f"build_plan: routing for {ranks_seen} ranks, expected {R}")
    return DeepEPPlan(p, record_sizes(p), aiv_tokens, pair_tokens, pair_sqes, aiv_sqes_max,
                      reduce_tokens, reduce_rows, expert_tokens)


def receive_slots(topk_by_rank: list, p: DeepEPParams, dst: int) -> np.ndarray:
    """DeepEP receive-slot assignment at rank ``dst`` (facts 4.2 step 3): slot = prefix over
    source ranks, then over the source's AIVs, then the token's order in its AIV range.
    Returns [(source rank, source token, slot)] rows; used to check conservation."""
    R = p.num_ranks
    epr = p.num_experts // R
    out, base = [], 0
    for r, topk in enumerate(topk_by_rank):
        tok, d, _ = token_destinations(topk, epr)
        toks = tok[d == dst]
        out.append(np.stack([np.full(toks.shape, r), toks, base + np.arange(toks.size)], axis=1))
        base += toks.size
    return np.concatenate(out) if out else np.zeros((0, 3), dtype=np.int64)
