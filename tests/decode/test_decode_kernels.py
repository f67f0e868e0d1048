"""The kernel list of a decode step: CR-code order per layer type, shapes, dedup keys."""

import pytest

from simnode.config.chip import load_chip
from simnode.decode import deployment as D
from simnode.decode import kernels as K
from simnode.decode import model as M

FLASH = M.preset("v4-flash")
MTP3 = D.load_deployment(dict(D.FLASH_16_MTP3), FLASH)
MTP1 = D.load_deployment(dict(D.FLASH_16_MTP1), FLASH)

PROLOG = ["hc_pre_attn", "attn_norm", "wq_a_quant", "wq_a", "wkv_quant", "wkv", "kv_norm", "kv_rope",
          "q_norm", "q_quant", "wq_b", "q_b_norm", "q_rope", "win_kv_epilog"]
INDEXER = ["idx_weights_proj", "idx_compressor", "idx_cmp_epilog", "idx_wq_b", "idx_q_rope",
           "idx_hadamard", "idx_q_quant", "lightning_indexer"]
POST = ["sparse_attn", "o_inv_rope", "o_quant", "wo_a", "wo_b_quant", "wo_b", "hc_post_attn"]
MOE = ["hc_pre_ffn", "ffn_norm", "gate", "sh_quant", "sh_w13", "sh_swiglu_quant", "sh_w2", "gate_topk",
       "dispatch", "gmm_w13", "swiglu_quant", "gmm_w2", "combine", "add_shared", "hc_post_ffn"]


@pytest.mark.parametrize("layer_type, middle", [
    ("window", []),
    ("hca", ["compressor", "cmp_kv_epilog"]),
    ("csa", ["compressor", "cmp_kv_epilog"] + INDEXER),
])
def test_a_layers_kernels_follow_cr_codes_order(layer_type, middle):
    names = [c.name for c in K.layer_kernels(FLASH, MTP3, layer_type)]
    assert names == PROLOG + middle + POST + MOE


def test_shapes_at_decode_m():
    calls = {c.name: c for c in K.layer_kernels(FLASH, MTP1, "csa")}
    assert calls["wq_b"].shape == (("m", 360), ("n", 64 * 512), ("k", 1024))
    assert (calls["wq_b"].dtype, calls["wq_b"].peak) == ("mxfp8", "fp8")
    attn = calls["sparse_attn"].dims()
    assert (attn["layer"], attn["batch"], attn["s_q"], attn["context"], attn["window"], attn["ratio"],
            attn["topk"]) == ("csa", 180, 2, 8192, 128, 4, 512)
    w13 = calls["gmm_w13"].dims()
    assert (w13["groups"], w13["rows"], w13["max_rows"], calls["gmm_w13"].dtype) == (16, 2160, 135, "mxfp4")
    assert calls["wo_a"].dims()["rows"] == 360 * 8
    hca = {c.name: c for c in K.layer_kernels(FLASH, MTP1, "hca")}["sparse_attn"].dims()
    assert (hca["layer"], hca["ratio"], hca["topk"]) == ("hca", 128, 0)     # all 8192 / 128 entries


def test_streams_follow_the_deployment():
    calls = {c.name: c for c in K.layer_kernels(FLASH, MTP3, "csa")}
    assert (calls["wkv"].stream, calls["idx_wq_b"].stream, calls["sh_w13"].stream) == ("kv", "indexer", "shared")
    inline = D.load_deployment({**D.FLASH_16_MTP3, "shared_expert": "inline", "kv_stream": False}, FLASH)
    calls = {c.name: c for c in K.layer_kernels(FLASH, inline, "csa")}
    assert calls["wkv"].stream == calls["sh_w13"].stream == "main"


def test_balanced_rows_deal_round_robin():
    assert K.balanced_rows(24, 16) == (2,) * 8 + (1,) * 8
    assert sum(K.balanced_rows(2160, 16)) == 2160


def test_step_segments_cover_every_layer_and_draft():
    segs = K.step_segments(FLASH, MTP3)
    assert [(s.name, s.repeat) for s in segs] == [
        ("embedding", 1), ("layer window hash", 2), ("layer csa hash", 1), ("layer hca", 20),
        ("layer csa", 20), ("head", 1), ("mtp draft", 3)]
    assert sum(s.repeat for s in segs if s.name.startswith("layer")) == 43


def test_distinct_keys_count_each_launch_once():
    segs = K.step_segments(FLASH, MTP3)
    dist = K.distinct(segs)
    assert sum(n for _, n in dist.values()) == sum(s.repeat * len(s.kernels) for s in segs)
    wq_a = K.gemm("wq_a", 4, 1024, 4096, "mxfp8")
    assert wq_a.key == "gemm[mxfp8](m=4,n=1024,k=4096)"
    assert dist[wq_a.key][1] == 43 + 3                 # every layer and every MTP draft
    # attn_norm, ffn_norm, the final norm and the drafts' enorm / hnorm / shared_head_norm
    assert dist["rmsnorm[bf16](rows=4,width=4096)"][1] == 2 * 46 + 1 + 3 * 3
    # hash-routed layers are their own gate top-k
    assert dist["gate_topk[fp32](rows=4,experts=256,top_k=6,hash=True)"][1] == 3
    assert [c.name for c in K.layer_kernels(FLASH, MTP3, "csa", True)].count("hash_topk") == 1
    assert len(dist) < 60


def test_step_order_runs_the_layers_in_the_models_order_then_the_drafts():
    order = K.step_order(FLASH, MTP3)
    names = [s.name for s in order]
    assert names[:5] == ["embedding", "layer window hash", "layer window hash", "layer csa hash", "layer hca"]
    assert names[44] == "head" and names[45:] == ["mtp draft"] * 3
    assert [s.forward for s in order[45:]] == [1, 2, 3] and {s.forward for s in order[:45]} == {0}
    assert order[4].kernels is order[6].kernels            # equal layers share one kernel tuple


def test_every_call_says_what_the_real_operator_does():
    for c, _ in K.distinct(K.step_segments(FLASH, MTP1)).values():
        assert c.stream in K.STREAMS and c.peak in K.CUBE_DTYPE.values()
        assert c.note or c.op == "gemm", c.key


def test_roofline_of_a_decode_gemm_is_its_weight_read():
    chip = load_chip("topologies/ascend950dt.yaml")
    ns, bound = K.roofline_ns(K.gemm("wq_b", 4, 32768, 1024, "mxfp8"), chip)
    assert bound == "HBM"
    assert ns == pytest.approx((32768 * 1024 * (1 + 1 / 32) + 4 * 1024 + 4 * 32768 * 2) / 3500)
    ns, bound = K.roofline_ns(K.gemm("lm_head", 360, 129280, 4096, "bf16"), chip)
    assert bound == "cube"
