"""DeepGEMM-Ascend's dense GEMM C = A x B as a tile program (facts 3.5), beside the
hand-written schedule (``simnode.kernels.gemm``) as a cross-check.

The host side is shared: the tile heuristic (``choose_tiling``: BLOCK_M/N/K, the L0 K step,
L1 stages, the L0C sub-tiles) and the swizzled block order are DeepGEMM's choices, not the
kernel's. The kernel is written here: per output block, a pipelined K loop loads the A and
B tiles (and their MX scales for fp8/fp4) into L1 with ``l1_stages`` versions; an inner
2-stage loop moves each L0 K step into L0A/L0B (two L0 stages, facts 3.5) and accumulates
each MAD sub-tile in its own half of L0C, so FixPipe drains one half while the cube fills
the other. No flag is written: the language derives them from the buffers.
"""

import simnode.tile.lang as T
from simnode.kernels.gemm import GemmParams, block_order, choose_tiling

SCALE_K = 32        # one UE8M0 scale byte per 32 K-elements per row (facts 1.1, S3)


@T.program
def gemm(m: int = T.param(doc="rows of A and C", min=1),
         n: int = T.param(doc="columns of B and C", min=1),
         k: int = T.param(doc="reduction length", min=1),
         dtype: str = T.param("bf16", "input dtype of A and B", ("bf16", "fp16", "fp8", "fp4")),
         out_dtype: str = T.param("bf16", "dtype of C", ("bf16", "fp16", "fp32")),
         block_m: int = T.param(0, "BLOCK_M (0 = heuristic)", min=0),
         block_n: int = T.param(0, "BLOCK_N (0 = heuristic)", min=0),
         block_k: int = T.param(0, "BLOCK_K per L1 stage (0 = heuristic)", min=0),
         l1_stages: int = T.param(0, "L1 buffering stages (0 = heuristic)", min=0),
         swizzle_rows: int = T.param(4, "block-rows per swizzle group", min=1),
         num_cores: int = T.param(0, "AI cores used (0 = all)", min=0)):
    p = GemmParams(m, n, k, dtype, out_dtype, block_m, block_n, block_k, l1_stages,
                   swizzle_rows, num_cores)
    t = choose_tiling(T.chip(), p)
    order = block_order(t, p)
    scaled = dtype in ("fp8", "fp4")
    bm, bn, bk, kl0 = t.block_m, t.block_n, t.block_k, t.k_l0
    A = T.tensor("A", (m, k), dtype)
    B = T.tensor("B", (k, n), dtype)
    C = T.tensor("C", (m, n), out_dtype)
    if scaled:
        SA = T.tensor("SA", (m, T.ceildiv(k, SCALE_K)), "e8m0")
        SB = T.tensor("SB", (T.ceildiv(k, SCALE_K), n), "e8m0")
    cores = min(t.num_cores, len(order))
    T.meta(m=m, n=n, k=k, dtype=dtype, block_m=bm, block_n=bn, block_k=bk, k_l0=kl0,
           l1_stages=t.l1_stages, sub_tile=f"{t.sub_m}x{t.sub_n}", num_blocks=len(order),
           waves=T.ceildiv(len(order), t.num_cores))
    kb_count = T.ceildiv(k, bk)
    for bx in T.Kernel(cores):
        a_l1 = T.alloc_l1((bm, bk), dtype)
        b_l1 = T.alloc_l1((bk, bn), dtype)
        stage_bufs = {a_l1: t.l1_stages, b_l1: t.l1_stages}
        if scaled:
            sa_l1 = T.alloc_l1((bm, bk // SCALE_K), "e8m0")
            sb_l1 = T.alloc_l1((bk // SCALE_K, bn), "e8m0")
            stage_bufs.update({sa_l1: t.l1_stages, sb_l1: t.l1_stages})
        else:
            sa_l1 = sb_l1 = None
        T.annotate_buffer_versions(stage_bufs)
        a_l0 = T.alloc_l0a((bm, kl0), dtype, versions=2)
        b_l0 = T.alloc_l0b((kl0, bn), dtype, versions=2)
        c_l0 = T.alloc_l0c((2, t.sub_m, t.sub_n), "fp32")     # the two halves of L0C
        half = 0
        for mb, nb in order[bx::t.num_cores]:
            rows, cols = min(bm, m - mb * bm), min(bn, n - nb * bn)
            subs = _sub_tiles(rows, cols, t)
            halves = [(half + i) % 2 for i in range(len(subs))]
            half += len(subs)
            views = {}          # tile views per K length: built once, reused by every K step
            for kb in T.Pipelined(kb_count, num_stages=t.l1_stages):
                k0 = kb * bk
                kk = min(bk, k - k0)
                if kk not in views:
                    views[kk] = _views(kk, rows, cols, subs, halves, a_l1, b_l1, a_l0, b_l0, c_l0,
                                       (sa_l1, sb_l1) if scaled else None, kl0)
                a_st, b_st, sa_st, sb_st, steps = views[kk]
                T.copy(A[mb * bm:mb * bm + rows, k0:k0 + kk], a_st)
                T.copy(B[k0:k0 + kk, nb * bn:nb * bn + cols], b_st)
                if scaled:
                    s0, ks = k0 // SCALE_K, T.ceildiv(kk, SCALE_K)
                    T.copy(SA[mb * bm:mb * bm + rows, s0:s0 + ks], sa_st)
                    T.copy(SB[s0:s0 + ks, nb * bn:nb * bn + cols], sb_st)
                for j in T.Pipelined(len(steps), num_stages=2):
                    a_src, a_dst, b_src, b_dst, sc_src, mads = steps[j]
                    T.copy(a_src, a_dst)
                    T.copy(b_src, b_dst)
                    sc = T.load_mx_scales(*sc_src) if scaled else None
                    first = kb == 0 and j == 0
                    for a_op, b_op, c_op in mads:
                        T.gemm(a_op, b_op, c_op, clear_accum=first, scales=sc)
            for i, (r0, c0, sm, sn) in enumerate(subs):
                T.copy(c_l0[halves[i], 0:sm, 0:sn],
                       C[mb * bm + r0:mb * bm + r0 + sm, nb * bn + c0:nb * bn + c0 + sn])


def _views(kk, rows, cols, subs, halves, a_l1, b_l1, a_l0, b_l0, c_l0, scales, kl0):
    """The L1 stage tiles of one K step of ``kk``, and per L0 step its L1 -> L0 copies, its
    MX scale tiles and its MADs (one per sub-tile, each into its own L0C half)."""
    steps = []
    for j0 in range(0, kk, kl0):
        kl = min(kl0, kk - j0)
        sc = None
        if scales is not None:
            q0, qs = j0 // SCALE_K, T.ceildiv(kl, SCALE_K)
            sc = (scales[0][0:rows, q0:q0 + qs], scales[1][q0:q0 + qs, 0:cols])
        mads = [(a_l0[r0:r0 + sm, 0:kl], b_l0[0:kl, c0:c0 + sn], c_l0[halves[i], 0:sm, 0:sn])
                for i, (r0, c0, sm, sn) in enumerate(subs)]
        steps.append((a_l1[0:rows, j0:j0 + kl], a_l0[0:rows, 0:kl], b_l1[j0:j0 + kl, 0:cols],
                      b_l0[0:kl, 0:cols], sc, mads))
    ks = T.ceildiv(kk, SCALE_K)
    sa = scales[0][0:rows, 0:ks] if scales is not None else None
    sb = scales[1][0:ks, 0:cols] if scales is not None else None
    return a_l1[0:rows, 0:kk], b_l1[0:kk, 0:cols], sa, sb, steps


def _sub_tiles(rows, cols, t):
    """MAD sub-tiles (row, column, rows, columns) of one (edge) block, one per L0C half."""
    if t.sub_m < t.block_m:
        top = min(rows, t.sub_m)
        return [(0, 0, top, cols)] + ([(top, 0, rows - top, cols)] if rows > top else [])
    if t.sub_n < t.block_n:
        left = min(cols, t.sub_n)
        return [(0, 0, rows, left)] + ([(0, left, rows, cols - left)] if cols > left else [])
    return [(0, 0, rows, cols)]
