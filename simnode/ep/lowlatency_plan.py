"""Low-latency dispatch and combine: who writes what, where, in which order (pure, no SimPy).

The plan follows the published kernels MoeDistributeDispatchV2 / MoeDistributeCombineV2
(sgl-kernel-npu csrc/deepep/ops/op_kernel/moe_distribute_{dispatch,combine}_v2.h and their
tiling; the same family as ops-transformer mc2/moe_distribute_dispatch_v2; facts v4-decode 3):

- dispatch: a source rank's valid (token, k) pairs, in flat order t * K + k, are split over
  its AIVs in contiguous shares (``split``: equal, the remainder one each to the first AIVs).
  Each pair is one write of ``record_bytes`` (the quantized row, its scale slot, the
  (rank, token, k) triple) into the destination's window: region (source, local expert),
  slot = the pair's rank among the source's earlier pairs to the same expert, slots
  ``slot_bytes`` apart (512-B aligned). Then every source writes one 32-B status block
  (flag, count) per expert, zero counts included, into the owner's state window; status i =
  (local expert i // R, source i % R) is polled by the AIV whose share holds i, which then
  copies that status's rows into the packed, expert-contiguous output.
- combine: the expert owner splits its received rows (packed order) over its AIVs in
  contiguous shares, each AIV starting at its own rank's rotation, and writes each BF16 row
  back into the source's window slot token * K + k, with a 32-B status per row; the source
  splits its tokens over its AIVs and sums each token's k rows with their weights.

The window of one rank holds two halves, and so does its state window: successive calls
alternate (the kernel toggles its half bit per call), so no clearing barrier is needed. A
plan is one call (``call``: its index; ``half``: which half it uses; ``next_call()``: the
plan of the call after it). Each data half is the combine region (max tokens x K slots of
the BF16 row) then the dispatch region (R x local experts x max tokens slots);
``LLShape.window()`` gives the bytes; ``simnode.ep.lowlatency_limits`` refuses what the
published API refuses.

Outputs (``layout``): the packed 2-D rows the Ascend kernel returns, with per-expert counts,
or DeepEP CUDA's masked 3-D layout (every local expert a block of max tokens x R rows);
``LowLatencyPlan.output(layout)`` says what the grouped GEMM downstream gets from either.

The plan is an EP family plan (``simnode.ep.phase.TrafficPlan``): ``pair`` [src, dst] rows,
``wire_row_bytes`` (a record, a BF16 row) and ``counted_row_bytes`` (the byte convention of
the published test, sgl-kernel-npu tests/python/deepep/test_low_latency.py: hidden +
hidden / 128 x 4 + 16 B per 8-bit selection, 2 x hidden per BF16 row).

Main names: ``LLShape``, ``build_plan`` -> ``LowLatencyPlan``, ``WindowSizes``, ``LAYOUTS``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from simnode.ep.aiv import split
from simnode.ep.phase import TrafficPlan

#: window slots start on 512-B boundaries (kernel WIN_ADDR_ALIGN)
SLOT_ALIGN = 512
#: UB rows and the scale slot are 32-B aligned (kernel UB_ALIGN)
UB_ALIGN = 32
#: one status block: 8 int32, flag then count (kernel STATE_OFFSET)
STATUS_BYTES = 32
#: the (source rank, token, k) triple after a dispatch record's row and scale (EXPAND_IDX_INFO)
TRIPLE_BYTES = 12
#: elements per MX scale (MX_BLOCK_SIZE)
MX_BLOCK = 32
#: the state window of one rank (kernel STATE_SIZE: two halves of 500 KiB and check words)
STATE_WINDOW_BYTES = 1024 * 1024
STATE_HALF_BYTES = 500 * 1024
#: dispatch record formats: bytes per element of the row
DISPATCH_DTYPES = ("int8", "mxfp8", "mxfp4", "bf16")
#: output layouts: Ascend's packed 2-D rows, DeepEP CUDA's masked 3-D blocks
LAYOUTS = ("packed", "masked")


def _align(n: int, a: int) -> int:
    return -(-int(n) // a) * a


def record_bytes(hidden: int, dtype: str) -> int:
    """Bytes one dispatch write moves: the row, its scale slot and the triple (kernel
    hScaleIdxSize). INT8: ceil32(h) + one 32-B scale slot (a 4-B FP32 scale); MXFP8 / MXFP4:
    ceil256 of the row + one E8M0 scale per 32 elements (an even count), ceil32; BF16: the
    row + the 32-B slot the A3 kernel keeps (moe_distribute_dispatch_v2.h hScaleSizeAlign)."""
    if dtype == "int8":
        body = _align(hidden, UB_ALIGN) + UB_ALIGN
    elif dtype in ("mxfp8", "mxfp4"):
        row = _align(hidden if dtype == "mxfp8" else -(-hidden // 2), 256)
        scales = _align(-(-hidden // MX_BLOCK), 2)
        body = _align(row + scales, UB_ALIGN)
    elif dtype == "bf16":
        body = _align(2 * hidden, UB_ALIGN) + UB_ALIGN
    else:
        raise ValueError(f"dispatch dtype {dtype!r} is not one of {DISPATCH_DTYPES}")
    return body + TRIPLE_BYTES


def slot_bytes(hidden: int, dtype: str) -> int:
    """Distance between two dispatch slots of a region (512-B aligned record)."""
    return _align(record_bytes(hidden, dtype), SLOT_ALIGN)


def combine_row_bytes(hidden: int) -> int:
    """Bytes one combine write moves: a BF16 row."""
    return 2 * hidden


def combine_slot_bytes(hidden: int) -> int:
    """Distance between two combine slots (512-B aligned BF16 row)."""
    return _align(combine_row_bytes(hidden), SLOT_ALIGN)


def _starts(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


@dataclass(frozen=True)
class WindowSizes:
    """One rank's communication window, bytes."""
    dispatch_half: int       #: R x local experts x max tokens dispatch slots
    combine_half: int        #: max tokens x K combine slots
    state: int               #: status blocks (both halves) and check words

    @property
    def half(self) -> int:
        return self.dispatch_half + self.combine_half

    @property
    def data(self) -> int:
        """Both halves of the data window."""
        return 2 * self.half

    @property
    def total(self) -> int:
        return self.data + self.state


