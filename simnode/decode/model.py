"""A DeepSeek-V4 model as data: ``ModelSpec``, its presets and its weights.

``ModelSpec`` holds what a decode step needs of the model: layer count and each layer's
attention type (from ``compress_ratios``: 0 = window-only, ``csa_ratio`` = CSA with the
lightning indexer, ``hca_ratio`` = HCA), dimensions, the indexer, experts and routing,
mHC, MTP and vocabulary. ``load_model(data, source)`` builds one from a YAML-like mapping
with the errors of every simnode spec (file, key path, value, expectation);
``preset("v4-flash")`` / ``preset("v4-pro")`` give the published configurations
(``PRESETS``, facts v4-decode 1, CFG).

``weights(model, layer_type, ...)`` lists a layer's weight tensors as ``Weight(part, name,
count)``; ``part`` names the quantization part a deployment gives a format
(``deployment.QUANT_PARTS``). Counts follow the CR-code modules (modeling_deepseek.py
Attention / DeepseekV3MoE / DeepseekV3DecoderLayer, compressor.py, indexer.py at
hicann/cann-recipes-infer @fbc225d2). ``total_params`` and ``activated_params`` sum them.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.config.fields import Reader, did_you_mean
from simnode.config.params import build, param
from simnode.errors import ConfigError

WINDOW, CSA, HCA = "window", "csa", "hca"
LAYER_TYPES = (WINDOW, CSA, HCA)

_V4 = "facts v4-decode 1 (CFG)"


@dataclass(frozen=True)
class ModelSpec:
    """The dimensions of a DeepSeek-V4 model that set a decode step's kernels and memory."""
    name: str = param(doc="the model's name", origin="sourced")
    num_layers: int = param(doc="decoder layers (all MoE, no dense layers)", unit="layers", min=1,
                            origin="sourced", cite=_V4)
    hidden: int = param(doc="hidden size", unit="elements", min=1, origin="sourced", cite=_V4)
    num_heads: int = param(doc="query heads (MQA: one shared K=V head)", unit="heads", min=1,
                           origin="sourced", cite=_V4)
    head_dim: int = param(doc="the shared K=V head's width (no-RoPE + RoPE dims)", unit="elements",
                          min=1, origin="sourced", cite=_V4)
    rope_head_dim: int = param(doc="RoPE dims at the end of a head (partial RoPE)", unit="elements",
                               min=0, origin="sourced", cite=_V4)
    q_lora_rank: int = param(doc="query low-rank width (wq_a output, wq_b input)", unit="elements",
                             min=1, origin="sourced", cite=_V4)
    o_groups: int = param(doc="groups of the grouped output projection wo_a", unit="groups", min=1,
                          origin="sourced", cite=_V4)
    o_lora_rank: int = param(doc="wo_a output width per group", unit="elements", min=1,
                             origin="sourced", cite=_V4)
    window: int = param(doc="sliding window of every layer", unit="tokens", min=1, origin="sourced",
                        cite=_V4)
    compress_ratios: tuple = param(
        doc="each layer's KV compression: 0 = window-only, csa_ratio = CSA (compressed KV + "
            "indexer), hca_ratio = HCA (heavily compressed, no indexer)", unit="1", min=0,
        origin="sourced", cite="CFG compress_ratios (module docstring of simnode.decode.model)")
    csa_ratio: int = param(doc="compression of a CSA layer", unit="tokens/entry", min=2,
                           origin="sourced", cite=_V4)
    hca_ratio: int = param(doc="compression of an HCA layer", unit="tokens/entry", min=2,
                           origin="sourced", cite=_V4)
    index_heads: int = param(doc="lightning indexer heads (CSA layers)", unit="heads", min=1,
                             origin="sourced", cite=_V4)
    index_head_dim: int = param(doc="lightning indexer head width", unit="elements", min=1,
                                origin="sourced", cite=_V4)
    index_topk: int = param(doc="compressed entries the indexer selects per query", unit="entries",
                            min=1, origin="sourced", cite=_V4)
    num_experts: int = param(doc="routed experts", unit="experts", min=1, origin="sourced", cite=_V4)
    top_k: int = param(doc="routed experts per token", unit="experts", min=1, origin="sourced",
                       cite=_V4)
    moe_intermediate: int = param(doc="expert (and shared expert) intermediate size",
                                  unit="elements", min=1, origin="sourced", cite=_V4)
    shared_experts: int = param(doc="shared experts per layer", unit="experts", min=0,
                                origin="sourced", cite=_V4)
    hash_layers: int = param(doc="first layers routed by a token-id -> experts table", unit="layers",
                             min=0, origin="sourced", cite=_V4)
    hc_mult: int = param(doc="mHC lanes (hyper-connection width)", unit="lanes", min=1,
                         origin="sourced", cite=_V4)
    hc_sinkhorn_iters: int = param(doc="Sinkhorn iterations of each mHC pre", unit="iterations",
                                   min=1, origin="sourced", cite=_V4)
    mtp_layers: int = param(doc="MTP layers (window attention only; the drafts share its weights "
                               "and KV)", unit="layers", min=0, origin="sourced", cite=_V4)
    vocab: int = param(doc="vocabulary", unit="tokens", min=1, origin="sourced", cite=_V4)
    swiglu_clamp: float = param(doc="the experts' SwiGLU clamp limit (0 = none)", min=0,
                                origin="sourced", cite="facts v4-decode 2: SwiGLU (clamp 10)")

    def layer_type(self, layer: int) -> str:
        """``window``, ``csa`` or ``hca`` for decoder layer ``layer`` (0-based)."""
        ratio = self.compress_ratios[layer]
        return WINDOW if ratio == 0 else CSA if ratio == self.csa_ratio else HCA

    @property
    def layer_types(self) -> tuple[str, ...]:
        return tuple(self.layer_type(i) for i in range(self.num_layers))

    def type_counts(self) -> dict[str, int]:
        """Decoder layers of each type (MTP layers not included)."""
        types = self.layer_types
        return {t: types.count(t) for t in LAYER_TYPES}

    def is_hash_routed(self, layer: int) -> bool:
        return layer < self.hash_layers

    def layer_groups(self) -> dict[tuple[str, bool], int]:
        """(layer type, hash-routed) -> how many decoder layers, in the order they first occur."""
        out: dict[tuple[str, bool], int] = {}
        for i in range(self.num_layers):
            key = (self.layer_type(i), self.is_hash_routed(i))
            out[key] = out.get(key, 0) + 1
        return out

    def ratio(self, layer_type: str) -> int:
        """Tokens per compressed entry of a layer type (0 for window-only)."""
        return {WINDOW: 0, CSA: self.csa_ratio, HCA: self.hca_ratio}[layer_type]


