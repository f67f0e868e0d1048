"""TileKernels' RMSNorm forward with per-token FP8 cast (``rmsnorm_forward_and_per_token_cast``,
Ascend kernel ``tile_kernels/quant/norm_forward_asc.py``) as a tile program:
out = x * rsqrt(mean(x^2) + eps) * weight, cast to FP8 E4M3 with one UE8M0 scale per 32
channels of a token; x [tokens, hidden] BF16, weight [hidden] BF16.

Tiling as the Ascend kernel chooses it: a pure vector kernel over every AIV; ``rows`` tokens
per tile so that a tile's input is about 32 KiB (``tile_capacity``: 2 rows of 7168 BF16),
up to 4 stages; the weight row stays in UB. One vector function per tile: to FP32, the
sum of squares per row, rsqrt, times rstd and weight (cast once per tile), then the
quantization (group |x| max, scales, multiply, cast). Shape: TileKernels' RMSNorm + cast
test, 4001 x 7168 BF16 (facts moe-layer 3).
"""

import simnode.tile.lang as T

GROUP = 32
TILE_INPUT_BYTES = 32768      # the kernel's target input bytes per tile


@T.program
def rmsnorm_cast(num_tokens: int = T.param(4001, "tokens (rows of x)", min=1),
                 hidden: int = T.param(7168, "channels per token (a multiple of 32)", min=32),
                 num_stages: int = T.param(4, "UB buffering stages (the kernel uses up to 4)", min=1)):
    if hidden % GROUP:
        raise ValueError(f"hidden = {hidden}: scales cover 32 channels")
    cores = T.num_vector_cores()
    fit = max(1, TILE_INPUT_BYTES // (hidden * 2))
    rows = min(64, 1 << (fit.bit_length() - 1))
    groups = hidden // GROUP
    x = T.tensor("x", (num_tokens, hidden), "bf16")
    w = T.tensor("weight", (hidden,), "bf16")
    out = T.tensor("out", (num_tokens, hidden), "fp8")
    out_sf = T.tensor("out_sf", (num_tokens, groups), "e8m0")
    T.meta(rows_per_tile=rows, num_stages=num_stages)
    for core in T.Kernel(cores, vector=True):
        w_ub = T.alloc_ub((hidden,), "bf16")
        x_ub = T.alloc_ub((rows, hidden), "bf16")
        q_ub = T.alloc_ub((rows, hidden), "fp8")
        sf_ub = T.alloc_ub((rows, T.ceildiv(groups, 64) * 64), "e8m0")
        xf = T.alloc_reg((rows, hidden), "fp32")
        sq = T.alloc_reg((rows, hidden), "fp32")
        wf = T.alloc_reg((hidden,), "fp32")
        ss = T.alloc_reg((rows, 1), "fp32")
        amax = T.alloc_reg((rows, groups), "fp32")
        inv = T.alloc_reg((rows, groups), "fp32")
        T.annotate_buffer_versions({x_ub: num_stages, q_ub: num_stages, sf_ub: num_stages})
        T.copy(w, w_ub)
        for tile in T.Persistent(T.ceildiv(num_tokens, rows), cores, core, num_stages=num_stages):
            t0 = tile * rows
            n = min(rows, num_tokens - t0)
            T.copy(x[t0:t0 + n], x_ub[0:n])
            with T.vf("rmsnorm + quantize"):
                T.cast(xf[0:n], x_ub[0:n])
                T.mul(sq[0:n], xf[0:n], xf[0:n])
                T.reduce_sum(ss[0:n], sq[0:n])
                T.rsqrt(ss[0:n], ss[0:n])
                T.cast(wf, w_ub)
                T.mul(xf[0:n], xf[0:n], ss[0:n])
                T.mul(xf[0:n], xf[0:n], wf)
                T.reduce_absmax(amax[0:n], xf[0:n])
                T.vector_work([amax[0:n]], [sf_ub[0:n, 0:groups], inv[0:n]],
                              simple=7 * n * T.ceildiv(groups, 64), label="scales")
                T.mul(xf[0:n], xf[0:n], inv[0:n])
                T.cast(q_ub[0:n], xf[0:n])
            T.copy(q_ub[0:n], out[t0:t0 + n])
            T.copy(sf_ub[0:n, 0:groups], out_sf[t0:t0 + n])
