"""TileKernels' MoE top-k gate (``topk_gate``, Ascend kernel ``tile_kernels/moe/topk_gate_asc.py``)
as a tile program: scores [tokens, experts] FP32 -> the indices of each token's ``num_topk``
largest scores (int64, ties to the lower index).

Structure as the Ascend kernel: a pure vector kernel; token ``w * AIVs + core`` in iteration
w of a 6-stage pipelined loop (the score row and the index row six-buffered in UB). One
vector function per token: a check that every score is finite (sub, compare, select, max),
then k rounds of: the row max, the lanes equal to it, the lowest such index (select and a
min reduction), and that lane masked to -inf -- the kernel's single-group path over 4
vector registers for 256 experts. Shapes: TileKernels' tests pair 256 experts with top-8
and the DeepEP benchmark routes top-6 of 256 (facts moe-layer 1, 3); tokens 4001 and 8001.
"""

import simnode.tile.lang as T


@T.program
def topk_gate(num_tokens: int = T.param(4001, "tokens (rows of scores)", min=1),
              num_experts: int = T.param(256, "scores per token", min=1),
              num_topk: int = T.param(8, "experts selected per token", min=1),
              num_stages: int = T.param(6, "UB buffering stages", min=1)):
    if num_topk > num_experts:
        raise ValueError(f"num_topk = {num_topk} > num_experts = {num_experts}")
    lanes = 64                                   # fp32 lanes of a vector register (facts 1.2)
    width = T.ceildiv(num_experts, lanes) * lanes
    scores = T.tensor("scores", (num_tokens, num_experts), "fp32")
    topk_idx = T.tensor("topk_idx", (num_tokens, num_topk), "int64")
    cores = T.num_vector_cores()
    T.meta(num_stages=num_stages)
    for core in T.Kernel(cores, vector=True):
        s_ub = T.alloc_ub((width,), "fp32")
        idx_ub = T.alloc_ub((T.ceildiv(num_topk, lanes) * lanes,), "int64")
        T.annotate_buffer_versions({s_ub: num_stages, idx_ub: num_stages})
        s = T.alloc_reg((width,), "fp32")
        lane_idx = T.alloc_reg((width,), "int32")
        hit = T.alloc_reg((width,), "bool")
        cand = T.alloc_reg((width,), "int32")
        best = T.alloc_reg((1,), "fp32")
        win = T.alloc_reg((1,), "int32")
        for w in T.Pipelined(T.ceildiv(num_tokens, cores), num_stages=num_stages):
            row = w * cores + core
            if row >= num_tokens:
                continue
            T.copy(scores[row, 0:num_experts], s_ub[0:num_experts])
            with T.vf("topk"):
                T.sub(s, s_ub, s_ub)                     # x - x is 0 unless x is inf or nan
                T.compare(hit, s, 0.0)
                T.select(s, hit, s_ub, s_ub)
                T.max(cand, cand, hit)
                for _ in range(num_topk):
                    T.reduce_max(best, s)
                    T.compare(hit, s, best)
                    T.select(cand, hit, lane_idx, 0)
                    T.reduce_min(win, cand)
                    T.compare(hit, lane_idx, win)
                    T.select(s, hit, float("-inf"), s)
                    T.fill(idx_ub[0:1], win)
            T.copy(idx_ub[0:num_topk], topk_idx[row, 0:num_topk])