def load_model(data: dict, source: str = "model") -> ModelSpec:
    """A ``ModelSpec`` from a YAML-like mapping; every key checked and cross-checked."""
    r = Reader(data, source)
    m = build(ModelSpec, r)
    if len(m.compress_ratios) != m.num_layers:
        raise ConfigError(source, "compress_ratios", list(m.compress_ratios),
                          f"one ratio per layer (num_layers = {m.num_layers}, "
                          f"{len(m.compress_ratios)} given)")
    allowed = (0, m.csa_ratio, m.hca_ratio)
    bad = [v for v in m.compress_ratios if v not in allowed]
    if bad:
        raise ConfigError(source, "compress_ratios", bad[0],
                          f"0 (window-only), {m.csa_ratio} (csa_ratio) or {m.hca_ratio} (hca_ratio)")
    if m.csa_ratio == m.hca_ratio:
        raise ConfigError(source, "hca_ratio", m.hca_ratio, f"a ratio other than csa_ratio ({m.csa_ratio})")
    if m.rope_head_dim >= m.head_dim:
        raise ConfigError(source, "rope_head_dim", m.rope_head_dim, f"fewer than head_dim ({m.head_dim})")
    if (m.num_heads * m.head_dim) % m.o_groups:
        raise ConfigError(source, "o_groups", m.o_groups,
                          f"a divisor of num_heads x head_dim ({m.num_heads * m.head_dim})")
    if m.top_k > m.num_experts:
        raise ConfigError(source, "top_k", m.top_k, f"at most num_experts ({m.num_experts})")
    if m.hash_layers > m.num_layers:
        raise ConfigError(source, "hash_layers", m.hash_layers, f"at most num_layers ({m.num_layers})")
    return m


