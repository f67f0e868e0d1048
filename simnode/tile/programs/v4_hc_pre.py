"""DeepSeek-V4's fused mHC pre-processing (``HcPre``) on the 950 as a tile program: CANN
recipes' ``npu_hc_pre`` (hicann/cann-recipes-infer @fbc225d2, ops/ascendc/src/hc_pre,
``__DAV_C310__`` path, tiling key 1000 "M-K split", the one decode runs), called twice per
layer by models/deepseek_v4 (modeling_deepseek.py, before attention and before the FFN).

For each token the residual holds ``lanes`` (4) copies of the hidden row, x [T, 4, hidden]
BF16. The op computes mixes = (x_flat . hc_fn^T) x rsqrt(mean(x_flat^2) + eps) with hc_fn
[24, 4 hidden] FP32 (24 = 4 pre + 4 post + 16 comb), then pre = sigmoid(.) + eps, post =
2 sigmoid(.), comb = Sinkhorn(20 rounds) of the 4 x 4 comb matrix, and y = sum over lanes of
pre x x (BF16 [T, hidden]); it returns y, post [T, 4] and comb [T, 4, 4] (both FP32).
``head`` is the model's ``hc_head`` before the LM head in this kernel's form: the 4 pre mixes
alone, their gate and the lane sum (no post, comb or Sinkhorn); ``mode`` the mix GEMM's cube
mode (HF32 in npu_hc_pre; FP32 for a plain FP32 linear).

One kernel, two parts separated by an all-core barrier (``SyncAll<false>``):

1. The mix GEMM, split over K: every AI core takes a K slice (of 4 hidden) of all tokens
   (``m_dim`` row groups x ``k_blocks`` slices <= 32 cores). Per K chunk its two AIVs each load
   half the token rows of x (BF16), cast them to FP32, add up their squares and lay them out
   for the cube (ND2NZ), and push them UB -> L1; the AIC loads the hc_fn slice (FP32) into
   L1 and multiplies in HF32 mode (``SetHF32Mode(1)``), writing the partial mixes [rows, 24]
   to a GM workspace; each AIV writes its partial sums of squares.
2. Per token, on ``ceil(T / ceil(T / 64))`` AIVs: sum the K slices' partials, rsqrt, the
   sigmoid gates, y from a second read of x, and the Sinkhorn, ``row_factor`` tokens at a
   time as UB allows (~2 tokens of 4 x 4096 BF16).

The time at a few tokens is a chain: part 1's strip load, two VFs, the UB -> L1 push, the
HF32 MMADs at m < 64 and the FixPipe, the barrier, then part 2's loads and five VFs one after
another, the Sinkhorn's 20 dependent rounds (~1.75 us on one AIV) the longest. More tokens
per AIV add part-2 rounds (each with its own Sinkhorn call), the weighted sum's VF work and
part 1's strips.

Stand-ins for what simnode's tile language does not have (told to the lead; each also a
comment where used):
- FP32 operands are held as pairs of BF16 elements (same bytes in every copy: simnode's UB
  pools are typed, and part 1's FP32 strips share the BF16 pool with part 2's rows, as the
  kernel's two TPipes share UB); the MMADs read them in HF32 mode (``T.gemm(mode="hf32")``),
  at the chip's HF32 rate (facts ascend950 1.2, S1/S8: FP32 256 FMA/cycle with HF32 off,
  HF32 ~2x) over the true K, so the result's FLOPs are the mix GEMM's own.
- no all-core barrier: part 2 on an AIV waits for its own core's part 1, through a 32 B
  FixPipe from L0C into both AIVs' UB after the workspace write (one FixPipe's latency,
  ~55 cycles, as the barrier's price; no public figure for the 950's FFTS barrier). Every
  core runs the same part-1 work, so the slowest core is the one a real barrier waits for.
- VFs are priced by the chip's VF model through ``mhc_vf`` (instruction counts and chains).
"""

import simnode.tile.lang as T
from simnode import units
from simnode.tile.programs import mhc_vf as V

M_L1_MAX = 256          # CR hc_pre_tiling_arch35.cpp: M_L1_MAX_SIZE
K_SPLIT_BASE = 256      # K_MULIT_CORE_SPLIT_BASE_SIZE
A_L1_ELEMS = 128 * 256  # A_L1_SIZE (fp32 elements of x per L1 buffer)
K_L1_MAX = 1024         # K_L1_MAX_SIZE
BLOCK_CUBE = 16


