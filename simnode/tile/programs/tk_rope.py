"""TileKernels' rotary embedding (``apply_rotary``, Ascend kernel
``tile_kernels/transform/rope_asc.py``) as a tile program: x [batch, seqlen, nheads,
rot_dim] BF16 rotated in place by a [seqlen, rot_dim] FP32 cos|sin cache (rot_dim 64, the
NeoX halves layout, positions equal to the token index).

Tiling as the Ascend kernel chooses it: a pure vector kernel; ``block_tokens`` tokens per
tile, the largest power of two with 3 stages of (the tile's heads + its cos|sin rows) in
248 KiB of UB (facts moe-layer 3), capped at 64; ``T.Persistent`` over the token blocks with
3 stages. One vector function per tile: x to FP32, x*cos + rotate(x)*sin (one multiply and
one multiply-add per element, the kernel's ``vmul`` / ``vmula``), back to BF16 in place.
Shape: TileKernels' RoPE benchmark, batch 1, seqlen 8192, rot_dim 64, nheads 1 to 128.
"""

import simnode.tile.lang as T

UB_BYTES = 248 * 1024         # TileKernels' UB budget per vector core (facts moe-layer 3)


@T.program
def rope(batch: int = T.param(1, "batch", min=1),
         seqlen: int = T.param(8192, "tokens per sequence", min=1),
         nheads: int = T.param(64, "heads rotated per token", min=1),
         rot_dim: int = T.param(64, "rotary dimension", (64, 128)),
         num_stages: int = T.param(3, "UB buffering stages", min=1)):
    row_bytes = nheads * rot_dim * 2 + rot_dim * 4
    fit = min(64, UB_BYTES // (num_stages * row_bytes))
    if fit < 1:
        raise ValueError(f"one token of {nheads} heads ({row_bytes} B) x {num_stages} stages "
                         f"exceeds the UB budget of {UB_BYTES} B")
    bt = 1 << (fit.bit_length() - 1)
    x = T.tensor("x", (batch, seqlen, nheads, rot_dim), "bf16")
    cos_sin = T.tensor("cos_sin", (seqlen, rot_dim), "fp32")
    cores = T.num_vector_cores()
    blocks = [batch, T.ceildiv(seqlen, bt)]
    T.meta(block_tokens=bt, num_stages=num_stages)
    for core in T.Kernel(cores, vector=True):
        x_ub = T.alloc_ub((bt, nheads, rot_dim), "bf16")
        cs_ub = T.alloc_ub((bt, rot_dim), "fp32")
        xf = T.alloc_reg((bt, nheads, rot_dim), "fp32")
        y = T.alloc_reg((bt, nheads, rot_dim), "fp32")
        T.annotate_buffer_versions({x_ub: num_stages, cs_ub: num_stages})
        for bi, tb in T.Persistent(blocks, cores, core, num_stages=num_stages):
            t0 = tb * bt
            n = min(bt, seqlen - t0)
            T.copy(x[bi, t0:t0 + n], x_ub[0:n], l2="NOTALLOC_KEEP")
            T.copy(cos_sin[t0:t0 + n], cs_ub[0:n])
            with T.vf("rotate"):
                T.cast(xf[0:n], x_ub[0:n])
                T.mul(y[0:n], xf[0:n], cs_ub[0:n])        # x * cos
                T.fma(y[0:n], xf[0:n], cs_ub[0:n], y[0:n])  # + rotate(x) * sin
                T.cast(x_ub[0:n], y[0:n])
            T.copy(x_ub[0:n], x[bi, t0:t0 + n])