# The published configurations (facts v4-decode 1: CFG, the HF config.json of each model).
# Layer order: facts 1 gives only the counts (2 / 21 / 20 and 31 / 30); the order is the
# published compress_ratios, read from copies of the HF configs: V4-Flash [0, 0, 4, 128, 4,
# ..., 128, 4] (two window-only layers, then CSA and HCA alternating from layer 2, CSA last;
# alibaba/rtp-llm's V4 test inlines the Flash-Base config.json, and Megatron-LM's DSv4-Flash
# recipe writes it [0,0,4]+[128,4]*20 with the MTP slot); V4-Pro [128, 128, 4, 128, ..., 4]
# (two HCA layers, then CSA and HCA alternating, CSA last). Each config lists one more entry,
# 0, for the MTP layer, which is window-only here (mtp_layers).
V4_FLASH = {
    "name": "DeepSeek-V4-Flash", "num_layers": 43, "hidden": 4096, "num_heads": 64,
    "head_dim": 512, "rope_head_dim": 64, "q_lora_rank": 1024, "o_groups": 8,
    "o_lora_rank": 1024, "window": 128,
    "compress_ratios": [0, 0] + [4, 128] * 20 + [4],
    "csa_ratio": 4, "hca_ratio": 128, "index_heads": 64, "index_head_dim": 128,
    "index_topk": 512, "num_experts": 256, "top_k": 6, "moe_intermediate": 2048,
    "shared_experts": 1, "hash_layers": 3, "hc_mult": 4, "hc_sinkhorn_iters": 20,
    "mtp_layers": 1, "vocab": 129280, "swiglu_clamp": 10.0,
}
V4_PRO = {
    **V4_FLASH, "name": "DeepSeek-V4-Pro", "num_layers": 61, "hidden": 7168, "num_heads": 128,
    "q_lora_rank": 1536, "o_groups": 16, "compress_ratios": [128, 128] + [4, 128] * 29 + [4],
    "index_topk": 1024, "num_experts": 384, "moe_intermediate": 3072,
}
PRESETS = {"v4-flash": V4_FLASH, "v4-pro": V4_PRO}


def preset(name: str) -> ModelSpec:
    """The published model ``name`` (``v4-flash`` or ``v4-pro``)."""
    if name not in PRESETS:
        raise ConfigError("model", "preset", name, "one of " + ", ".join(PRESETS), did_you_mean(name, PRESETS))
    return load_model(dict(PRESETS[name]), f"model preset {name}")


# -- weights ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Weight:
    """One weight tensor: its quantization part (``deployment.QUANT_PARTS``), name, elements."""
    part: str
    name: str
    count: int


