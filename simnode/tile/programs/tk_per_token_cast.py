"""TileKernels' per-token FP8 cast (``per_token_cast``, its Ascend kernel
``tile_kernels/quant/per_token_cast_asc.py``) as a tile program: x [tokens, hidden] BF16 ->
out FP8 E4M3 with one UE8M0 scale per 32 channels of a token (packed, power-of-two scales,
the ``round_sf`` + ``use_packed_ue8m0`` configuration that takes the kernel's BF16 path).

Tiling as the Ascend kernel chooses it: a pure vector kernel over every AIV; tiles of
``block_m`` = 32 tokens x ``block_k`` = gcd(1024, hidden) channels walked row-major by
``T.Persistent`` with 2 stages (x and the FP8 output double-buffered in UB). Per tile one
vector function: the |x| max of each 32-channel group, the scale and its inverse (7 vector
instructions per token row, the kernel's ``compute_scale``), x times the inverse and the
cast BF16 -> FP8 (through FP32, as the kernel's two ``vcvt``). Shapes: TileKernels' tests
use 4001 and 8001 tokens and hidden sizes up to 7168 (facts moe-layer 3).
"""

import math

import simnode.tile.lang as T

GROUP = 32            # channels per scale: the Ascend kernel supports 32 only


@T.program
def per_token_cast(num_tokens: int = T.param(4001, "tokens (rows of x)", min=1),
                   hidden: int = T.param(7168, "channels per token (a multiple of 128)", min=128),
                   block_m: int = T.param(32, "tokens per tile", min=1),
                   num_stages: int = T.param(2, "UB buffering stages", min=1)):
    if hidden % 128:
        raise ValueError(f"hidden = {hidden}: the Ascend kernel needs a multiple of 128")
    block_k = math.gcd(1024, hidden)            # the BF16 value path's limit
    groups = block_k // GROUP
    x = T.tensor("x", (num_tokens, hidden), "bf16")
    out = T.tensor("out", (num_tokens, hidden), "fp8")
    out_sf = T.tensor("out_sf", (num_tokens, hidden // GROUP), "e8m0")
    cores = T.num_vector_cores()
    tiles = [T.ceildiv(num_tokens, block_m), hidden // block_k]
    T.meta(block_m=block_m, block_k=block_k, num_stages=num_stages, tiles=tiles[0] * tiles[1])
    for core in T.Kernel(cores, vector=True):
        x_ub = T.alloc_ub((block_m, block_k), "bf16")
        out_ub = T.alloc_ub((block_m, block_k), "fp8")
        sf_ub = T.alloc_ub((block_m, 64), "e8m0")          # the kernel's sf_stride of 64
        amax = T.alloc_reg((block_m, groups), "fp32")
        inv = T.alloc_reg((block_m, groups), "bf16")
        y = T.alloc_reg((block_m, block_k), "bf16")
        T.annotate_buffer_versions({x_ub: num_stages, out_ub: num_stages, sf_ub: num_stages})
        for tm, tk in T.Persistent(tiles, cores, core, num_stages=num_stages):
            t0, c0 = tm * block_m, tk * block_k
            rows = min(block_m, num_tokens - t0)
            T.copy(x[t0:t0 + rows, c0:c0 + block_k], x_ub[0:rows])
            with T.vf("quantize"):
                T.reduce_absmax(amax[0:rows], x_ub[0:rows])
                T.vector_work([amax[0:rows]], [sf_ub[0:rows, 0:groups], inv[0:rows]],
                              simple=7 * rows, label="compute_scale")
                T.mul(y[0:rows], x_ub[0:rows], inv[0:rows])
                T.cast(out_ub[0:rows], y[0:rows])
            T.copy(out_ub[0:rows], out[t0:t0 + rows, c0:c0 + block_k])
            T.copy(sf_ub[0:rows, 0:groups], out_sf[t0:t0 + rows, c0 // GROUP:c0 // GROUP + groups])