def _ceil(a, b):
    return -(-a // b)


def _up(a, b):
    return _ceil(a, b) * b


def _row_factor(rows_per_aiv, k_blocks, lanes, hidden, mix, ub):
    """CalcMKSplitCorePart2Tiling: the most tokens one part-2 round holds in UB (double-buffered
    x, y, partials, post and comb), hidden loaded whole."""
    la, ma = _up(lanes, 8), _up(mix, 8)

    def need(r):
        return (k_blocks * r * ma * 4 * 2 + r * ma * 4 + k_blocks * _up(r, 8) * 4 * 2
                + r * lanes * _up(hidden, 16) * 2 * 2 + r * _up(hidden, 16) * 2 * 2
                + r * la * 4 * 2 + r * lanes * lanes * 4 * 2 + la * 4 * 2 + lanes * la * 4)
    if need(1) > ub:
        raise ValueError(f"hidden = {hidden}: one token does not fit UB ({ub} B); the kernel "
                         f"then splits the hidden row (dLoop > 1), which is not modeled")
    r = 1
    while r < rows_per_aiv and need(r + 1) <= ub:
        r += 1
    return r


@T.program
def hc_pre(num_tokens: int = T.param(360, "tokens on this chip (b x s)", min=1),
           hidden: int = T.param(4096, "hidden size (V4-Flash 4096, V4-Pro 7168)", min=64),
           lanes: int = T.param(4, "mHC lanes (hc_mult)", (4,)),
           iters: int = T.param(20, "Sinkhorn rounds (hc_sinkhorn_iters)", min=1),
           ub_KiB: int = T.param(248, "UB the tiling may plan with, per AIV", min=64),
           head: bool = T.param(False, "the model's hc_head before the LM head: the lanes' pre "
                                "weights alone (mix = lanes) and their weighted sum, no post, "
                                "comb or Sinkhorn"),
           mode: str = T.param("hf32", "the mix GEMM's cube mode: hf32 (npu_hc_pre's "
                               "SetHF32Mode(1)) or fp32 (HF32 off)", ("hf32", "fp32"))):
    # UB the host tiling plans with: GetCoreMemSize(UB) is not published for the 950;
    # TileKernels' and DeepSelect's Ascend configs use 248 KB (facts moe-layer 3)
    ub = units.KiB_to_bytes(ub_KiB)
    if hidden % 64:
        raise ValueError(f"hidden = {hidden}: a multiple of 64 (one vector register of FP32)")
    t, k, mix = num_tokens, lanes * hidden, lanes if head else (2 + lanes) * lanes
    cores, aivs = T.num_ai_cores(), T.num_vector_cores()
    # -- CalcOpTiling (CR hc_pre_tiling_arch35.cpp) --
    m_dim = min(cores, _ceil(t, M_L1_MAX))
    k_dim = cores // m_dim
    if k_dim == 1:
        raise ValueError(f"num_tokens = {t}: the kernel switches to its M-split template "
                         f"(tiling key 1001) above {M_L1_MAX * (cores // 2)} tokens; not modeled")
    split_k = _up(_ceil(k, k_dim), K_SPLIT_BASE)
    k_blocks = _ceil(k, split_k)
    single_m = _up(_ceil(t, m_dim), BLOCK_CUBE)
    m_l1 = min(M_L1_MAX, single_m)
    k_l1 = min(A_L1_ELEMS // m_l1, K_L1_MAX) // 128 * 128
    k_ub = k_l1 // 2
    m_ub = _ceil(m_l1, 2)
    # -- CalcMKSplitCorePart2Tiling --
    per_aiv = _ceil(t, aivs)
    used2 = _ceil(t, per_aiv)
    # part 2 plans with what part 1's FP32 strips leave: the kernel's two TPipes share all of
    # UB, simnode's typed pools only bytes of one type (part 1's BF16 strips fit in part 2's)
    p1_32 = [m_ub * _up(k_ub, 8), _up(m_ub, 8)]
    rf = _row_factor(per_aiv, k_blocks, lanes, hidden, mix, ub - 4 * sum(p1_32))
    chip = T.chip()
    m_align = _up(m_l1, BLOCK_CUBE)
    base_k = (256 // max(m_align, _up(mix, BLOCK_CUBE))) * 32     # Process(): baseK, FP32 elements
    sink = 0 if head else round(V.sinkhorn(min(rf, per_aiv), iters).cycles(chip))
    T.meta(template="M-K split (tiling key 1000)", m_dim=m_dim, k_blocks=k_blocks, split_k=split_k,
           k_l1=k_l1, k_ub=k_ub, base_k=base_k, part1_cores=m_dim * k_blocks, part2_aivs=used2,
           tokens_per_aiv=per_aiv, row_factor=rf, part2_rounds=_ceil(per_aiv, rf),
           sinkhorn_cycles=sink, mix_gemm_flops=2.0 * t * mix * k)

    x = T.tensor("x", (t, k), "bf16")                   # the residual lanes [T, 4, hidden]
    hc_fn = T.tensor("hc_fn", (mix, 2 * k), "bf16")      # FP32 [24, 4 hidden] as BF16 pairs
    hc_base = T.tensor("hc_base", (mix,), "fp32")
    y = T.tensor("y", (t, hidden), "bf16")
    post = None if head else T.tensor("post", (t, lanes), "fp32")
    comb = None if head else T.tensor("comb", (t, lanes * lanes), "fp32")
    mm_ws = T.tensor("mix_partials", (k_blocks, t, mix), "fp32")     # the GM workspace
    rms_ws = T.tensor("sumsq_partials", (k_blocks, t), "fp32")

    # UB is shared by the two parts (two TPipes): one BF16 and one FP32 pool per AIV, carved
    # per part (regions, so the parts' uses of the same bytes order themselves)
    p1_16 = [2 * m_ub * k_ub, 2 * _up(m_ub, 8) * 2 * k_ub]
    p2_16 = [2 * rf * k, 2 * rf * hidden]
    p2_32 = [lanes, lanes, lanes * lanes, 2 * k_blocks * rf * mix, 2 * k_blocks * rf, rf * mix,
             2 * rf * lanes, 2 * rf * lanes * lanes]
    n16, n32 = max(sum(p1_16), sum(p2_16)), max(sum(p1_32), sum(p2_32))

    for c in T.Kernel(cores):
        a_l1 = T.alloc_l1((m_align, 2 * k_l1), "bf16", versions=2)     # x in FP32 (NZ)
        b_l1 = T.alloc_l1((mix, 2 * k_l1), "bf16", versions=2)         # hc_fn slice, FP32
        a_l0 = T.alloc_l0a((m_align, 2 * base_k), "bf16", versions=2)
        b_l0 = T.alloc_l0b((mix, 2 * base_k), "bf16", versions=2)
        c_l0 = T.alloc_l0c((m_align, mix), "fp32")
        u16 = T.alloc_ub((n16,), "bf16")
        u32 = T.alloc_ub((n32,), "fp32")
        if c < m_dim * k_blocks:
            _part1(c, t, k, mix, k_blocks, split_k, m_l1, k_l1, k_ub, base_k, mode,
                   x, hc_fn, mm_ws, rms_ws, a_l1, b_l1, a_l0, b_l0, c_l0,
                   _carve(u16, p1_16), _carve(u32, p1_32))
        # part 2 (after the barrier): AIV a = 2c + sid takes tokens [a per_aiv, ...)
        for sid in T.Vector():
            a = c * 2 + sid
            if a < used2:
                rows = min(per_aiv, t - a * per_aiv)
                _part2(a * per_aiv, rows, rf, lanes, hidden, mix, k_blocks, iters,
                       x, hc_base, y, post, comb, mm_ws, rms_ws,
                       _carve(u16, p2_16), _carve(u32, p2_32))


def _carve(buf, sizes):
    """Consecutive regions of a 1-D UB pool, from its start."""
    out, at = [], 0
    for n in sizes:
        out.append(buf[at:at + n])
        at += n
    return out


def _half(region, n, i):
    """Slot ``i`` of ``n`` equal slots of a 1-D region, as a region."""
    size = region.n // n
    return region.obj[region.lo + i * size:region.lo + (i + 1) * size]


def _head(region, n):
    return region.obj[region.lo:region.lo + n]


def _part1(c, t, k, mix, k_blocks, split_k, m_l1, k_l1, k_ub, base_k, mode,
           x, hc_fn, mm_ws, rms_ws, a_l1, b_l1, a_l0, b_l0, c_l0, u16, u32):
    """One AI core's K slice of the mix GEMM (HcPreMKSplitCorePart1::Process)."""
    x_slots, nz_slots = u16
    xf, ss = u32
    m_blk, k_blk = divmod(c, k_blocks)
    t0 = m_blk * m_l1                   # one m round per core at decode sizes (m_l1 >= T / m_dim)
    m = min(m_l1, t - t0)
    k_lo, k_hi = k_blk * split_k, min(k, (k_blk + 1) * split_k)
    halves = [(0, m // 2), (m // 2, m - m // 2)]        # aiv0 and aiv1: their token rows
    steps = [0, 0]                                      # each AIV's strip count (buffer parity)
    for j, kg in enumerate(range(k_lo, k_hi, k_l1)):
        kk = min(k_l1, k_hi - kg)
        T.copy(hc_fn[0:mix, 2 * kg:2 * (kg + kk)], b_l1[0:mix, 0:2 * kk])
        for sid in T.Vector():
            r0, rr = halves[sid]
            if rr == 0:
                continue
            for s0 in range(0, kk, k_ub):
                kr = min(k_ub, kk - s0)
                p = steps[sid] % 2
                steps[sid] += 1
                xs = _head(_half(x_slots, 2, p), rr * kr)
                nz = _head(_half(nz_slots, 2, p), rr * 2 * kr)
                xc = _head(xf, rr * kr)
                first = j == 0 and s0 == 0
                T.copy(x[t0 + r0:t0 + r0 + rr, kg + s0:kg + s0 + kr], xs)
                V.issue(V.cast_sumsq(rr, kr, first), [xs] + ([] if first else [_head(ss, rr)]),
                        [xc, _head(ss, rr)])
                V.issue(V.nd2nz(rr, kr), [xc], [nz])
                T.copy(nz, a_l1[r0:r0 + rr, 2 * s0:2 * (s0 + kr)])
        for i0 in range(0, kk, base_k):
            kb = min(base_k, kk - i0)
            T.copy(a_l1[0:m, 2 * i0:2 * (i0 + kb)], a_l0[0:m, 0:2 * kb])
            T.copy(b_l1[0:mix, 2 * i0:2 * (i0 + kb)], b_l0[0:mix, 0:2 * kb])
            # HF32 (SetHF32Mode(1)) or FP32 over the kb FP32 values of the BF16 pairs; m < 64
            # rows cost as 64 (the chip's saturating_m_rows, measured for BF16 MMADs; no source
            # for FP32 / HF32, taken alike)
            T.gemm(a_l0[0:m, 0:2 * kb], b_l0[0:mix, 0:2 * kb], c_l0[0:m, 0:mix],
                   transpose_B=True, clear_accum=(j == 0 and i0 == 0), mode=mode)
    T.copy(c_l0[0:m, 0:mix], mm_ws[k_blk, t0:t0 + m, 0:mix])
    for sid in T.Vector():
        r0, rr = halves[sid]
        if rr:
            T.copy(_head(ss, rr), rms_ws[k_blk, t0 + r0:t0 + r0 + rr])
    # the barrier's stand-in: part 2's first load on each AIV overwrites these 8 floats
    w = min(16, mix)
    T.dual_copy(c_l0[0:1, 0:w], _head(u32[0], w // 2))


def _part2(t0, rows, rf, lanes, hidden, mix, k_blocks, iters,
           x, hc_base, y, post, comb, mm_ws, rms_ws, u16, u32):
    """One AIV's tokens after the barrier (HcPreMKSplitCorePart2::Process)."""
    x_slots, y_slots = u16
    base0, base1, base2, mm_slots, ss_slots, mixes, post_slots, comb_slots = u32
    k = lanes * hidden
    # hc_scale's three floats are scalar GM reads (GetValue) in the kernel: not modeled
    T.copy(hc_base[0:lanes], base0)
    if post is not None:
        T.copy(hc_base[lanes:2 * lanes], base1)
        T.copy(hc_base[2 * lanes:mix], base2)
    for i, r0 in enumerate(range(0, rows, rf)):
        r, p = min(rf, rows - r0), i % 2
        ta = t0 + r0
        mm = _head(_half(mm_slots, 2, p), k_blocks * r * mix)
        ss = _head(_half(ss_slots, 2, p), k_blocks * r)
        mx = _head(mixes, r * mix)
        T.copy(mm_ws[0:k_blocks, ta:ta + r, 0:mix], mm)
        T.copy(rms_ws[0:k_blocks, ta:ta + r], ss)
        V.issue(V.inv_rms(r, k_blocks), [mm, ss], [mx])
        V.issue(V.gate(r, "hc_pre: pre = sigmoid"), [mx, base0], [mx])
        xs = _head(_half(x_slots, 2, p), r * k)
        ys = _head(_half(y_slots, 2, p), r * hidden)
        # x again: simnode's L2 names a region by its exact slice, so this re-read of part 1's
        # strips counts as HBM traffic (11.8 MB at 360 tokens would still sit in the 128 MB L2)
        T.copy(x[ta:ta + r, 0:k], xs)
        V.issue(V.weighted_sum(r, lanes, hidden), [xs, mx], [ys])
        T.copy(ys, y[ta:ta + r, 0:hidden])
        if post is None:
            continue                        # hc_head: y alone
        ps = _head(_half(post_slots, 2, p), r * lanes)
        V.issue(V.gate(r, "hc_pre: post = 2 sigmoid", unaligned=True), [mx, base1], [ps])
        T.copy(ps, post[ta:ta + r, 0:lanes])
        cs = _head(_half(comb_slots, 2, p), r * lanes * lanes)
        V.issue(V.sinkhorn(r, iters), [mx, base2], [cs])
        T.copy(cs, comb[ta:ta + r, 0:lanes * lanes])
