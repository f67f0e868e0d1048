"""DeepSeek-V4's fused mHC post-processing (``HcPost``) on the 950 as a tile program: CANN
recipes' ``npu_hc_post`` (hicann/cann-recipes-infer @fbc225d2, ops/ascendc/src/hc_post,
``__DAV_C310__`` path, ``HcPostRegBaseBfloat16`` with FP32 post and comb), called after
attention and after the MoE in every layer (models/deepseek_v4 modeling_deepseek.py).

For each token: new_lanes[i] = post[i] x out + sum_j comb[j][i] x lanes[j], with out the
sub-layer's output [T, hidden] BF16, lanes the residual [T, 4, hidden] BF16, post [T, 4] and
comb [T, 4, 4] FP32 from ``HcPre``; the result is the next residual, [T, 4, hidden] BF16.

A pure vector kernel (host tiling ``hc_post_tiling_arch35.cpp``): tokens are dealt to
``min(T, 64)`` AIVs in contiguous runs (the first ``T mod AIVs`` get one more); each AIV walks
its tokens one by one and the hidden row in chunks of 4096: load the token's post and comb,
the out chunk and the 4 lane chunks (double-buffered queues, so the next loads overlap the
current VF), one VF that for each of the 4 output lanes reloads and converts out and the 4
lanes and does a mul and 4 mul-adds per register, a VF that casts the FP32 result to BF16,
and the store. Per token and 4096 channels: 40 KB in, 32 KB out, ~2600 VF instructions.

At a few tokens an AIV's one token is a chain of loads, the update VF and the store; each
further token per AIV adds its VF time (the loads and the store overlap it). The VFs are
priced by the chip's VF model through ``mhc_vf`` (instruction counts and chains).
"""

import simnode.tile.lang as T
from simnode.tile.programs import mhc_vf as V

D_CHUNK = 4096          # CR hc_post_tiling_arch35.cpp: ONCE_DEAL_DPARAM


@T.program
def hc_post(num_tokens: int = T.param(360, "tokens on this chip (b x s)", min=1),
            hidden: int = T.param(4096, "hidden size (V4-Flash 4096, V4-Pro 7168)", min=64),
            lanes: int = T.param(4, "mHC lanes (hc_mult)", (4,))):
    if hidden % 64:
        raise ValueError(f"hidden = {hidden}: a multiple of 64 (one vector register of FP32)")
    t = num_tokens
    used = min(t, T.num_vector_cores())
    per = T.ceildiv(t, used)                 # batchOneCore; the rest get one fewer
    front = t - (per - 1) * used             # frontCore
    chunks = [(d0, min(D_CHUNK, hidden - d0)) for d0 in range(0, hidden, D_CHUNK)]
    dch = chunks[0][1]
    upd = V.lane_update(lanes, dch)
    T.meta(aivs=used, tokens_per_aiv=per, d_chunks=len(chunks),
           update_vf_cycles=round(upd.cycles(T.chip())))

    out = T.tensor("x", (t, hidden), "bf16")                   # the sub-layer's output
    res = T.tensor("residual", (t, lanes, hidden), "bf16")
    post = T.tensor("post", (t, lanes), "fp32")
    comb = T.tensor("comb", (t, lanes * lanes), "fp32")
    y = T.tensor("y", (t, lanes, hidden), "bf16")

    for a in T.Kernel(used, vector=True):
        x_ub = T.alloc_ub((dch,), "bf16", versions=2)
        r_ub = T.alloc_ub((lanes, dch), "bf16", versions=2)
        p_ub = T.alloc_ub((lanes,), "fp32", versions=2)
        c_ub = T.alloc_ub((lanes * lanes,), "fp32", versions=2)
        s_ub = T.alloc_ub((lanes, dch), "bf16", versions=2)      # sumQue
        acc = T.alloc_ub((lanes, dch), "fp32")                   # sumTempBuf
        n = per if a < front else per - 1
        t0 = a * per if a < front else a * (per - 1) + front
        for tk in range(t0, t0 + n):
            T.copy(post[tk, 0:lanes], p_ub)
            T.copy(comb[tk, 0:lanes * lanes], c_ub)
            for d0, w in chunks:
                T.copy(out[tk, d0:d0 + w], x_ub[0:w])
                T.copy(res[tk, 0:lanes, d0:d0 + w], r_ub[0:lanes, 0:w])
                V.issue(upd if w == dch else V.lane_update(lanes, w),
                        [x_ub[0:w], r_ub[0:lanes, 0:w], p_ub, c_ub], [acc[0:lanes, 0:w]])
                # AscendC::Cast over the whole buffer (hcParam x dOnceDealing), as the kernel does
                V.issue(V.cast_out(lanes * dch), [acc], [s_ub])
                T.copy(s_ub[0:lanes, 0:w], y[tk, 0:lanes, d0:d0 + w])
