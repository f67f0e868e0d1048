"""The lightning indexer's parameters, declared once (``simnode.config.params``), and their checks.

``IndexerParams`` describes one call: ``batch`` sequences, each with ``q_per_seq`` query tokens
(decode: 1 + MTP next_n; prefill: the prompt) at the end of a ``context`` of tokens, over that
sequence's indexer cache of ``context // compress_ratio`` compressed entries (CSA layers, facts
v4-decode 1), ``heads`` x ``head_dim`` FP8 queries, top-``topk`` per query. ``kernel`` picks the
published kernel whose schedule is built (``simnode.kernels.indexer``'s docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.config.params import param
from simnode.errors import ScheduleError
from simnode.kernels import num_cores_param

KERNELS = ("cann", "deepgemm")
#: CANN's op on the 950: N1 only 16, 24, 32, 64 (ops-transformer attention/quant_lightning_indexer
#: README, "Ascend 950PR/Ascend 950DT N1仅支持16、24、32、64"); D = 128 (arch35 kernel HEAD_DIM)
CANN_HEADS = (16, 24, 32, 64)
CANN_HEAD_DIM = 128
#: CANN's sparse_count range [1, 2048] (README)
CANN_MAX_TOPK = 2048
#: DeepGEMM-Ascend paged_mqa_logits: heads a multiple of 4 in [4, 64], D 64 or 128, pages of
#: 64 or 128 tokens (mqa_logits.hpp static_asserts, paged_mqa_logits_impl)
DEEPGEMM_HEAD_DIMS = (64, 128)
DEEPGEMM_PAGES = (64, 128)
DEEPGEMM_Q_TILES = 8        # kNumQHTilesPerBlock: a Q block's tiles (one query token each at 64 heads)


@dataclass(frozen=True)
class IndexerParams:
    """The ``lightning_indexer`` workload's fields: each declared once here."""
    kernel: str = param("cann", "which published kernel: cann (ops-transformer quant_lightning_indexer, "
                        "the op CR's V4 code calls on the 950; top-k fused) or deepgemm (DeepGEMM-Ascend "
                        "paged_mqa_logits; BF16 logits to GM, top-k a separate kernel)", choices=KERNELS)
    batch: int = param(180, "sequences", unit="sequences", min=1)
    q_per_seq: int = param(2, "query tokens per sequence (decode: 1 + MTP next_n)", unit="queries", min=1)
    context: int = param(8192, "context tokens of each sequence (its last q_per_seq are the queries)",
                         unit="tokens", min=1)
    compress_ratio: int = param(4, "tokens per compressed indexer-cache entry (CSA: 4, facts v4-decode 1)",
                                unit="tokens", min=1)
    heads: int = param(64, "indexer query heads (facts v4-decode 1: 64)", unit="heads", min=1)
    head_dim: int = param(128, "indexer head dim (facts v4-decode 1: 128)", unit="elements", min=1)
    topk: int = param(512, "selected entries per query (Flash 512, Pro 1024; facts v4-decode 1)",
                      unit="entries", min=1)
    page_size: int = param(128, "entries per page of the paged indexer cache (CR: 128-entry blocks)",
                           unit="entries", min=1)
    split_kv: bool = param(True, "cann: a sequence's keys may be split across cores, each part's top-k "
                           "merged by a FlashDecode-style reduction (the metadata op's split, CR's call); "
                           "false: one core per (sequence, 4-query group)")
    num_cores: int = num_cores_param()


def keys_visible(p: IndexerParams, q: int) -> int:
    """Compressed entries query ``q`` (0-based among its sequence's queries) may see: a query at
    token position t sees the entries whose whole window of ``compress_ratio`` tokens ends at or
    before it, (t + 1) // ratio (the causal rule of CSA's compressed cache; CANN's sparse_mode 3,
    rightDownCausal, over cmp_ratio)."""
    t = p.context - p.q_per_seq + q
    return max(0, (t + 1) // p.compress_ratio)


def validate(p: IndexerParams, chip) -> None:
    """Raise ScheduleError for a shape the chosen kernel cannot run."""
    def bad(what):
        return ScheduleError(f"lightning indexer ({p.kernel}): {what}")
    if p.kernel not in KERNELS:
        raise bad(f"kernel '{p.kernel}': expected one of {', '.join(KERNELS)}.")
    if p.q_per_seq > p.context:
        raise bad(f"q_per_seq = {p.q_per_seq} exceeds context = {p.context}: the queries are the "
                  f"last tokens of the context.")
    if keys_visible(p, p.q_per_seq - 1) == 0:
        raise bad(f"context = {p.context} with compress_ratio = {p.compress_ratio} leaves no compressed "
                  f"entry to score; expected context >= compress_ratio.")
    if p.num_cores > chip.num_ai_cores:
        raise bad(f"num_cores = {p.num_cores}: the chip has {chip.num_ai_cores} AI cores.")
    if p.kernel == "cann":
        if p.heads not in CANN_HEADS:
            raise bad(f"heads = {p.heads}: the 950's op takes {', '.join(map(str, CANN_HEADS))}.")
        if p.head_dim != CANN_HEAD_DIM:
            raise bad(f"head_dim = {p.head_dim}: the 950's op is built for {CANN_HEAD_DIM}.")
        if not 1 <= p.topk <= CANN_MAX_TOPK:
            raise bad(f"topk = {p.topk}: expected 1..{CANN_MAX_TOPK} (sparse_count).")
        if p.page_size % 16 or not 16 <= p.page_size <= 1024:
            raise bad(f"page_size = {p.page_size}: expected a multiple of 16 up to 1024.")
    else:
        if p.heads % 4 or not 4 <= p.heads <= 64:
            raise bad(f"heads = {p.heads}: expected a multiple of 4 in 4..64.")
        if p.head_dim not in DEEPGEMM_HEAD_DIMS:
            raise bad(f"head_dim = {p.head_dim}: expected 64 or 128.")
        if p.page_size not in DEEPGEMM_PAGES:
            raise bad(f"page_size = {p.page_size}: expected 64 or 128.")
        block = DEEPGEMM_Q_TILES * (64 // p.heads)
        if p.q_per_seq > block:
            raise bad(f"q_per_seq = {p.q_per_seq}: the paged (decode) kernel takes at most {block} query "
                      f"tokens per sequence here (one Q block); its prefill sibling is not modeled.")
