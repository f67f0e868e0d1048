"""How a model runs a decode step: ``Deployment``, its quantization per part, its presets.

``Deployment`` holds the chips, attention data parallelism, MoE expert parallelism, where
the shared expert runs, the streams and their core split, the quantization scheme and KV
cache format, the batch, the context and MTP. ``load_deployment(data, model, source)``
builds one from a YAML-like mapping and checks it against the model (EP divides the
experts, the batch divides over the attention DP ranks). Its derived figures:
``batch_per_chip``, ``tokens_per_chip`` (M = batch per chip x (1 + next_n): the rows of
every attention-side kernel on a chip), ``local_experts``.

``quantization(dep)`` maps each weight part (``QUANT_PARTS``, named by
``simnode.decode.model.Weight.part``) to a storage format of ``FORMATS``; the scheme
``hybrid_mxfp8_mxfp4`` is CR's "Hybrid MXFP8-MXFP4" on the 950 (facts v4-decode 2):
q_a, q_b, kv, o_a, o_b and the indexer's q_b W8A8 (MXFP8); compressor linears and the
indexer's weights_proj unquantized (BF16); routed experts W4A8 (MXFP4 weights); shared
expert W8A8; LM head unquantized. The gate is BF16 on the 950 (CR-code DeepseekV3MoE
._init_gate: params_dtype bfloat16 on ASCEND_950); MTP's e_proj / h_proj take the model's
quant_config (W8A8); mHC parameters, compressor ``ape`` and sinks are FP32 (CR-code
DeepseekV3DecoderLayer sets the default dtype to float32 for them).
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.config.fields import Reader, did_you_mean
from simnode.config.params import build, param
from simnode.decode.model import ModelSpec
from simnode.errors import ConfigError

#: bytes per element of each storage format. MX formats carry one UE8M0 scale byte per 32
#: elements along K (facts ascend950 1.1: "UE8M0 pairs ... one pair per 64 K-elements");
#: fp8_block128 is the checkpoint's FP8 with one fp32 scale per 128 x 128 block (CR-code
#: configuration_deepseek.py DEFAULT_QUANTIZATION_CONFIG).
FORMATS = {
    "fp32": 4.0, "int32": 4.0, "bf16": 2.0,
    "mxfp8": 1.0 + 1.0 / 32, "mxfp4": 0.5 + 1.0 / 32, "fp8_block128": 1.0 + 4.0 / (128 * 128),
}
QUANT_PARTS = ("attn_proj", "indexer_q", "indexer_weights", "compressor", "gate", "routed_experts",
               "shared_expert", "mtp_proj", "embedding", "lm_head", "norms", "misc_fp32", "hash_table")
SCHEMES = {
    # CR "Hybrid MXFP8-MXFP4" on the 950 (facts v4-decode 2; module docstring)
    "hybrid_mxfp8_mxfp4": {
        "attn_proj": "mxfp8", "indexer_q": "mxfp8", "indexer_weights": "bf16", "compressor": "bf16",
        "gate": "bf16", "routed_experts": "mxfp4", "shared_expert": "mxfp8", "mtp_proj": "mxfp8",
        "embedding": "bf16", "lm_head": "bf16", "norms": "bf16", "misc_fp32": "fp32",
        "hash_table": "int32"},
    # the same with W8A8 experts (the what-if of FP8 experts)
    "w8a8_mxfp8": {
        "attn_proj": "mxfp8", "indexer_q": "mxfp8", "indexer_weights": "bf16", "compressor": "bf16",
        "gate": "bf16", "routed_experts": "mxfp8", "shared_expert": "mxfp8", "mtp_proj": "mxfp8",
        "embedding": "bf16", "lm_head": "bf16", "norms": "bf16", "misc_fp32": "fp32",
        "hash_table": "int32"},
}
#: KV cache entry formats of one 512-wide K=V token (``memory.kv_entry_bytes``)
KV_FORMATS = ("ascend_fp8", "fmla_fp8", "bf16")
SHARED_EXPERT_PLACEMENTS = ("stream", "inline")


@dataclass(frozen=True)
class Deployment:
    """Chips, parallelism, streams, quantization, batch, context and MTP of a decode step."""
    chips: int = param(doc="chips the model runs on", unit="chips", min=1)
    attn_dp: int = param(doc="attention data-parallel ranks (attention TP = chips / attn_dp)",
                         unit="ranks", min=1)
    moe_ep: int = param(doc="MoE expert-parallel ranks (MoE TP = chips / moe_ep)", unit="ranks", min=1)
    global_batch: int = param(doc="sequences decoded together over all chips", unit="sequences", min=1)
    context_len: int = param(doc="tokens in each sequence's KV cache at the step", unit="tokens", min=1)
    shared_expert: str = param(
        "stream", "stream: the shared expert on each chip on a second stream beside the routed "
                  "experts (CR: same card, second stream); inline: on the main stream",
        choices=SHARED_EXPERT_PLACEMENTS, origin="sourced", cite="facts v4-decode 2")
    shared_expert_aic: int = param(
        0, "AICs the shared-expert stream may use (0 = it shares every core with the main "
           "stream; CR limits cores on A3 only: enable_limit_core)", unit="cores", min=0)
    shared_expert_aiv: int = param(0, "AIVs the shared-expert stream may use (0 = shares all)",
                                   unit="AIVs", min=0)
    kv_stream: bool = param(True, "wkv, kv_norm and its RoPE on a second stream beside wq_a / wq_b "
                                  "(CR-code mla_prolog_decode mla_stream)", origin="sourced",
                            cite="facts v4-decode 2")
    indexer_stream: bool = param(True, "the indexer's q path on its own stream beside the "
                                       "compressors (CR-code Indexer indexer_stream)",
                                 origin="sourced", cite="facts v4-decode 2")
    metadata_stream: bool = param(True, "attention metadata built on its own stream, overlapped "
                                        "with the embedding (CR-code generate_kernel_metadata)",
                                  origin="sourced", cite="facts v4-decode 2")
    quant_scheme: str = param("hybrid_mxfp8_mxfp4", "weight formats per part (module docstring)",
                              choices=tuple(SCHEMES), origin="sourced", cite="facts v4-decode 2")
    kv_cache: str = param(
        "ascend_fp8", "KV entry format: ascend_fp8 (640 B: CR-code Attention._get_cache_dim_and_"
                      "cmp_dtype), fmla_fp8 (584 B: FlashMLA tests/quant.py), bf16 (1024 B)",
        choices=KV_FORMATS, origin="sourced", cite="facts v4-decode 1; CR-code modeling_deepseek.py")
    block_size: int = param(128, "KV page (block) size", unit="tokens", min=1, origin="sourced",
                            cite="CR-code config/ci_950/deepseek_v4_flash_rank_16_16ep.yaml")
    next_n: int = param(0, "MTP draft tokens per step (query tokens per sequence = 1 + next_n)",
                        unit="tokens", min=0)
    accepted_tokens: float = param(0.0, "drafts accepted per step on average (TPOT = step / "
                                        "(1 + accepted))", unit="tokens", min=0)
    runtime_reserve_GB: float = param(
        0.0, "HBM the runtime keeps beyond what memory.footprint counts (workspaces, the graph, "
             "HCCL); no source gives it: 0 = none", min=0, origin="reasoned")

    @property
    def attn_tp(self) -> int:
        return self.chips // self.attn_dp

    @property
    def moe_tp(self) -> int:
        return self.chips // self.moe_ep

    @property
    def batch_per_chip(self) -> int:
        """Sequences on one attention DP rank (each rank's chips hold the same sequences)."""
        return self.global_batch // self.attn_dp

    @property
    def query_tokens(self) -> int:
        """Query tokens per sequence per step: the token and its MTP drafts."""
        return 1 + self.next_n

    @property
    def tokens_per_chip(self) -> int:
        """M: query tokens a chip's attention-side kernels process per forward."""
        return self.batch_per_chip * self.query_tokens

    def local_experts(self, model: ModelSpec) -> int:
        return model.num_experts // self.moe_ep

    def expert_rows_per_chip(self, model: ModelSpec) -> int:
        """(token, expert) rows a chip's experts receive per MoE layer, routing balanced
        (CR's forced EPLB, facts v4-decode 2): every chip's M tokens x top_k spread evenly
        over the EP ranks (MoE TP ranks hold a slice of every local expert's rows' work)."""
        return self.tokens_per_chip * self.attn_dp * model.top_k // self.moe_ep


def load_deployment(data: dict, model: ModelSpec, source: str = "deployment") -> Deployment:
    """A ``Deployment`` from a YAML-like mapping, checked against ``model``."""
    d = build(Deployment, Reader(data, source))
    for key, n in (("attn_dp", d.attn_dp), ("moe_ep", d.moe_ep)):
        if d.chips % n:
            raise ConfigError(source, key, n, f"a divisor of chips ({d.chips})")
    if model.num_experts % d.moe_ep:
        raise ConfigError(source, "moe_ep", d.moe_ep,
                          f"a divisor of the model's {model.num_experts} routed experts")
    if d.global_batch % d.attn_dp:
        raise ConfigError(source, "global_batch", d.global_batch,
                          f"a multiple of attn_dp ({d.attn_dp}): each attention DP rank decodes "
                          f"the same number of sequences",
                          f"The nearest are {d.global_batch // d.attn_dp * d.attn_dp or d.attn_dp} "
                          f"and {(d.global_batch // d.attn_dp + 1) * d.attn_dp}.")
    if d.accepted_tokens > d.next_n:
        raise ConfigError(source, "accepted_tokens", d.accepted_tokens,
                          f"at most next_n ({d.next_n}) drafts accepted per step")
    if d.next_n and not model.mtp_layers:
        raise ConfigError(source, "next_n", d.next_n, "0: the model has no MTP layer")
    for key in ("shared_expert_aic", "shared_expert_aiv"):
        if getattr(d, key) and d.shared_expert != "stream":
            raise ConfigError(source, key, getattr(d, key), "0 unless shared_expert is 'stream'")
    return d


def quantization(d: Deployment) -> dict[str, str]:
    """Each weight part's storage format (``FORMATS``) under the deployment's scheme."""
    return dict(SCHEMES[d.quant_scheme])


def format_bytes(fmt: str) -> float:
    """Bytes per element of a storage format."""
    if fmt not in FORMATS:
        raise ConfigError("quantization", "format", fmt, "one of " + ", ".join(FORMATS),
                          did_you_mean(fmt, FORMATS))
    return FORMATS[fmt]


# The published V4-Flash deployment on 16 950DT chips (facts v4-decode 2; CR-code
# config/ci_950/deepseek_v4_flash_rank_16_16ep.yaml: world_size 16, attn_tp 1, moe_tp 1,
# next_n 3, input_truncated_len 8192, batch_size 16, block_size 128, multi-streams on), with
# the two published rows' batch and MTP settings.
FLASH_16_MTP3 = {
    "chips": 16, "attn_dp": 16, "moe_ep": 16, "global_batch": 16, "context_len": 8192,
    "next_n": 3, "accepted_tokens": 1.44,
}
FLASH_16_MTP1 = {**FLASH_16_MTP3, "global_batch": 2880, "next_n": 1, "accepted_tokens": 0.7}
