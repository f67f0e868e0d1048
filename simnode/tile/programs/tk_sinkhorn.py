"""TileKernels' manifold hyper-connection Sinkhorn normalization, forward
(``mhc_sinkhorn_fwd``, Ascend kernel ``tile_kernels/mhc/sinkhorn_asc.py``) as a tile program:
for every token a ``mhc x mhc`` (4 x 4) FP32 matrix: a row softmax plus eps, then ``repeat``
alternations of column and row normalization.

Structure as the Ascend kernel: a pure vector kernel; 4 tokens (one 64-lane vector register
of 4 x 4 x 4) per iteration of a 4-stage ``T.Persistent`` loop (``token_block_size=4``, as
the Ascend wrapper passes). The vector function is given by the kernel's instruction count
(``T.vector_work``), since its work is register shuffles the tile ops do not name: 19
instructions that build the lane masks and indices, the softmax (5 for the row max, one
``vexpdif``, 5 for the row sum, one ``vdiv``, one ``vadds``), the first column step (a
transpose ``vselr``, 5 for the sums, ``vadds``, ``vdiv``, ``vselr``), then per further
repetition 12 simple instructions and 2 divisions. Shape: TileKernels' test, 2 x 4096
tokens, mhc 4, repeat 10 (tests/mhc/test_sinkhorn.py).
"""

import simnode.tile.lang as T

BLOCK = 4                      # tokens per vector register (token_block_size)


@T.program
def sinkhorn(num_tokens: int = T.param(8192, "tokens (n0 x n1)", min=1),
             mhc: int = T.param(4, "hyper-connection width (matrices are mhc x mhc)", (4,)),
             repeat: int = T.param(10, "normalization rounds", min=1),
             num_stages: int = T.param(4, "UB buffering stages", min=1)):
    comb = T.tensor("comb_res_mix", (num_tokens, mhc, mhc), "fp32")
    out = T.tensor("comb_res_mix_out", (num_tokens, mhc, mhc), "fp32")
    cores = T.num_vector_cores()
    simple = 19 + (5 + 5 + 1) + (1 + 5 + 1 + 1) + 12 * (repeat - 1)
    div = 1 + 1 + 2 * (repeat - 1)
    T.meta(num_stages=num_stages, vf_simple_instructions=simple, vf_div_instructions=div)
    for core in T.Kernel(cores, vector=True):
        in_ub = T.alloc_ub((BLOCK, mhc, mhc), "fp32")
        out_ub = T.alloc_ub((BLOCK, mhc, mhc), "fp32")
        T.annotate_buffer_versions({in_ub: num_stages, out_ub: num_stages})
        for blk in T.Persistent(T.ceildiv(num_tokens, BLOCK), cores, core, num_stages=num_stages):
            t0 = blk * BLOCK
            n = min(BLOCK, num_tokens - t0)
            T.copy(comb[t0:t0 + n], in_ub[0:n])
            T.vector_work([in_ub[0:n]], [out_ub[0:n]], simple=simple, div=div, special=1,
                          label="sinkhorn")
            T.copy(out_ub[0:n], out[t0:t0 + n])
