"""FlashAttention forward (MHA and GQA) on 1 AIC + 2 AIVs per core, after TileLang's Ascend
example (``examples/ascend/flash_attention/core.py``; facts moe-layer 4): O = softmax(Q K^T
* scale) V with online softmax on the vector cores.

One block per AI core handles ``q_len / block_q / blocks`` query tiles of ``block_q`` rows
(GQA flattens its query groups into ``q_len = seq_q * group`` against one K/V head). Per
query tile: Q to L1, then a pipelined loop over ``block_kv`` KV blocks whose statements run
at TileLang's fixed stages (``stages: tilelang``, the example's manual schedule
[0,1,1,1,3,5,6,3,6,6,6,7,7]):

- stage 0: K block to L1;  stage 1: Q and K to L0, S = Q K^T on the cube;
- stage 3: S from L0C to both AIVs' UB (dual FixPipe, 64 rows each), V block to L1;
- stage 5: online softmax on each AIV (scale, row max, exp(S - m) with the running max,
  row sums, P to BF16, alpha = exp(m_old - m_new), l = l alpha + rowsum);
- stage 6: P from both UBs to L1 (MTE3), P and V to L0, O_tmp = P V on the cube;
- stage 7: O_tmp to the UBs (dual FixPipe), O = alpha O + O_tmp on the AIVs.

After the loop each AIV divides its O rows by l (and casts to BF16 for GQA) and stores
them. Buffer versions are the example's (K 3, V 3, S 3, P 2, alpha 3, O_tmp 2, both L0C
accumulators 2); ``stages: none`` runs the body in program order (no software pipeline),
to show what the stages buy. FLOPs: 4 q_len kv_len head_dim (two GEMMs).
"""

import math

import simnode.tile.lang as T

STAGES = {"k_load": 0, "qk": 1, "s_out": 3, "softmax": 5, "p_push": 6, "v_load": 3, "pv": 6,
          "o_acc": 7}


def cube_step(a_l1, b_l1, a_l0, b_l0, acc):
    """acc = A B^T on the cube, both operands moved L1 -> L0A / L0B first (MTE1)."""
    T.copy(a_l1, a_l0)
    T.copy(b_l1, b_l0)
    T.gemm(a_l0, b_l0, acc, transpose_B=True, clear_accum=True)


