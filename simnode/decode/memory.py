"""HBM footprint of a decode deployment on one chip, and the largest batch that fits.

``footprint(model, dep)`` returns ``Footprint``: bytes per part on one chip:

- ``weights``: every weight (``model.all_weights``) in its deployment format
  (``deployment.quantization``); attention-side parts split over attention TP, routed
  experts over the EP x MoE-TP ranks, the rest (shared expert, gate, embedding, LM head:
  CR's embed_tp = lmhead_tp = 1) whole on every chip.
- ``kv_compressed``: the CSA / HCA compressed KV entries of the chip's sequences;
  ``indexer_cache``: the CSA layers' FP8 indexer keys and fp32 scales; ``kv_window``: the
  window caches (every layer and the MTP layer); ``compressor_state``: the compressors'
  fp32 state windows. Sizes follow CR-code's cache entries (modeling_deepseek.py
  Attention._init_cache_entries) and its block accounting (executor/core/kv_cache/
  cache_utils.py calculate_fixed_block_memory_bytes: a sliding-window cache holds
  (2 next_n + window + block - 1) // block + 1 blocks per sequence; a compressed cache
  pages of ``block_size`` entries = block_size x ratio tokens).
- ``comm_windows``: the MoE dispatch / combine windows (CR-code executor/utils/hccl_utils.py
  calc_moe_hccl_buffer_size, the 950's formula: double-buffered, at least 200 MB).
- ``activations``: an estimate, the largest tensors one forward holds at once (hc lanes,
  q and attention output, the experts' expanded rows, logits); ``reserve``: the
  deployment's ``runtime_reserve_GB``.

KV entry (``kv_entry_bytes``): ``ascend_fp8`` is the layout the 950 runs with KV C8, the
default: align_up(448 + 2 x 64 + 2 x 448 / 64, 128) = 640 B (CR-code Attention
._get_cache_dim_and_cmp_dtype); ``fmla_fp8`` is FlashMLA's V4 entry, 584 B (448 FP8 + 64
BF16 RoPE dims + 7 UE8M0 scales + 1 pad: facts v4-decode 1, tests/quant.py), which the
facts' ~3.9 KB (Flash) / ~5.5 KB (Pro) per context token assume (``kv_bytes_per_token``).

``check_fits(model, dep, chip)`` raises a ``ConfigError`` naming what does not fit and the
largest global batch that would (``largest_batch``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simnode import units
from simnode.config.chip import ChipSpec
from simnode.decode.deployment import Deployment, format_bytes, quantization
from simnode.decode.model import CSA, HCA, WINDOW, ModelSpec, all_weights
from simnode.errors import ConfigError

ATTENTION_PARTS = frozenset({"attn_proj", "indexer_q", "indexer_weights", "compressor"})
INDEXER_ENTRY_BYTES = 128 + 4     # FP8 key of 128 dims + fp32 scale (facts v4-decode 1)
STATE_BYTES = 4                   # compressor states are fp32 (CR-code _init_cache_entries)
#: CR-code hccl_utils constants: window slots aligned to 512 B; 32-B UB alignment; 44 B of
#: scale and expand index per dispatched token; at least 200 MB; 11 MB beside
WIN_ALIGN, UB_ALIGN, TOKEN_EXTRA_BYTES = 512, 32, 44
MIN_COMM_WINDOW_MiB, EXTRA_COMM_WINDOW_MiB = 200, 11


def _align(x: int, a: int) -> int:
    return -(-x // a) * a


def kv_entry_bytes(m: ModelSpec, fmt: str) -> int:
    """Bytes of one KV entry (a 512-wide K=V token) in a cache format (module docstring)."""
    nope = m.head_dim - m.rope_head_dim
    if fmt == "ascend_fp8":
        return _align(nope + 2 * m.rope_head_dim + 2 * nope // 64, 128)
    if fmt == "fmla_fp8":
        return nope + 2 * m.rope_head_dim + nope // 64 + 1
    if fmt == "bf16":
        return 2 * m.head_dim
    raise ConfigError("deployment", "kv_cache", fmt, "one of ascend_fp8, fmla_fp8, bf16")


def kv_bytes_per_token(m: ModelSpec, fmt: str = "fmla_fp8") -> float:
    """Compressed-cache bytes one context token adds over all layers (no windows, no
    states): each CSA layer an entry per csa_ratio tokens plus its indexer key, each HCA
    layer an entry per hca_ratio tokens (facts v4-decode 1 [derived])."""
    entry = kv_entry_bytes(m, fmt)
    counts = m.type_counts()
    return (counts[CSA] * (entry + INDEXER_ENTRY_BYTES) / m.csa_ratio
            + counts[HCA] * entry / m.hca_ratio)


@dataclass(frozen=True)
class Footprint:
    """HBM bytes on one chip, by part, against its capacity."""
    parts: tuple                  #: ((part, bytes), ...)
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return sum(b for _, b in self.parts)

    @property
    def capacity_frac(self) -> float:
        return self.total_bytes / self.capacity_bytes

    def part(self, name: str) -> float:
        return dict(self.parts)[name]

    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes


def weight_bytes(m: ModelSpec, d: Deployment) -> float:
    """Weight bytes on one chip (module docstring)."""
    q = quantization(d)
    total = 0.0
    for w in all_weights(m):
        share = 1.0
        if w.part == "routed_experts":
            share = 1.0 / (d.moe_ep * d.moe_tp)
        elif w.part in ATTENTION_PARTS:
            share = 1.0 / d.attn_tp
        total += w.count * format_bytes(q[w.part]) * share
    return total


def _window_blocks(d: Deployment, window: int) -> int:
    return (2 * d.next_n + window + d.block_size - 1) // d.block_size + 1


def cache_bytes_per_sequence(m: ModelSpec, d: Deployment) -> dict[str, float]:
    """Cache bytes one sequence holds at the deployment's context, by part."""
    entry = kv_entry_bytes(m, d.kv_cache)
    kv_len = d.context_len + d.query_tokens           # the step's tokens join the caches
    blk = d.block_size
    win = _window_blocks(d, m.window) * blk * entry
    out = {"kv_compressed": 0.0, "indexer_cache": 0.0, "kv_window": 0.0, "compressor_state": 0.0}
    for t in m.layer_types + (WINDOW,) * m.mtp_layers:
        out["kv_window"] += win
        if t == WINDOW:
            continue
        ratio = m.ratio(t)
        entries = -(-kv_len // (blk * ratio)) * blk       # pages of blk entries
        out["kv_compressed"] += entries * entry
        coff = 2 if t == CSA else 1
        # CSA keeps the last csa_ratio x 2 tokens' (kv, score) pairs of width coff x d
        # (CR-code sfa_kv_state: sliding window 8); HCA the last hca_ratio tokens'
        state_window = 2 * ratio if t == CSA else ratio
        state_rows = _window_blocks(d, state_window) * blk
        out["compressor_state"] += state_rows * 2 * coff * m.head_dim * STATE_BYTES
        if t == CSA:
            out["indexer_cache"] += entries * INDEXER_ENTRY_BYTES
            out["compressor_state"] += state_rows * 2 * 2 * m.index_head_dim * STATE_BYTES
    return out


def comm_window_bytes(m: ModelSpec, d: Deployment) -> float:
    """MoE dispatch + combine windows on one chip (CR-code calc_moe_hccl_buffer_size, 950)."""
    tokens = d.tokens_per_chip
    token_bytes = _align(_align(2 * m.hidden, UB_ALIGN) + TOKEN_EXTRA_BYTES, WIN_ALIGN)
    dispatch = d.local_experts(m) * tokens * d.moe_ep * token_bytes
    combine = m.top_k * tokens * _align(2 * m.hidden, WIN_ALIGN)
    mib = max(MIN_COMM_WINDOW_MiB, -(-(dispatch + combine) * 2 // units.BYTES_PER_MiB) + EXTRA_COMM_WINDOW_MiB)
    return mib * units.BYTES_PER_MiB


def activation_bytes(m: ModelSpec, d: Deployment) -> float:
    """An estimate of one forward's largest live tensors (module docstring)."""
    M, h = d.tokens_per_chip, m.hidden
    lanes = 3 * M * m.hc_mult * h * 2                 # x, residual and hc_post's output
    attn = 2 * M * m.num_heads * m.head_dim * 2       # q and the attention output
    rows = M * d.moe_ep * min(m.top_k, d.local_experts(m))   # packed dispatch output rows
    experts = rows * (h + 2 * 2 * m.moe_intermediate)
    logits = M * m.vocab * 4
    return lanes + attn + experts + logits


def footprint(m: ModelSpec, d: Deployment, chip: ChipSpec) -> Footprint:
    """Bytes per part on one chip of deployment ``d``, against ``chip``'s HBM."""
    caches = cache_bytes_per_sequence(m, d)
    parts = [("weights", weight_bytes(m, d))]
    parts += [(k, v * d.batch_per_chip) for k, v in caches.items()]
    parts += [("comm_windows", comm_window_bytes(m, d)), ("activations", activation_bytes(m, d)),
              ("reserve", units.GB_to_bytes(d.runtime_reserve_GB))]
    return Footprint(tuple(parts), units.GB_to_bytes(chip.memory.hbm_capacity_GB))


def _with_batch(d: Deployment, global_batch: int) -> Deployment:
    return replace(d, global_batch=global_batch)


def largest_batch(m: ModelSpec, d: Deployment, chip: ChipSpec) -> int:
    """The largest global batch (a multiple of attn_dp) whose footprint fits; 0 if none."""
    if not footprint(m, _with_batch(d, d.attn_dp), chip).fits():
        return 0
    lo, hi = 1, 2
    while footprint(m, _with_batch(d, hi * d.attn_dp), chip).fits():
        lo, hi = hi, hi * 2
    while hi - lo > 1:                                 # fits at lo, not at hi
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if footprint(m, _with_batch(d, mid * d.attn_dp), chip).fits() else (lo, mid)
    return lo * d.attn_dp


def check_fits(m: ModelSpec, d: Deployment, chip: ChipSpec, source: str = "deployment") -> Footprint:
    """The footprint, or a ``ConfigError`` naming the parts, the capacity and the largest batch."""
    fp = footprint(m, d, chip)
    if fp.fits():
        return fp
    gb = lambda b: f"{b / units.BYTES_PER_GB:.1f} GB"      # noqa: E731
    parts = ", ".join(f"{name.replace('_', ' ')} {gb(b)}" for name, b in
                      sorted(fp.parts, key=lambda p: -p[1]) if b)
    best = largest_batch(m, d, chip)
    if best:
        advice = (f"The largest global batch that fits at context {d.context_len} is {best} "
                  f"({best // d.attn_dp} per chip).")
    else:
        advice = (f"Not even one sequence per chip fits at context {d.context_len}: the weights "
                  f"alone take {gb(fp.part('weights'))}; use more chips or smaller formats.")
    raise ConfigError(source, "global_batch", d.global_batch,
                      f"a batch whose HBM footprint fits one {chip.name}'s {gb(fp.capacity_bytes)}: "
                      f"{d.batch_per_chip} sequences per chip of {m.name} at context "
                      f"{d.context_len} need {gb(fp.total_bytes)} ({parts})", advice)
