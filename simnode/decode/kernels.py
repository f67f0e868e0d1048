"""The kernels of one decode step, in order, with their shapes at a deployment.

``layer_kernels(model, dep, layer_type, hash_routed)`` lists one decoder layer's kernels in
the order CR-code runs them in decode on the 950 (modeling_deepseek.py
DeepseekV3DecoderLayer.forward, Attention.mla_prolog_decode / sparse_attn / attn_post,
Compressor, Indexer, DeepseekV3MoE.moe_infer_dispatch_combine; facts v4-decode 2 "One decode
layer"); ``step_order`` lays out a whole step in execution order: the main model's
embedding, its layers in the model's order, its head (hc_head, norm, LM head, sampling),
then ``next_n`` MTP drafts (embedding, enorm / hnorm, e_proj / h_proj, one window-only
layer, head), each a ``Segment`` of its forward; ``step_segments`` groups them by name with
a repeat count. Each ``KernelCall`` has its operation, its shape at the deployment (M =
batch per chip x (1 + next_n) rows for every attention-side kernel; the routed experts'
rows from balanced routing), the weight or input format, its stream, what the real
operator does (``note``) and the FLOPs and bytes of its roofline (``roofline_ns``). Which
simnode model times an operation is not this module's business: ``simnode.decode.timing``
keeps that table, one entry per operation, reading everything it needs off the shape.

Streams (``STREAMS``): a kernel on a side stream (kv, indexer, shared) forks from the main
stream after the kernel ``STREAM_EDGES`` names first and is joined before the second: CR's
record / wait events (decode-design 7.3). ``distinct(segments)`` deduplicates: one entry per
``KernelCall.key`` (operation, format and shape) with its launches per step.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode import units
from simnode.config.chip import ChipSpec
from simnode.decode.deployment import Deployment, format_bytes, quantization
from simnode.decode.memory import kv_entry_bytes, window_entry_bytes
from simnode.decode.model import CSA, HCA, WINDOW, ModelSpec

STREAMS = ("main", "kv", "indexer", "shared", "metadata")
#: side stream -> (the main-stream kernel it forks after, the one that waits for it): CR-code's
#: record / wait events (mla_prolog_decode's mla_stream, Indexer's indexer_stream, the shared
#: expert beside the routed experts; facts v4-decode 2)
STREAM_EDGES = {"kv": ("attn_norm", "win_kv_epilog"), "indexer": ("q_quant", "lightning_indexer"),
                "shared": ("gate", "add_shared")}
#: the cube dtype a weight format runs at (MXFP8 / MXFP4 with UE8M0 scales: simnode's fp8 / fp4)
CUBE_DTYPE = {"mxfp8": "fp8", "mxfp4": "fp4", "bf16": "bf16", "fp8_block128": "fp8", "fp32": "fp32",
              "hf32": "hf32"}
#: the kernels of a layer's MoE block in order (dispatch .. combine): one MoE model times them
#: together (``simnode.decode.moe``)
MOE_BLOCK = ("dispatch", "gmm_w13", "swiglu_quant", "gmm_w2", "combine")


@dataclass(frozen=True)
class KernelCall:
    """One kernel launch of a step: what it is, its shape, its stream, its roofline."""
    name: str              #: its role in the layer (wq_a, attn_norm, dispatch, ...)
    op: str                #: the operation (gemm, rmsnorm, sparse_attn, lightning_indexer, ...)
    shape: tuple           #: ((dimension, value), ...)
    dtype: str             #: input / weight format
    stream: str            #: one of STREAMS
    note: str              #: what the real operator does (CR-code's op), where it differs
    flops: float           #: FLOPs on the cube (at ``peak``)
    hbm_bytes: float       #: bytes it must read or write in HBM at least
    vector_ops: float      #: fp32 element-ops on the AIVs
    fixpipe_bytes: float   #: bytes L0C -> UB through FixPipe
    peak: str              #: cube dtype bounding ``flops``: fp8, fp4, bf16, fp32, hf32 (chip.CUBE_DTYPES)

    @property
    def key(self) -> str:
        """Operation, dtype and shape: two calls with one key are one simulation."""
        return f"{self.op}[{self.dtype}](" + ",".join(f"{k}={v}" for k, v in self.shape) + ")"

    def dims(self) -> dict:
        return dict(self.shape)


def _call(name, op, shape, dtype, stream, note="", flops=0.0, hbm_bytes=0.0, vector_ops=0.0,
          fixpipe_bytes=0.0, peak="bf16") -> KernelCall:
    return KernelCall(name, op, tuple(shape.items()), dtype, stream, note, float(flops),
                      float(hbm_bytes), float(vector_ops), float(fixpipe_bytes), peak)


def gemm(name: str, m: int, n: int, k: int, fmt: str, stream: str = "main",
         act_bytes: float = 1.0) -> KernelCall:
    """C[m, n] = A[m, k] B[n, k]^T with B stored as ``fmt`` (BF16 output)."""
    return _call(name, "gemm", {"m": m, "n": n, "k": k}, fmt, stream, flops=2 * m * n * k,
                 hbm_bytes=n * k * format_bytes(fmt) + m * k * act_bytes + m * n * 2,
                 peak=CUBE_DTYPE[fmt])


def rmsnorm(name: str, rows: int, width: int, stream: str = "main") -> KernelCall:
    return _call(name, "rmsnorm", {"rows": rows, "width": width}, "bf16", stream,
                 "RMSNorm in BF16 (no cast)", hbm_bytes=rows * width * 4, vector_ops=rows * width * 4)


def mx_quant(name: str, rows: int, width: int, stream: str = "main") -> KernelCall:
    return _call(name, "mx_quant", {"rows": rows, "width": width}, "bf16->mxfp8", stream,
                 "npu_dynamic_mx_quant: one UE8M0 scale per 32",
                 hbm_bytes=rows * width * 3, vector_ops=rows * width * 4)


def rope(name: str, rows: int, heads: int, rot_dim: int, stream: str = "main") -> KernelCall:
    return _call(name, "rope", {"rows": rows, "heads": heads, "rot_dim": rot_dim}, "bf16", stream,
                 "inplace_partial_rotary_mul: interleaved, the last rope dims of a 512-wide head",
                 hbm_bytes=rows * heads * rot_dim * 2 * 2, vector_ops=rows * heads * rot_dim * 3)


def hc_pre(name: str, m: ModelSpec, rows: int) -> KernelCall:
    """npu_hc_pre: RMS over the hc x hidden lanes, the [rows, hc*h] x [mix, hc*h]^T fp32 mix,
    sigmoid, Sinkhorn on hc x hc, and the pre-weighted sum of the lanes."""
    hd = m.hc_mult * m.hidden
    mix = (2 + m.hc_mult) * m.hc_mult
    return _call(name, "hc_pre", {"rows": rows, "lanes": m.hc_mult, "hidden": m.hidden,
                                  "iters": m.hc_sinkhorn_iters}, "bf16", "main",
                 "npu_hc_pre (fused): RMS, FP32 mix GEMM in HF32, Sinkhorn, lane sum",
                 flops=2 * rows * mix * hd, hbm_bytes=rows * hd * 2 + mix * hd * 4 + rows * m.hidden * 2,
                 vector_ops=rows * hd * 4, peak="hf32")


def hc_post(name: str, m: ModelSpec, rows: int) -> KernelCall:
    """npu_hc_post: y = post * x + comb @ residual over hc lanes."""
    hd = m.hc_mult * m.hidden
    return _call(name, "hc_post", {"rows": rows, "lanes": m.hc_mult, "hidden": m.hidden}, "bf16", "main",
                 "npu_hc_post (fused)", hbm_bytes=rows * (m.hidden + 2 * hd) * 2,
                 vector_ops=rows * hd * (2 * m.hc_mult + 2))


def hc_head(name: str, m: ModelSpec, rows: int) -> KernelCall:
    """hc_head: the fp32 [rows, hc*h] x [hc, hc*h]^T mix that folds the lanes before the head."""
    hd = m.hc_mult * m.hidden
    return _call(name, "hc_head", {"rows": rows, "lanes": m.hc_mult, "hidden": m.hidden}, "fp32", "main",
                 "hc_head: an fp32 linear over the lanes", flops=2 * rows * m.hc_mult * hd,
                 hbm_bytes=m.hc_mult * hd * 4 + rows * hd * 2 + rows * m.hc_mult * 4, peak="fp32")


def elementwise(name: str, op: str, rows: int, width: int, in_bytes: float, out_bytes: float,
                ops_per_el: float, note: str, stream: str = "main") -> KernelCall:
    return _call(name, op, {"rows": rows, "width": width}, "bf16", stream, note,
                 hbm_bytes=rows * width * (in_bytes + out_bytes), vector_ops=rows * width * ops_per_el)


def grouped_gemm(name: str, rows_per_group: tuple, n: int, k: int, fmt: str, op: str, stream: str,
                 note: str) -> KernelCall:
    """Grouped GEMM, masked layout (low-latency dispatch), MXFP8 activations; rows dealt
    round-robin over the groups (``balanced_rows``: the shape keeps only their total)."""
    groups = len(rows_per_group)
    rows = sum(rows_per_group)
    used = sum(1 for r in rows_per_group if r)
    return _call(name, op, {"groups": groups, "rows": rows, "max_rows": max(rows_per_group), "n": n, "k": k},
                 fmt, stream, note, flops=2 * rows * n * k,
                 hbm_bytes=used * n * k * format_bytes(fmt) + rows * (k + 2 * n), peak="fp8")


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
    entry, win_entry = kv_entry_bytes(m, d.kv_cache), window_entry_bytes(m, d.kv_cache)
    out = [hc_pre("hc_pre_attn", m, M), rmsnorm("attn_norm", M, h),
           mx_quant("wq_a_quant", M, h), gemm("wq_a", M, m.q_lora_rank, h, fq),
           mx_quant("wkv_quant", M, h, kv_stream), gemm("wkv", M, hd, h, fq, kv_stream),
           rmsnorm("kv_norm", M, hd, kv_stream), rope("kv_rope", M, 1, m.rope_head_dim, kv_stream),
           rmsnorm("q_norm", M, m.q_lora_rank), mx_quant("q_quant", M, m.q_lora_rank),
           gemm("wq_b", M, m.num_heads * hd, m.q_lora_rank, fq),
           rmsnorm("q_b_norm", M * m.num_heads, hd), rope("q_rope", M, m.num_heads, m.rope_head_dim),
           elementwise("win_kv_epilog", "kv_epilog", M, hd, 2, win_entry / hd, 6,
                       "kv_compress_epilog: quantize + scatter into the window cache")]
    if layer_type != WINDOW:
        ratio, coff = m.ratio(layer_type), (2 if layer_type == CSA else 1)
        out += [_compressor("compressor", m, d, coff, hd, ratio, q["compressor"]),
                elementwise("cmp_kv_epilog", "kv_epilog", B * -(-s_q // ratio), hd, 4, entry / hd, 6,
                            "kv_compress_epilog of the new compressed entries")]
    if layer_type == CSA:
        di, hi, keys = m.index_head_dim, m.index_heads, d.context_len // m.csa_ratio
        out += [gemm("idx_weights_proj", M, hi, h, q["indexer_weights"], act_bytes=2),
                _compressor("idx_compressor", m, d, 2, di, m.csa_ratio, q["compressor"]),
                elementwise("idx_cmp_epilog", "indexer_epilog", B * -(-s_q // m.csa_ratio), di, 4, 132 / di, 6,
                            "indexer_compress_epilog: FP8 + fp32 scale into the indexer cache"),
                gemm("idx_wq_b", M, hi * di, m.q_lora_rank, q["indexer_q"], idx_stream),
                rope("idx_q_rope", M, hi, m.rope_head_dim, idx_stream),
                _call("idx_hadamard", "hadamard", {"rows": M * hi, "width": di}, "bf16", idx_stream,
                      "rotate_activation: x @ Hadamard(width)", flops=2 * M * hi * di * di,
                      hbm_bytes=M * hi * di * 4 + di * di * 2, peak="bf16"),
                mx_quant("idx_q_quant", M * hi, di, idx_stream),
                _call("lightning_indexer", "lightning_indexer", {"batch": B, "s_q": s_q, "heads": hi,
                      "dim": di, "context": d.context_len, "ratio": m.csa_ratio, "topk": m.index_topk},
                      "fp8", "main", "npu_quant_lightning_indexer: FP8 MQA logits, weighted ReLU sum "
                      "over heads, the top-k fused (facts ascend950 2.1: MQA logits FixPipe-bound)",
                      flops=2 * M * hi * di * keys, hbm_bytes=B * keys * (di + 4) + M * hi * (di + 8),
                      vector_ops=M * hi * keys * 3, fixpipe_bytes=M * hi * keys * 4, peak="fp8")]
    out.append(sparse_attn(m, d, layer_type, entry, win_entry))
    o_in = m.num_heads * hd // m.o_groups
    out += [rope("o_inv_rope", M, m.num_heads, m.rope_head_dim),
            mx_quant("o_quant", M * m.o_groups, o_in),
            grouped_gemm("wo_a", (M,) * m.o_groups, m.o_lora_rank, o_in, fq, "batch_gemm", "main",
                         "npu_transpose_quant_batchmatmul: o_groups equal groups"),
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
    return _call(name, "compressor", {"m": M, "n": n, "k": h, "ratio": ratio}, fmt, "main",
                 "custom.compressor: two linears, state update, gated pooling, norm, RoPE",
                 flops=2 * M * n * h, hbm_bytes=n * h * format_bytes(fmt) + M * h * 2 + state,
                 vector_ops=M * n * 8, peak=CUBE_DTYPE[fmt])


def sparse_attn(m: ModelSpec, d: Deployment, layer_type: str, entry: int, win_entry: int) -> KernelCall:
    """npu_kv_quant_sparse_attn_sharedkv: each of a sequence's ``s_q`` queries (the last
    ``s_q`` positions of its ``context``: 1 + MTP next_n, causal among themselves) over its
    window (the ``window`` positions ending at its own) and its compressed cache of
    ``(pos + 1) // ratio`` entries: CSA the indexer's ``topk`` of them, HCA all, window-only
    none. The shape is what the op's kernel model needs (``simnode.kernels.sparse_mla.v4``:
    the layer, the positions through ``context`` and ``s_q``, the heads); the KV format is
    the call's ``dtype`` (the deployment's ``kv_cache``)."""
    B, s_q, hd, H = d.batch_per_chip, d.query_tokens, m.head_dim, m.num_heads
    ratio = m.ratio(layer_type)
    topk = m.index_topk if layer_type == CSA else 0
    poss = range(d.context_len - s_q, d.context_len)
    wins = [min(m.window, pos + 1) for pos in poss]
    cmp = [((pos + 1) // ratio if ratio else 0) for pos in poss]
    sel = [min(topk, n) if layer_type == CSA else n for n in cmp]
    # entries a sequence's queries read: its window positions (shared by them) and its
    # compressed entries (HCA: all of the last query's; CSA: each query's own top-k, at most
    # the whole cache)
    compressed = min(sum(sel), cmp[-1]) if layer_type == CSA else cmp[-1]
    read = B * ((wins[-1] + s_q - 1) * win_entry + compressed * entry)
    keys = sum(wins) + sum(sel)
    return _call("sparse_attn", "sparse_attn", {"layer": layer_type, "batch": B, "s_q": s_q, "heads": H,
                 "dim": hd, "context": d.context_len, "window": m.window, "ratio": ratio, "topk": topk},
                 d.kv_cache, "main", "window + compressed caches in one op, tiled by its AICPU "
                 "metadata op", flops=2 * B * H * keys * 2 * hd, hbm_bytes=read + B * s_q * H * hd * 4,
                 vector_ops=B * H * keys * 8, peak="bf16")


def moe_kernels(m: ModelSpec, d: Deployment, hash_routed: bool) -> list[KernelCall]:
    """hc_pre .. hc_post of one layer's FFN half (CR-code DeepseekV3MoE, decode); the shared
    expert's kernels stand after the gate, where its stream forks (``STREAM_EDGES``)."""
    q = quantization(d)
    M, h, inter = d.tokens_per_chip, m.hidden, m.moe_intermediate
    rows = balanced_rows(d.expert_rows_per_chip(m), d.local_experts(m))
    R = sum(rows)
    sh = "shared" if d.shared_expert == "stream" else "main"
    shi = inter * m.shared_experts
    out = [hc_pre("hc_pre_ffn", m, M), rmsnorm("ffn_norm", M, h),
           gemm("gate", M, m.num_experts, h, q["gate"], act_bytes=2)]
    if m.shared_experts:
        out += [mx_quant("sh_quant", M, h, sh), gemm("sh_w13", M, 2 * shi, h, q["shared_expert"], sh),
                _call("sh_swiglu_quant", "swiglu_quant", {"rows": M, "width": shi}, "bf16", sh,
                      "npu_swiglu_group_quant (clamp 10)", hbm_bytes=M * shi * 5, vector_ops=M * shi * 10),
                gemm("sh_w2", M, h, shi, q["shared_expert"], sh)]
    out += [_call("hash_topk" if hash_routed else "gate_topk", "gate_topk", {"rows": M, "experts": m.num_experts,
                  "top_k": m.top_k, "hash": hash_routed}, "fp32", "main",
                  "npu_moe_gating_top_k: sqrt-softplus, bias" + ("; hash layer: tid2eid table lookup"
                                                                  if hash_routed else ""),
                  hbm_bytes=M * m.num_experts * 4, vector_ops=M * m.num_experts * 8),
            _call("dispatch", "dispatch", {"tokens": M, "top_k": m.top_k, "hidden": h, "ep": d.moe_ep},
                  "mxfp8", "main", "moe_distribute_dispatch_v2 (low latency)",
                  hbm_bytes=M * m.top_k * (h + h // 32) * 2),
            grouped_gemm("gmm_w13", rows, 2 * inter, h, q["routed_experts"], "grouped_gemm", "main",
                         "grouped matmul w13 of the local experts"),
            _call("swiglu_quant", "swiglu_quant", {"rows": R, "width": inter}, "bf16", "main",
                  "npu_swiglu_group_quant (clamp 10)", hbm_bytes=R * inter * 5, vector_ops=R * inter * 10),
            grouped_gemm("gmm_w2", rows, h, inter, q["routed_experts"], "grouped_gemm", "main",
                         "grouped matmul w2 of the local experts"),
            _call("combine", "combine", {"tokens": M, "top_k": m.top_k, "hidden": h, "ep": d.moe_ep},
                  "bf16", "main", "moe_distribute_combine_v2 (low latency)",
                  hbm_bytes=M * m.top_k * h * 2 * 2),
            elementwise("add_shared", "add", M, h, 4, 2, 1, "add of the shared expert's output"),
            hc_post("hc_post_ffn", m, M)]
    return out


def layer_kernels(m: ModelSpec, d: Deployment, layer_type: str, hash_routed: bool = False) -> list[KernelCall]:
    """Every kernel of one decoder layer, in order."""
    return attention_kernels(m, d, layer_type) + moe_kernels(m, d, hash_routed)


# -- a step -------------------------------------------------------------------------------

def embedding(name: str, m: ModelSpec, rows: int) -> KernelCall:
    return elementwise(name, "embedding", rows, m.hidden, 2, 2 * m.hc_mult, 1,
                       "embedding gather and the copy into hc lanes")


def head_kernels(m: ModelSpec, d: Deployment, norm: str) -> list[KernelCall]:
    """hc_head, the final norm, the LM head and sampling of one forward."""
    q = quantization(d)
    M, h = d.tokens_per_chip, m.hidden
    return [hc_head("hc_head", m, M), rmsnorm(norm, M, h),
            gemm("lm_head", M, m.vocab, h, q["lm_head"], act_bytes=2),
            _call("sampler", "sampler", {"rows": M, "vocab": m.vocab}, "fp32", "main",
                  "greedy or exponential-race sampling over the vocabulary (CR sampler.py)",
                  hbm_bytes=M * m.vocab * 4)]


@dataclass(frozen=True)
class Segment:
    """A run of kernels: a layer, a head, a draft; ``repeat`` times per step (``step_segments``)
    or once, in forward ``forward`` (0 = the main model, 1.. the MTP drafts: ``step_order``)."""
    name: str
    repeat: int
    kernels: tuple
    forward: int = 0


def layer_name(layer_type: str, hashed: bool) -> str:
    return f"layer {layer_type}" + (" hash" if hashed else "")


def step_order(m: ModelSpec, d: Deployment) -> list[Segment]:
    """The step in execution order: main embedding, every layer, main head, then next_n MTP
    drafts; equal layers share one kernel tuple."""
    layers = {key: tuple(layer_kernels(m, d, *key)) for key in m.layer_groups()}
    out = [Segment("embedding", 1, (embedding("embedding", m, d.tokens_per_chip),))]
    for i in range(m.num_layers):
        key = (m.layer_type(i), m.is_hash_routed(i))
        out.append(Segment(layer_name(*key), 1, layers[key]))
    out.append(Segment("head", 1, tuple(head_kernels(m, d, "final_norm"))))
    if d.next_n and m.mtp_layers:
        M, h = d.tokens_per_chip, m.hidden
        fq = quantization(d)["mtp_proj"]
        pre = [embedding("mtp_embedding", m, M), rmsnorm("enorm", M, h), rmsnorm("hnorm", M, h),
               mx_quant("e_proj_quant", M, h), gemm("e_proj", M, h, h, fq),
               mx_quant("h_proj_quant", M, h), gemm("h_proj", M, h, h, fq),
               elementwise("mtp_add", "add", M, h, 4, 2 * m.hc_mult, 1, "e + h and the hc copy")]
        draft = tuple(pre + layer_kernels(m, d, WINDOW) + head_kernels(m, d, "shared_head_norm"))
        out += [Segment("mtp draft", 1, draft, f) for f in range(1, d.next_n + 1)]
    return out


def step_segments(m: ModelSpec, d: Deployment) -> list[Segment]:
    """``step_order`` grouped by segment name, in first-seen order, with repeat counts."""
    out: dict[str, Segment] = {}
    for seg in step_order(m, d):
        first = out.get(seg.name)
        out[seg.name] = seg if first is None else Segment(seg.name, first.repeat + 1, first.kernels)
    return list(out.values())


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