@dataclass(frozen=True)
class LLShape:
    """What one low-latency call moves (a workload's fields)."""
    num_ranks: int
    tokens_per_rank: int            #: tokens each rank dispatches
    max_tokens_per_rank: int        #: the window's capacity per source (num_max_dispatch_tokens_per_rank)
    hidden: int
    top_k: int
    num_experts: int
    num_aiv: int                    #: AIVs of one die that run the kernel
    dispatch_dtype: str = "int8"

    @property
    def experts_per_rank(self) -> int:
        return self.num_experts // self.num_ranks

    @property
    def record_bytes(self) -> int:
        return record_bytes(self.hidden, self.dispatch_dtype)

    @property
    def slot_bytes(self) -> int:
        return slot_bytes(self.hidden, self.dispatch_dtype)

    @property
    def combine_row_bytes(self) -> int:
        return combine_row_bytes(self.hidden)

    def window(self) -> WindowSizes:
        """The window one rank reserves (tiling CheckWinSize, no shared experts)."""
        m = self.max_tokens_per_rank
        return WindowSizes(m * self.slot_bytes * self.num_experts,
                           m * combine_slot_bytes(self.hidden) * self.top_k, STATE_WINDOW_BYTES)

    @property
    def packed_capacity_rows(self) -> int:
        """Rows of the packed output a rank allocates: max tokens x R x min(K, local experts)
        (deep_ep.cpp low_latency_dispatch num_max_tokens)."""
        return self.max_tokens_per_rank * self.num_ranks * min(self.top_k, self.experts_per_rank)

    @property
    def masked_rows_per_expert(self) -> int:
        """DeepEP CUDA's masked layout: [local experts, max tokens x R, hidden]."""
        return self.max_tokens_per_rank * self.num_ranks


@dataclass(frozen=True)
class Output:
    """Dispatch's output tensor in one layout (every rank allocates the same)."""
    layout: str                     #: "packed" or "masked"
    shape: tuple                    #: the tensor's shape: (rows, hidden) or (experts, rows, hidden)
    allocated_rows: int             #: rows the tensor holds per rank
    valid_rows: np.ndarray          #: [R] rows holding received tokens
    max_rows_per_expert: int        #: the most rows one local expert received (any rank)
    gemm_input: str                 #: what the grouped GEMM downstream is given