@T.program
def flash_attention(seq_q: int = T.param(4096, "query rows per query head group", min=1),
                    group: int = T.param(1, "query heads per KV head (1 = MHA)", min=1),
                    seq_kv: int = T.param(4096, "keys and values", min=1),
                    head_dim: int = T.param(128, "head dimension", (128,)),
                    block_q: int = T.param(128, "query rows per tile", min=2),
                    block_kv: int = T.param(128, "keys per KV block (2 x 64 fp32 lanes)", (128,)),
                    num_stages: int = T.param(3, "T.Pipelined num_stages of the KV loop", min=1),
                    out_dtype: str = T.param("fp32", "dtype of O (MHA fp32, GQA bf16)", ("fp32", "bf16")),
                    blocks: int = T.param(0, "AI cores used (0 = as many as tiles, up to all)", min=0),
                    stages: str = T.param("tilelang", "tilelang: the example's stages; none: program order",
                                          ("tilelang", "none"))):
    q_len = seq_q * group
    br, bc, d = block_q, block_kv, head_dim
    rows = br // 2                                     # rows per AIV
    if q_len % br or seq_kv % bc:
        raise ValueError(f"q_len {q_len} and seq_kv {seq_kv} must be multiples of block_q {br} "
                         f"and block_kv {bc} (the example's constraint)")
    m_tiles, kv_blocks = q_len // br, seq_kv // bc
    nb = blocks or min(T.num_ai_cores(), m_tiles)
    if m_tiles % nb:
        raise ValueError(f"{m_tiles} query tiles do not divide evenly over {nb} blocks")
    per_block = m_tiles // nb
    scale = 1.0 / math.sqrt(d)
    Q = T.tensor("Q", (q_len, d), "bf16")
    K = T.tensor("K", (seq_kv, d), "bf16")
    V = T.tensor("V", (seq_kv, d), "bf16")
    O = T.tensor("O", (q_len, d), out_dtype)
    T.meta(q_len=q_len, kv_len=seq_kv, tiles_per_block=per_block, kv_blocks=kv_blocks,
           stages=stages)
    at = STAGES if stages == "tilelang" else {k: 0 for k in STAGES}
    for bx in T.Kernel(nb):
        q_l1 = T.alloc_l1((br, d), "bf16")
        k_l1 = T.alloc_l1((bc, d), "bf16")
        v_l1 = T.alloc_l1((d, bc), "bf16")
        p_l1 = T.alloc_l1((br, bc), "bf16")
        qk_a = T.alloc_l0a((br, d), "bf16")
        qk_b = T.alloc_l0b((bc, d), "bf16")
        pv_a = T.alloc_l0a((br, bc), "bf16")
        pv_b = T.alloc_l0b((d, bc), "bf16")
        qk_acc = T.alloc_l0c((br, bc), "fp32")
        pv_acc = T.alloc_l0c((br, d), "fp32")
        s_ub = T.alloc_ub((rows, bc), "fp32")
        p_ub = T.alloc_ub((rows, bc), "bf16")
        o_tmp = T.alloc_ub((rows, d), "fp32")
        o_ub = T.alloc_ub((rows, d), "fp32")
        o_cast = T.alloc_ub((rows, d), "bf16") if out_dtype != "fp32" else None
        m_ub = T.alloc_ub((rows, 1), "fp32")
        l_ub = T.alloc_ub((rows, 1), "fp32")
        alpha = T.alloc_ub((rows, 1), "fp32")
        old_m = T.alloc_ub((rows, 1), "fp32")
        rowmax = T.alloc_reg((rows, 1), "fp32")
        rowsum = T.alloc_reg((rows, 1), "fp32")
        e = T.alloc_reg((rows, bc), "fp32")
        T.annotate_buffer_versions({k_l1: 3, v_l1: 3, qk_acc: 2, pv_acc: 2, s_ub: 3, p_ub: 2,
                                    alpha: 3, o_tmp: 2})
        for lm in range(per_block):
            mt = bx * per_block + lm
            T.copy(Q[mt * br:(mt + 1) * br], q_l1)
            with T.vf("init m, l"):
                T.fill(m_ub, float("-inf"))
                T.fill(l_ub, 0.0)
            with T.vf("clear O"):
                T.fill(o_ub, 0.0)
            for kv in T.Pipelined(kv_blocks, num_stages=num_stages):
                with T.stage(at["k_load"]):
                    T.copy(K[kv * bc:(kv + 1) * bc], k_l1)
                with T.stage(at["qk"]):
                    cube_step(q_l1, k_l1, qk_a, qk_b, qk_acc)      # S = Q K^T
                with T.stage(at["s_out"]):
                    T.dual_copy(qk_acc, s_ub)
                with T.stage(at["softmax"]):
                    with T.vf("softmax"):
                        T.mov(old_m, m_ub)
                        T.mul(s_ub, s_ub, scale)
                        T.reduce_max(rowmax, s_ub)
                        T.max(m_ub, rowmax, old_m)
                        T.exp(e, s_ub, sub=m_ub)           # vexpdif: exp(s - m)
                        T.reduce_sum(rowsum, e)
                        T.cast(p_ub, e)
                        T.exp(alpha, old_m, sub=m_ub)
                        T.fma(l_ub, l_ub, alpha, rowsum)
                with T.stage(at["p_push"]):
                    T.dual_copy(p_ub, p_l1)
                with T.stage(at["v_load"]):
                    T.copy(V[kv * bc:(kv + 1) * bc], v_l1, transpose=True)
                with T.stage(at["pv"]):
                    cube_step(p_l1, v_l1, pv_a, pv_b, pv_acc)      # O_tmp = P V (V^T in L1)
                with T.stage(at["o_acc"]):
                    T.dual_copy(pv_acc, o_tmp)
                    with T.vf("accumulate O"):
                        T.mul(o_ub, o_ub, alpha)
                        T.add(o_ub, o_ub, o_tmp)
            with T.vf("normalize O"):
                T.div(o_ub, o_ub, l_ub)
            if o_cast is not None:
                with T.vf("cast O"):
                    T.cast(o_cast, o_ub)
                T.dual_copy(o_cast, O[mt * br:(mt + 1) * br])
            else:
                T.dual_copy(o_ub, O[mt * br:(mt + 1) * br])
