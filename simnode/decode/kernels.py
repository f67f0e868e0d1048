"""The kernels of one decode step, in order, with their shapes at a deployment.

``layer_kernels(model, dep, layer_type, hash_routed)`` lists one decoder layer's kernels in
the order CR-code runs them in decode on the 950 (modeling_deepseek.py
DeepseekV3DecoderLayer.forward, Attention.mla_prolog_decode / sparse_attn / attn_post,
Compressor, Indexer, DeepseekV3MoE.moe_infer_dispatch_combine; facts v4-decode 2 "One decode
layer"); ``step_segments`` arranges a whole step: the main model's embedding, its layers by
(type, hash-routed) group, its head (hc_head, norm, LM head, sampling), then ``next_n`` MTP
drafts (embedding, enorm / hnorm, e_proj / h_proj, one window-only layer, head). Each
``KernelCall`` has its shape at the deployment (M = batch per chip x (1 + next_n) rows for
every attention-side kernel; the routed experts' rows from balanced routing), the dtype,
its stream, the simnode model that times it (``model`` and ``settings``: a kind and its
fields, run with the preset workload of ``PRESET_WORKLOADS``), how well that model fits
(``status``), and the FLOPs and bytes of its roofline (``roofline_ns``).

Status: ``model`` (simnode models this kernel), ``proxy`` (a simnode kernel of a close
operation: named in ``note``), ``partial`` (a simnode kernel for part of it, a roofline for
the rest), ``missing`` (no simnode model: roofline, or for dispatch / combine an estimate
outside this module). ``distinct(segments)`` deduplicates: one entry per ``KernelCall.key``
(operation, dtype and shape) with its count per step.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode import units
from simnode.config.chip import ChipSpec
from simnode.decode.deployment import Deployment, format_bytes, quantization
from simnode.decode.memory import kv_entry_bytes
from simnode.decode.model import CSA, HCA, WINDOW, ModelSpec

#: the preset workload each simnode model is run with (its fields then set by ``settings``)
PRESET_WORKLOADS = {
    "gemm": "workloads/gemm-bf16-4096x7168x16384.yaml",
    "grouped_gemm": "workloads/grouped-gemm.yaml",
    "sparse_mla": "workloads/sparse-mla-decode.yaml",
    "topk": "workloads/topk-indexer.yaml",
    "swiglu": "workloads/swiglu.yaml",
    "tile:tk_rmsnorm_cast": "workloads/tk-rmsnorm-cast.yaml",
    "tile:tk_per_token_cast": "workloads/tk-per-token-cast.yaml",
    "tile:tk_rope": "workloads/tk-rope.yaml",
    "tile:tk_sinkhorn": "workloads/tk-sinkhorn.yaml",
    "tile:tk_topk_gate": "workloads/tk-topk-gate.yaml",
}
STATUSES = ("model", "proxy", "partial", "missing")
#: FP32 MMAD rate per AIC with HF32 off (facts ascend950 1.2, S1/S8): the mHC mix GEMMs are fp32
FP32_MACS_PER_CYCLE = 256
#: the MX formats' simnode dtype (MXFP8 / MXFP4 with UE8M0 scales, gemm kind's fp8 / fp4)
_KIND_DTYPE = {"mxfp8": "fp8", "mxfp4": "fp4", "bf16": "bf16", "fp8_block128": "fp8"}


@dataclass(frozen=True)
class KernelCall:
    """One kernel launch of a step: what it is, its shape, who times it, its roofline."""
    name: str              #: its role in the layer (wq_a, attn_norm, dispatch, ...)
    op: str                #: the operation (gemm, rmsnorm, sparse_attn, lightning_indexer, ...)
    shape: tuple           #: ((dimension, value), ...)
    dtype: str             #: input / weight format
    stream: str            #: main, kv, indexer or shared
    model: str             #: simnode model (a kind, ``tile:<program>``) or "none"
    settings: tuple        #: ((field, value), ...) of that kind
    status: str            #: one of STATUSES
    note: str              #: what the model leaves out, or why there is none
    flops: float           #: FLOPs on the cube (at ``peak``)
    hbm_bytes: float       #: bytes it must read or write in HBM at least
    vector_ops: float      #: fp32 element-ops on the AIVs
    fixpipe_bytes: float   #: bytes L0C -> UB through FixPipe
    peak: str              #: cube dtype bounding ``flops``: fp8, fp4, bf16, fp32

    @property
    def key(self) -> str:
        """Operation, dtype and shape: two calls with one key are one simulation."""
        return f"{self.op}[{self.dtype}](" + ",".join(f"{k}={v}" for k, v in self.shape) + ")"

    def settings_dict(self) -> dict:
        return dict(self.settings)


def _call(name, op, shape, dtype, stream, model="none", settings=(), status="missing", note="",
          flops=0.0, hbm_bytes=0.0, vector_ops=0.0, fixpipe_bytes=0.0, peak="bf16") -> KernelCall:
    return KernelCall(name, op, tuple(shape.items()), dtype, stream, model, tuple(settings.items())
                      if isinstance(settings, dict) else tuple(settings), status, note,
                      float(flops), float(hbm_bytes), float(vector_ops), float(fixpipe_bytes), peak)


def gemm(name: str, m: int, n: int, k: int, fmt: str, stream: str = "main",
         act_bytes: float = 1.0) -> KernelCall:
    """C[m, n] = A[m, k] B[n, k]^T with B stored as ``fmt`` (BF16 output)."""
    wb = format_bytes(fmt)
    if fmt == "fp32":
        return _call(name, "gemm", {"m": m, "n": n, "k": k}, fmt, stream, note="fp32 GEMM: no simnode "
                     "model (no FP32 MMAD in the gemm kind); roofline at the cube's FP32 rate",
                     flops=2 * m * n * k, hbm_bytes=n * k * wb + m * k * act_bytes + m * n * 4, peak="fp32")
    dtype = _KIND_DTYPE[fmt]
    return _call(name, "gemm", {"m": m, "n": n, "k": k}, fmt, stream, "gemm",
                 {"m": m, "n": n, "k": k, "dtype": dtype}, "model",
                 flops=2 * m * n * k, hbm_bytes=n * k * wb + m * k * act_bytes + m * n * 2, peak=dtype)


def rmsnorm(name: str, rows: int, width: int, stream: str = "main") -> KernelCall:
    return _call(name, "rmsnorm", {"rows": rows, "width": width}, "bf16", stream, "tile:tk_rmsnorm_cast",
                 {"num_tokens": rows, "hidden": width}, "proxy",
                 "TileKernels RMSNorm + per-token FP8 cast (CR's RMSNorm writes BF16, no cast)",
                 hbm_bytes=rows * width * 4, vector_ops=rows * width * 4)


def mx_quant(name: str, rows: int, width: int, stream: str = "main") -> KernelCall:
    return _call(name, "mx_quant", {"rows": rows, "width": width}, "bf16->mxfp8", stream,
                 "tile:tk_per_token_cast", {"num_tokens": rows, "hidden": width}, "proxy",
                 "TileKernels per-token FP8 cast (npu_dynamic_mx_quant: one UE8M0 scale per 32)",
                 hbm_bytes=rows * width * 3, vector_ops=rows * width * 4)


def rope(name: str, rows: int, heads: int, rot_dim: int, stream: str = "main") -> KernelCall:
    return _call(name, "rope", {"rows": rows, "heads": heads, "rot_dim": rot_dim}, "bf16", stream,
                 "tile:tk_rope", {"seqlen": rows, "nheads": heads, "rot_dim": rot_dim}, "proxy",
                 "TileKernels RoPE on rot_dim of each head in place (CR: inplace_partial_rotary_mul, "
                 "interleaved, the last rope dims of a 512-wide head)",
                 hbm_bytes=rows * heads * rot_dim * 2 * 2, vector_ops=rows * heads * rot_dim * 3)


def hc_pre(name: str, m: ModelSpec, rows: int) -> KernelCall:
    """npu_hc_pre: RMS over the hc x hidden lanes, the [rows, hc*h] x [mix, hc*h]^T fp32 mix,
    sigmoid, Sinkhorn on hc x hc, and the pre-weighted sum of the lanes."""
    hd = m.hc_mult * m.hidden
    mix = (2 + m.hc_mult) * m.hc_mult
    return _call(name, "hc_pre", {"rows": rows, "lanes": m.hc_mult, "hidden": m.hidden,
                                  "iters": m.hc_sinkhorn_iters}, "bf16", "main", "tile:tk_sinkhorn",
                 {"num_tokens": rows, "repeat": m.hc_sinkhorn_iters}, "partial",
                 "TileKernels Sinkhorn only; the fp32 mix GEMM, RMS and lane sum are a roofline",
                 flops=2 * rows * mix * hd, hbm_bytes=rows * hd * 2 + mix * hd * 4 + rows * m.hidden * 2,
                 vector_ops=rows * hd * 4, peak="fp32")


def hc_post(name: str, m: ModelSpec, rows: int) -> KernelCall:
    """npu_hc_post: y = post * x + comb @ residual over hc lanes."""
    hd = m.hc_mult * m.hidden
    return _call(name, "hc_post", {"rows": rows, "lanes": m.hc_mult, "hidden": m.hidden}, "bf16", "main",
                 note="no simnode model: roofline", hbm_bytes=rows * (m.hidden + 2 * hd) * 2,
                 vector_ops=rows * hd * (2 * m.hc_mult + 2))


def elementwise(name: str, op: str, rows: int, width: int, in_bytes: float, out_bytes: float,
                ops_per_el: float, note: str, stream: str = "main") -> KernelCall:
    return _call(name, op, {"rows": rows, "width": width}, "bf16", stream, note=note,
                 hbm_bytes=rows * width * (in_bytes + out_bytes), vector_ops=rows * width * ops_per_el)


def grouped_gemm(name: str, rows_per_group: tuple, n: int, k: int, fmt: str, op: str, stream: str,
                 note: str, status: str = "model") -> KernelCall:
    """Grouped GEMM, masked layout (low-latency dispatch), MXFP8 activations."""
    groups = len(rows_per_group)
    rows = sum(rows_per_group)
    wb = format_bytes(fmt)
    used = sum(1 for r in rows_per_group if r)
    return _call(name, op, {"groups": groups, "rows": rows, "max_rows": max(rows_per_group), "n": n, "k": k},
                 fmt, stream, "grouped_gemm",
                 {"m_per_expert": list(rows_per_group), "n": n, "k": k, "act_dtype": "fp8",
                  "weight_dtype": _KIND_DTYPE[fmt], "layout": "masked"}, status, note,
                 flops=2 * rows * n * k, hbm_bytes=used * n * k * wb + rows * (k + 2 * n),
                 peak="fp8")


def balanced_rows(total: int, groups: int) -> tuple:
    """``total`` rows dealt round-robin over ``groups`` (CR forced EPLB, facts v4-decode 2)."""
    return tuple(total // groups + (1 if g < total % groups else 0) for g in range(groups))


# -- one layer ----------------------------------------------------------------------------

def attention_kernels(m: ModelSpec, d: Deployment, layer_type: str) -> list[KernelCall]:
    """hc_pre .. hc_post of one layer's attention half (CR-code order, module docstring)."""
    q = quantization(d)
    fq = q["attn_proj"]
    M, B, s_q, h, hd = d.tokens_per_chip, d.batch_per_chip, d.query_tokens, m.hidden, m.head_dim
    kv_stream = "kv" if d.kv_stream else "main"
    idx_stream = "indexer" if d.indexer_stream else "main"
    entry = kv_entry_bytes(m, d.kv_cache)
    out = [hc_pre("hc_pre_attn", m, M), rmsnorm("attn_norm", M, h),
           mx_quant("wq_a_quant", M, h), gemm("wq_a", M, m.q_lora_rank, h, fq),
           mx_quant("wkv_quant", M, h, kv_stream), gemm("wkv", M, hd, h, fq, kv_stream),
           rmsnorm("kv_norm", M, hd, kv_stream), rope("kv_rope", M, 1, m.rope_head_dim, kv_stream),
           rmsnorm("q_norm", M, m.q_lora_rank), mx_quant("q_quant", M, m.q_lora_rank),
           gemm("wq_b", M, m.num_heads * hd, m.q_lora_rank, fq),
           rmsnorm("q_b_norm", M * m.num_heads, hd), rope("q_rope", M, m.num_heads, m.rope_head_dim),
           elementwise("win_kv_epilog", "kv_epilog", M, hd, 2, entry / hd, 6,
                       "kv_compress_epilog (quantize + scatter into the window cache): no simnode model")]
    if layer_type != WINDOW:
        ratio, coff = m.ratio(layer_type), (2 if layer_type == CSA else 1)
        out += [_compressor("compressor", m, d, coff, hd, ratio, q["compressor"]),
                elementwise("cmp_kv_epilog", "kv_epilog", B * -(-s_q // ratio), hd, 4, entry / hd, 6,
                            "kv_compress_epilog of the new compressed entries: no simnode model")]
    if layer_type == CSA:
        di, hi, keys = m.index_head_dim, m.index_heads, d.context_len // m.csa_ratio
        out += [gemm("idx_weights_proj", M, hi, h, q["indexer_weights"], act_bytes=2),
                _compressor("idx_compressor", m, d, 2, di, m.csa_ratio, q["compressor"]),
                elementwise("idx_cmp_epilog", "indexer_epilog", B * -(-s_q // m.csa_ratio), di, 4, 132 / di, 6,
                            "indexer_compress_epilog (FP8 + fp32 scale into the indexer cache): no model"),
                gemm("idx_wq_b", M, hi * di, m.q_lora_rank, q["indexer_q"], idx_stream),
                rope("idx_q_rope", M, hi, m.rope_head_dim, idx_stream),
                _call("idx_hadamard", "hadamard", {"rows": M * hi, "width": di}, "bf16", idx_stream, "gemm",
                      {"m": M * hi, "n": di, "k": di, "dtype": "bf16"}, "proxy",
                      "rotate_activation: x @ Hadamard(128) as a BF16 GEMM", flops=2 * M * hi * di * di,
                      hbm_bytes=M * hi * di * 4 + di * di * 2, peak="bf16"),
                mx_quant("idx_q_quant", M * hi, di, idx_stream),
                _call("lightning_indexer", "lightning_indexer", {"queries": M, "heads": hi, "dim": di,
                      "keys": keys, "topk": m.index_topk}, "fp8", "main", note="quant lightning indexer "
                      "(FP8 MQA logits, weighted ReLU sum over heads, fused top-k): no simnode model; "
                      "roofline of cube, HBM and FixPipe (facts ascend950 2.1: MQA logits FixPipe-bound)",
                      flops=2 * M * hi * di * keys, hbm_bytes=B * keys * (di + 4) + M * hi * (di + 8),
                      vector_ops=M * hi * keys * 3, fixpipe_bytes=M * hi * keys * 4, peak="fp8"),
                _call("indexer_topk", "topk", {"rows": M, "n": keys, "k": m.index_topk}, "fp32", "main",
                      "topk", {"rows": M, "n": keys, "k": m.index_topk}, "proxy",
                      "DeepSelect top-k timed on its own; CR fuses it into the indexer op",
                      hbm_bytes=M * keys * 4)]
    selected = {WINDOW: 0, CSA: m.index_topk, HCA: -(-d.context_len // m.hca_ratio)}[layer_type]
    out.append(_sparse_attn(m, d, layer_type, selected, entry))
    o_in = m.num_heads * hd // m.o_groups
    out += [rope("o_inv_rope", M, m.num_heads, m.rope_head_dim),
            mx_quant("o_quant", M * m.o_groups, o_in),
            grouped_gemm("wo_a", (M,) * m.o_groups, m.o_lora_rank, o_in, fq, "batch_gemm", "main",
                         "npu_transpose_quant_batchmatmul as a grouped GEMM of o_groups equal groups",
                         "proxy"),
            mx_quant("wo_b_quant", M, m.o_groups * m.o_lora_rank),
            gemm("wo_b", M, h, m.o_groups * m.o_lora_rank, fq),
            hc_post("hc_post_attn", m, M)]
    return out


def _compressor(name: str, m: ModelSpec, d: Deployment, coff: int, width: int, ratio: int,
                fmt: str) -> KernelCall:
    """The fused compressor (custom.compressor): x @ wkv and x @ wgate (BF16), the state
    update, the gated softmax over ratio x coff entries, RMSNorm and RoPE of new entries."""
    M, h = d.tokens_per_chip, m.hidden
    n = 2 * coff * width
    state = M * n * 4 * (1 + coff)           # fp32 state written per token, read back coff-fold
    return _call(name, "compressor", {"m": M, "n": n, "k": h, "ratio": ratio}, fmt, "main", "gemm",
                 {"m": M, "n": n, "k": h, "dtype": _KIND_DTYPE[fmt]}, "partial",
                 "its two BF16 linears as one gemm; the state update, gated pooling, norm and RoPE "
                 "are a roofline", flops=2 * M * n * h, hbm_bytes=n * h * format_bytes(fmt) + M * h * 2 + state,
                 vector_ops=M * n * 8, peak=_KIND_DTYPE[fmt])


def _sparse_attn(m: ModelSpec, d: Deployment, layer_type: str, selected: int, entry: int) -> KernelCall:
    """npu_kv_quant_sparse_attn_sharedkv: each query over its window and its compressed entries."""
    B, s_q, hd, H = d.batch_per_chip, d.query_tokens, m.head_dim, m.num_heads
    Q = B * s_q
    keys = m.window + selected
    # entries a sequence's queries read: its window (shared by them) and its compressed
    # entries (HCA: all of them; CSA: each query's own top-k, at most the whole cache)
    compressed = min(selected * s_q, d.context_len // m.csa_ratio) if layer_type == CSA else selected
    distinct = B * (m.window + s_q - 1 + compressed)
    extra_topk = max(selected, 1)
    extra_len = {WINDOW: 1, CSA: d.context_len // m.csa_ratio, HCA: max(selected, 1)}[layer_type]
    note = ("FlashMLA's decode kernel (FP8 528-B rows, main = window, extra = compressed); V4's "
            "640-B Ascend entries, MTP causal masks and its tiling (metadata op) differ")
    if layer_type == WINDOW:
        note += "; window-only has no extra cache: run with a 1-entry extra cache"
    return _call("sparse_attn", "sparse_attn", {"batch": B, "s_q": s_q, "heads": H, "dim": hd,
                 "window": m.window, "selected": selected}, d.kv_cache, "main", "sparse_mla",
                 {"mode": "decode", "batch": B, "s_q": s_q, "heads": H, "d_qk": hd, "d_v": hd,
                  "topk_main": m.window, "main_len": m.window, "main_dtype": "fp8",
                  "topk_extra": extra_topk, "extra_len": extra_len, "extra_dtype": "fp8"}, "proxy", note,
                 flops=2 * Q * H * keys * 2 * hd, hbm_bytes=distinct * entry + Q * H * hd * 4,
                 vector_ops=Q * H * keys * 8, peak="bf16")


def moe_kernels(m: ModelSpec, d: Deployment, hash_routed: bool) -> list[KernelCall]:
    """hc_pre .. hc_post of one layer's FFN half (CR-code DeepseekV3MoE, decode)."""
    q = quantization(d)
    M, h, inter = d.tokens_per_chip, m.hidden, m.moe_intermediate
    rows = balanced_rows(d.expert_rows_per_chip(m), d.local_experts(m))
    R = sum(rows)
    sh = "shared" if d.shared_expert == "stream" else "main"
    shi = inter * m.shared_experts
    comm_note = ("low-latency {} (moe_distribute_{}_v2): no simnode model yet (issue 33); "
                 "estimated outside this module")
    out = [hc_pre("hc_pre_ffn", m, M), rmsnorm("ffn_norm", M, h),
           gemm("gate", M, m.num_experts, h, q["gate"], act_bytes=2),
           _call("gate_topk", "gate_topk", {"rows": M, "experts": m.num_experts, "top_k": m.top_k,
                 "hash": hash_routed}, "fp32", "main", "tile:tk_topk_gate",
                 {"num_tokens": M, "num_experts": m.num_experts, "num_topk": m.top_k}, "proxy",
                 "TileKernels top-k gate (npu_moe_gating_top_k: sqrt-softplus, bias"
                 + ("; hash layer: tid2eid table lookup" if hash_routed else "") + ")",
                 hbm_bytes=M * m.num_experts * 4, vector_ops=M * m.num_experts * 8),
           _call("dispatch", "dispatch", {"tokens": M, "top_k": m.top_k, "hidden": h, "ep": d.moe_ep},
                 "mxfp8", "main", note=comm_note.format("dispatch", "dispatch"),
                 hbm_bytes=M * m.top_k * (h + h // 32) * 2),
           grouped_gemm("gmm_w13", rows, 2 * inter, h, q["routed_experts"], "grouped_gemm", "main",
                        "W4A8: MXFP4 weights decoded on the AIVs (Dequant-B path)"),
           _call("swiglu_quant", "swiglu_quant", {"rows": R, "width": inter}, "bf16", "main", "swiglu",
                 {"rows": R, "intermediate": inter, "sf_dtype": "ue8m0", "scale_block": 32}, "model",
                 "npu_swiglu_group_quant (clamp 10) as simnode's SwiGLU + FP8 cast",
                 hbm_bytes=R * inter * 5, vector_ops=R * inter * 10),
           grouped_gemm("gmm_w2", rows, h, inter, q["routed_experts"], "grouped_gemm", "main",
                        "W4A8: MXFP4 weights decoded on the AIVs (Dequant-B path)")]
    if m.shared_experts:
        out += [mx_quant("sh_quant", M, h, sh), gemm("sh_w13", M, 2 * shi, h, q["shared_expert"], sh),
                _call("sh_swiglu_quant", "swiglu_quant", {"rows": M, "width": shi}, "bf16", sh, "swiglu",
                      {"rows": M, "intermediate": shi, "sf_dtype": "ue8m0", "scale_block": 32}, "model",
                      "npu_swiglu_group_quant as simnode's SwiGLU + FP8 cast",
                      hbm_bytes=M * shi * 5, vector_ops=M * shi * 10),
                gemm("sh_w2", M, h, shi, q["shared_expert"], sh)]
    out += [_call("combine", "combine", {"tokens": M, "top_k": m.top_k, "hidden": h, "ep": d.moe_ep},
                  "bf16", "main", note=comm_note.format("combine", "combine"),
                  hbm_bytes=M * m.top_k * h * 2 * 2),
            elementwise("add_shared", "add", M, h, 4, 2, 1, "add of the shared expert's output: roofline"),
            hc_post("hc_post_ffn", m, M)]
    return out


def layer_kernels(m: ModelSpec, d: Deployment, layer_type: str, hash_routed: bool = False) -> list[KernelCall]:
    """Every kernel of one decoder layer, in order."""
    return attention_kernels(m, d, layer_type) + moe_kernels(m, d, hash_routed)


# -- a step -------------------------------------------------------------------------------

def embedding(name: str, m: ModelSpec, rows: int) -> KernelCall:
    return elementwise(name, "embedding", rows, m.hidden, 2, 2 * m.hc_mult, 1,
                       "embedding gather and the copy into hc lanes: roofline")


def head_kernels(m: ModelSpec, d: Deployment, norm: str) -> list[KernelCall]:
    """hc_head, the final norm, the LM head and sampling of one forward."""
    q = quantization(d)
    M, h = d.tokens_per_chip, m.hidden
    return [gemm("hc_head", M, m.hc_mult, m.hc_mult * h, "fp32", act_bytes=2), rmsnorm(norm, M, h),
            gemm("lm_head", M, m.vocab, h, q["lm_head"], act_bytes=2),
            _call("sampler", "sampler", {"rows": M, "vocab": m.vocab}, "fp32", "main", "topk",
                  {"rows": M, "n": m.vocab, "k": 1}, "proxy",
                  "DeepSelect top-1 over the vocabulary (CR samples greedily or by exponential race)",
                  hbm_bytes=M * m.vocab * 4)]


@dataclass(frozen=True)
class Segment:
    """A run of kernels repeated ``repeat`` times per step (a layer group, a head, a draft)."""
    name: str
    repeat: int
    kernels: tuple


def step_segments(m: ModelSpec, d: Deployment) -> list[Segment]:
    """The step: main embedding, layer groups, main head, then next_n MTP drafts."""
    out = [Segment("embedding", 1, (embedding("embedding", m, d.tokens_per_chip),))]
    for (layer_type, hashed), count in m.layer_groups().items():
        name = f"layer {layer_type}" + (" hash" if hashed else "")
        out.append(Segment(name, count, tuple(layer_kernels(m, d, layer_type, hashed))))
    out.append(Segment("head", 1, tuple(head_kernels(m, d, "final_norm"))))
    if d.next_n and m.mtp_layers:
        M, h = d.tokens_per_chip, m.hidden
        fq = quantization(d)["mtp_proj"]
        pre = [embedding("mtp_embedding", m, M), rmsnorm("enorm", M, h), rmsnorm("hnorm", M, h),
               mx_quant("e_proj_quant", M, h), gemm("e_proj", M, h, h, fq),
               mx_quant("h_proj_quant", M, h), gemm("h_proj", M, h, h, fq),
               elementwise("mtp_add", "add", M, h, 4, 2 * m.hc_mult, 1, "e + h and the hc copy: roofline")]
        draft = pre + layer_kernels(m, d, WINDOW) + head_kernels(m, d, "shared_head_norm")
        out.append(Segment("mtp draft", d.next_n, tuple(draft)))
    return out


def distinct(segments: list[Segment]) -> dict[str, tuple[KernelCall, int]]:
    """key -> (first call with that key, launches per step), in first-seen order."""
    out: dict[str, tuple[KernelCall, int]] = {}
    for seg in segments:
        for call in seg.kernels:
            first, n = out.get(call.key, (call, 0))
            out[call.key] = (first, n + seg.repeat)
    return out


def roofline_ns(call: KernelCall, chip: ChipSpec) -> tuple[float, str]:
    """(lower bound in ns, what sets it) from the call's FLOPs, HBM bytes, vector ops and
    FixPipe bytes at the chip's rates (cube peak by dtype, HBM bandwidth, every AIV at the
    simple-op rate, every AIC's FixPipe to UB)."""
    cores = chip.num_ai_cores
    if call.peak == "fp32":
        flop_per_ns = 2 * FP32_MACS_PER_CYCLE * chip.aic_freq_GHz * cores
    else:
        flop_per_ns = chip.peak_tflops(call.peak) * units.FLOP_PER_TFLOP / units.NS_PER_S
    aivs = cores * chip.aiv_per_core
    bounds = {
        "cube": call.flops / flop_per_ns,
        "HBM": call.hbm_bytes / chip.memory.hbm_bandwidth_GBps,
        "vector": call.vector_ops / (aivs * chip.vector.ops_per_cycle["simple"] * chip.aiv_freq_GHz),
        "FixPipe": call.fixpipe_bytes / (cores * chip.path("l0c_to_ub").bandwidth_B_per_cycle
                                         * chip.aic_freq_GHz),
    }
    bound = max(bounds, key=bounds.get)
    return bounds[bound], bound