@dataclass(frozen=True)
class Writes:
    """One write per row, flat over all senders (``int64`` arrays of one length)."""
    src: np.ndarray        #: the rank that writes
    aiv: np.ndarray        #: its AIV
    order: np.ndarray      #: position in that AIV's sequence (0, 1, ...)
    dst: np.ndarray        #: the rank whose window it lands in
    token: np.ndarray      #: token index at the token's own rank
    k: np.ndarray          #: top-k position
    expert: np.ndarray     #: global expert id
    slot: np.ndarray       #: slot within the destination region
    offset: np.ndarray     #: byte offset in the destination's window half

    def __len__(self) -> int:
        return int(self.src.shape[0])

    @property
    def remote(self) -> np.ndarray:
        return self.src != self.dst

    def per_aiv(self, num_ranks: int, num_aiv: int, remote_only: bool = False) -> np.ndarray:
        """``int64 [ranks, aivs]`` writes each sender AIV issues."""
        keep = self.remote if remote_only else np.ones(len(self), dtype=bool)
        out = np.zeros((num_ranks, num_aiv), dtype=np.int64)
        np.add.at(out, (self.src[keep], self.aiv[keep]), 1)
        return out


@dataclass(frozen=True)
class LowLatencyPlan(TrafficPlan):
    """Dispatch and combine of one call on every rank; see the module docstring."""
    shape: LLShape
    topk: np.ndarray = field(repr=False)       #: int [R, tokens, K] expert ids (-1: none)
    dispatch: Writes = field(repr=False)       #: one per valid (token, k) pair
    counts: np.ndarray = field(repr=False)     #: int [src, expert] pairs src sends to expert
    call: int = 0                              #: which call of a sequence this is (0, 1, ...)

    # -- the EP family's plan ---------------------------------------------------------------
    @property
    def num_aiv(self) -> int:
        return self.shape.num_aiv

    @cached_property
    def pair(self) -> np.ndarray:
        """``int64 [src, dst]`` rows src writes into dst's window (its own on the diagonal)."""
        return self.pair_rows()

    def wire_row_bytes(self, kind: str) -> float:
        """Payload bytes of one write: a dispatch record, or a combine BF16 row."""
        return float(self.shape.record_bytes if kind == "dispatch" else self.shape.combine_row_bytes)

    def counted_row_bytes(self, kind: str) -> int:
        """The published test's bytes per selection: an 8-bit row with its per-128 scales and
        16 B of metadata, or a BF16 row (test_low_latency.py num_fp8_bytes / num_bf16_bytes)."""
        h = self.shape.hidden
        if kind == "dispatch" and self.shape.dispatch_dtype != "bf16":
            return h + h // 128 * 4 + 16
        return 2 * h

    # -- the double-buffered window ------------------------------------------------------------
    @property
    def half(self) -> int:
        """The window half (data and state) this call uses: successive calls alternate."""
        return self.call % 2

    def next_call(self) -> "LowLatencyPlan":
        """The same routing's plan for the call after this one (the other half)."""
        return dataclasses.replace(self, call=self.call + 1)

    def window_offsets(self, writes: Writes) -> np.ndarray:
        """Byte offsets of ``writes`` in the destination's whole data window (this call's half)."""
        return self.half * self.shape.window().half + writes.offset

    def state_base(self) -> int:
        """Byte offset of this call's half of the state window."""
        return self.half * STATE_HALF_BYTES

    # -- dispatch -------------------------------------------------------------------------
    def status_counts(self, dst: int) -> np.ndarray:
        """Rows behind rank ``dst``'s statuses in polling order: status i = (local expert
        i // R, source i % R); ``int64 [local experts x R]``."""
        E, R = self.shape.experts_per_rank, self.shape.num_ranks
        return self.counts[:, dst * E:(dst + 1) * E].T.reshape(-1)

    def status_writers(self) -> np.ndarray:
        """AIV of a source that writes each expert's status (SetStatus: E over the AIVs)."""
        return np.repeat(np.arange(self.shape.num_aiv), split(self.shape.num_experts, self.shape.num_aiv))

    def status_dst_offset(self) -> tuple:
        """(owner rank, byte offset in its state window half) of the status that source s
        writes for expert e: ``(int [E], int [R, E])``; offset = 32 s + 32 R x local expert."""
        R, E_l = self.shape.num_ranks, self.shape.experts_per_rank
        e = np.arange(self.shape.num_experts)
        offset = STATUS_BYTES * (np.arange(R)[:, None] + R * (e % E_l)[None, :])
        return e // E_l, offset

    def poll_ranges(self) -> np.ndarray:
        """[start, end) status indices each AIV of a receiver polls and copies: ``int [A, 2]``
        (the same split on every rank)."""
        n = split(self.shape.num_experts, self.shape.num_aiv)
        s = _starts(n)
        return np.stack([s, s + n], axis=1)

    def copy_rows(self) -> np.ndarray:
        """Rows each receiver AIV copies window -> output: ``int64 [R, A]``."""
        out = np.zeros((self.shape.num_ranks, self.shape.num_aiv), dtype=np.int64)
        for d in range(self.shape.num_ranks):
            c = np.concatenate([[0], np.cumsum(self.status_counts(d))])
            lo, hi = self.poll_ranges().T
            out[d] = c[hi] - c[lo]
        return out

    def recv_rows(self) -> np.ndarray:
        """Rows each rank receives, its own included: ``int64 [R]``."""
        E = self.shape.experts_per_rank
        return self.counts.reshape(self.shape.num_ranks, self.shape.num_ranks, E).sum(axis=(0, 2))

    def pair_rows(self) -> np.ndarray:
        """``int64 [src, dst]`` rows src writes into dst's window."""
        E = self.shape.experts_per_rank
        return self.counts.reshape(self.shape.num_ranks, self.shape.num_ranks, E).sum(axis=2)

    # -- output layouts ---------------------------------------------------------------------
    def expert_token_nums(self) -> np.ndarray:
        """Packed layout: rows per local expert, ``int64 [R, local experts]``."""
        E, R = self.shape.experts_per_rank, self.shape.num_ranks
        return self.counts.sum(axis=0).reshape(R, E)

    def ep_recv_counts(self) -> np.ndarray:
        """Packed layout: per (local expert, source) counts, ``int64 [R, local experts, R]``
        (the kernel's epRecvCount is their running sum in this order)."""
        E, R = self.shape.experts_per_rank, self.shape.num_ranks
        return self.counts.reshape(R, R, E).transpose(1, 2, 0)

    def _packed(self, dst: int) -> np.ndarray:
        """Indices into ``dispatch`` of the rows ``dst`` receives, in packed row order."""
        w = self.dispatch
        sel = np.flatnonzero(w.dst == dst)
        le = w.expert[sel] % self.shape.experts_per_rank
        return sel[np.lexsort((w.slot[sel], w.src[sel], le))]

    def packed_rows(self, dst: int) -> np.ndarray:
        """Rank ``dst``'s packed output, one (source, token, k) triple per row in row order:
        local expert major, then source, then slot; ``int64 [rows, 3]``."""
        w, sel = self.dispatch, self._packed(dst)
        return np.stack([w.src[sel], w.token[sel], w.k[sel]], axis=1)

    def masked_positions(self, dst: int) -> np.ndarray:
        """DeepEP CUDA's masked 3-D layout at ``dst``: (local expert, row) of each packed row,
        an expert's rows from 0 in packed order; ``int64 [rows, 2]``."""
        sel = self._packed(dst)
        le = self.dispatch.expert[sel] % self.shape.experts_per_rank
        pos = np.arange(len(sel)) - _starts(self.expert_token_nums()[dst])[le]
        return np.stack([le, pos], axis=1)

    def output(self, layout: str) -> "Output":
        """What dispatch hands the grouped GEMM in ``layout`` ("packed" or "masked")."""
        s = self.shape
        nums = self.expert_token_nums()
        recv = nums.sum(axis=1)
        if layout == "packed":
            rows = s.packed_capacity_rows
            return Output(layout, (rows, s.hidden), rows, recv, int(nums.max(initial=0)),
                          "grouped GEMM over the packed rows, group_list = rows per local expert "
                          "(expertTokenNums); only the received rows are computed")
        if layout == "masked":
            m = s.masked_rows_per_expert
            return Output(layout, (s.experts_per_rank, m, s.hidden), s.experts_per_rank * m, recv,
                          int(nums.max(initial=0)),
                          f"masked grouped GEMM over [local experts, {m}, hidden] with masked_m = "
                          f"rows per local expert; each expert's block holds max tokens x ranks rows")
        raise ValueError(f"layout {layout!r}: expected one of {LAYOUTS}")

    # -- combine ----------------------------------------------------------------------------
    def combine_writes(self) -> Writes:
        """Every expert owner's write-backs: its received rows (packed order) in contiguous
        AIV shares, each AIV starting at position (loop + rank) mod its count (the kernel's
        staggered start); row (s, t, k) lands in s's window at slot t x K + k."""
        K, A, R = self.shape.top_k, self.shape.num_aiv, self.shape.num_ranks
        w = self.dispatch
        # every owner's received rows in packed order at once: owner, local expert, source, slot
        sel = np.lexsort((w.slot, w.src, w.expert % self.shape.experts_per_rank, w.dst))
        owner = w.dst[sel]
        per_owner = np.bincount(owner, minlength=R)
        first = _starts(per_owner)
        i = np.arange(len(sel)) - first[owner]                  # row index at its owner
        n = np.stack([split(int(m), A) for m in per_owner])     # [R, A] rows per AIV
        ends = np.cumsum(n, axis=1)
        start = ends - n
        # the AIV holding each row: the owner's AIV ends at or before it, counted over every
        # owner's ends laid end to end (all earlier owners' R x A ends are at or before it)
        aiv = np.searchsorted((first[:, None] + ends).ravel(), first[owner] + i, side="right") \
            - owner * A
        mine = n[owner, aiv]
        loop = i - start[owner, aiv]
        # the row an AIV handles at its loop-th step: start + (loop + owner) mod count
        pick = sel[first[owner] + start[owner, aiv] + (loop + owner) % np.maximum(mine, 1)]
        token, k = w.token[pick], w.k[pick]
        slot = token * K + k
        return Writes(owner, aiv, loop, w.src[pick], token, k, w.expert[pick], slot,
                      slot * combine_slot_bytes(self.shape.hidden))

    def combine_status_offset(self, token, k) -> np.ndarray:
        """Byte offset, in the source's combine state area, of the status of row (token, k)."""
        return STATUS_BYTES * (np.asarray(token) * self.shape.top_k + np.asarray(k))

    def reduce_tokens(self) -> np.ndarray:
        """Tokens each AIV of a source sums: ``int64 [A]`` (the same split on every rank)."""
        return split(self.shape.tokens_per_rank, self.shape.num_aiv)

    def reduce_rows(self) -> np.ndarray:
        """Rows each AIV of each source reads and sums: ``int64 [R, A]``."""
        valid = (self.topk >= 0).sum(axis=2)                      # [R, tokens]
        n = self.reduce_tokens()
        edges = np.concatenate([[0], np.cumsum(n)])
        c = np.concatenate([np.zeros((valid.shape[0], 1), np.int64), np.cumsum(valid, axis=1)], axis=1)
        return c[:, edges[1:]] - c[:, edges[:-1]]