def attention_weights(m: ModelSpec, layer_type: str) -> list[Weight]:
    """The attention block of one layer (CR-code Attention, Compressor, Indexer)."""
    h, d = m.hidden, m.head_dim
    out = [Weight("attn_proj", "wq_a", m.q_lora_rank * h),
           Weight("attn_proj", "wq_b", m.num_heads * d * m.q_lora_rank),
           Weight("attn_proj", "wkv", d * h),
           Weight("attn_proj", "wo_a", m.o_groups * m.o_lora_rank * (m.num_heads * d // m.o_groups)),
           Weight("attn_proj", "wo_b", h * m.o_groups * m.o_lora_rank),
           Weight("norms", "norms", m.q_lora_rank + 2 * d),          # q_norm, q_b_norm, kv_norm
           Weight("misc_fp32", "attn_sink", m.num_heads)]
    if layer_type != WINDOW:
        ratio = m.ratio(layer_type)
        coff = 2 if layer_type == CSA else 1          # CSA overlaps its windows (compressor.py coff)
        out += [Weight("compressor", "compressor.wkv+wgate", 2 * coff * d * h),
                Weight("misc_fp32", "compressor.ape", ratio * coff * d),
                Weight("norms", "compressor.norm", d)]
    if layer_type == CSA:
        di = m.index_head_dim
        out += [Weight("indexer_q", "indexer.wq_b", m.index_heads * di * m.q_lora_rank),
                Weight("indexer_weights", "indexer.weights_proj", m.index_heads * h),
                Weight("compressor", "indexer.compressor.wkv+wgate", 2 * 2 * di * h),
                Weight("misc_fp32", "indexer.compressor.ape", m.csa_ratio * 2 * di),
                Weight("norms", "indexer.compressor.norm", di)]
    return out


def moe_weights(m: ModelSpec, hash_routed: bool) -> list[Weight]:
    """The FFN block of one layer: gate, routed and shared experts (CR-code DeepseekV3MoE)."""
    h, i = m.hidden, m.moe_intermediate
    out = [Weight("gate", "gate", m.num_experts * h),
           Weight("routed_experts", "experts.w13+w2", m.num_experts * 3 * i * h),
           Weight("shared_expert", "shared.w13+w2", m.shared_experts * 3 * i * h)]
    if hash_routed:
        out.append(Weight("hash_table", "tid2eid", m.vocab * m.top_k))
    else:
        out.append(Weight("misc_fp32", "gate.e_score_correction_bias", m.num_experts))
    return out


def hc_weights(m: ModelSpec) -> list[Weight]:
    """mHC parameters of one layer: fn, base and scale before attention and before the FFN."""
    mix = (2 + m.hc_mult) * m.hc_mult
    return [Weight("misc_fp32", "hc_attn+hc_ffn", 2 * (mix * m.hc_mult * m.hidden + mix + 3)),
            Weight("norms", "attn_norm+ffn_norm", 2 * m.hidden)]


def weights(m: ModelSpec, layer_type: str, hash_routed: bool = False) -> list[Weight]:
    """Every weight of one decoder (or MTP) layer."""
    return attention_weights(m, layer_type) + moe_weights(m, hash_routed) + hc_weights(m)


def mtp_extra_weights(m: ModelSpec) -> list[Weight]:
    """What an MTP layer has beyond its decoder layer (CR-code DeepseekV3ModelMTP)."""
    h = m.hidden
    return [Weight("mtp_proj", "e_proj+h_proj", 2 * h * h),
            Weight("norms", "enorm+hnorm+shared_head_norm", 3 * h),
            Weight("misc_fp32", "hc_head", m.hc_mult * m.hc_mult * h + m.hc_mult + 1)]


def model_weights(m: ModelSpec) -> list[Weight]:
    """Weights outside the layers: embedding, LM head, final norm, the main model's hc_head."""
    h = m.hidden
    return [Weight("embedding", "embed_tokens", m.vocab * h),
            Weight("lm_head", "lm_head", m.vocab * h),
            Weight("norms", "norm", h),
            Weight("misc_fp32", "hc_head", m.hc_mult * m.hc_mult * h + m.hc_mult + 1)]


def all_weights(m: ModelSpec) -> list[Weight]:
    """Every weight of the model: the decoder layers, the MTP layers and the rest."""
    out = list(model_weights(m))
    for i in range(m.num_layers):
        out += weights(m, m.layer_type(i), m.is_hash_routed(i))
    for _ in range(m.mtp_layers):
        out += weights(m, WINDOW) + mtp_extra_weights(m)
    return out


def total_params(m: ModelSpec, mtp: bool = False) -> int:
    """Parameters of the model (hash tables are index buffers, not parameters); the MTP
    layers only if ``mtp``."""
    ws = list(model_weights(m))
    for i in range(m.num_layers):
        ws += weights(m, m.layer_type(i), m.is_hash_routed(i))
    if mtp:
        for _ in range(m.mtp_layers):
            ws += weights(m, WINDOW) + mtp_extra_weights(m)
    return sum(w.count for w in ws if w.part != "hash_table")


def activated_params(m: ModelSpec) -> int:
    """Parameters one token uses: every weight but the routed experts it does not pick
    (top_k of num_experts), MTP layers left out."""
    total = total_params(m)
    routed = m.num_layers * m.num_experts * 3 * m.moe_intermediate * m.hidden
    return total - routed + routed * m.top_k // m.num_experts