def build_plan(topk_by_rank, shape: LLShape) -> LowLatencyPlan:
    """The plan from each rank's ``[tokens, top_k]`` expert ids (rank order; -1 = none).
    Check the limits first (``simnode.ep.lowlatency_limits``): this only checks that the
    ids fit the shape."""
    R, T, K, E = shape.num_ranks, shape.tokens_per_rank, shape.top_k, shape.num_experts
    topk = np.stack([np.asarray(t, dtype=np.int64).reshape(T, K) for t in topk_by_rank]) \
        if R else np.zeros((0, T, K), np.int64)
    if topk.shape != (R, T, K):
        raise ValueError(f"routing has shape {topk.shape}, expected {(R, T, K)}")
    if ((topk < -1) | (topk >= E)).any():
        raise ValueError(f"expert ids must be in -1..{E - 1}")
    E_l, A = shape.experts_per_rank, shape.num_aiv
    win = shape.window()
    # every source's valid pairs, in flat order t * K + k, source after source
    flat = topk.reshape(R, T * K)
    src, idx = np.nonzero(flat >= 0)
    ex = flat[src, idx]
    n = np.bincount(src, minlength=R)
    pos = np.arange(len(idx)) - _starts(n)[src]            # the pair's place at its source
    # AIV shares (``split``): q each, one more to the first n mod A AIVs
    q, rem = n[src] // A, n[src] % A
    big = rem * (q + 1)                                    # pairs on the AIVs of q + 1
    aiv = np.where(pos < big, pos // np.maximum(q + 1, 1), rem + (pos - big) // np.maximum(q, 1))
    order = pos - (aiv * q + np.minimum(aiv, rem))
    # slot: rank among this source's earlier pairs to the same expert
    group = src * E + ex
    by_group = np.argsort(group, kind="stable")
    per_group = np.bincount(group, minlength=R * E)
    slot = np.empty(len(idx), dtype=np.int64)
    slot[by_group] = np.arange(len(idx)) - _starts(per_group)[group[by_group]]
    counts = per_group.reshape(R, E)
    c = {"src": src, "aiv": aiv, "order": order, "token": idx // K, "k": idx % K, "expert": ex,
         "slot": slot}
    c = {name: v.astype(np.int64) for name, v in c.items()}
    dst = c["expert"] // E_l
    region = c["src"] * E_l + c["expert"] % E_l
    offset = win.combine_half + region * (shape.max_tokens_per_rank * shape.slot_bytes) \
        + c["slot"] * shape.slot_bytes
    writes = Writes(c["src"], c["aiv"], c["order"], dst, c["token"], c["k"], c["expert"],
                    c["slot"], offset)
    return LowLatencyPlan(shape, topk, writes, counts)
