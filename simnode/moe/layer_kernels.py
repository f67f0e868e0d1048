"""A MoE layer's compute kernels on one rank, as tasks the supernode clock replays.

``expert_kernels(chip, p, counts, gemm_cores, vec_cores, shared)`` gives the three kernels of
the experts a rank holds (or of its shared expert): grouped GEMM 1 (gate + up), the SwiGLU
between, grouped GEMM 2 (down), each an ``ExpertKernel``: segments to replay
(``simnode.moe.profiles.task``), useful FLOPs, rows computed and holding tokens.

Two regimes, by the communication that feeds them (``LayerParams.comm``):

- ``normal`` (prefill, DeepEP's normal kernels, facts moe-layer 2): the m-grouped contiguous
  layout, every expert padded to BLOCK_M; S3's kernel for FP8 and FP4 weights; SwiGLU with
  per-128 FP32 scales; profiles linear in waves of full blocks (``simnode.moe.profiles``);
- ``low_latency`` (decode, DeepSeek-V4 on the 950, facts v4-decode 2): the low-latency
  dispatch's packed rows with per-expert counts; MXFP4 weights (W4A8) through CANN's
  weight-quant grouped matmul (``impl cann``), MXFP8 ones (W8A8) through S3's masked kernel
  (blocks past an expert's rows never run: the nearest modeled kernel to CANN's MX FP8
  grouped matmul on packed rows, whose tiling is not modeled); SwiGLU with V4's clamp and MX
  scales (one E8M0 per 32, the MX FP8 mode of V4's npu_swiglu_group_quant); the reduced form
  of decode shapes (``simnode.moe.decode_profiles``), with each kernel's burst shape.

``epilogue_segments`` is the normal kernels' copy epilogues (DeepEP facts 4.2 / 4.3).
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.kernels.grouped_gemm import (GroupedGemmParams, expert_blocks, grouped_gemm_roofline,
                                          grouped_tiling)
from simnode.kernels.swiglu import SwigluParams, swiglu_roofline
from simnode.moe import decode_profiles, profiles

#: the low-latency (decode) layer's SwiGLU quantization: MX FP8, one E8M0 scale per 32 values
#: (CR mxfp4.py: npu_swiglu_group_quant quant_mode 1, round_scale; its doc: block 32, E8M0)
MX_SCALE_BLOCK = 32


@dataclass(frozen=True)
class ExpertKernel:
    """One compute kernel of a rank, ready to replay."""
    name: str                       #: "gemm1", "swiglu", "gemm2" ("shared ..." for the shared expert)
    segments: list                  #: [(uncontended ns, HBM bytes)]
    flops: float                    #: useful FLOPs (GEMMs; 0 for SwiGLU)
    computed: int                   #: rows the cube multiplies (padding included)
    valid: int                      #: rows holding tokens
    needs_aivs: bool = False        #: must wait for communication to free the AIVs it needs
    gap_frac: float = 0.0           #: burst shape of its loads (``profiles.task``)

    def share(self, j: int, parts: int) -> "ExpertKernel":
        """Part ``j`` of ``parts`` equal parts (a fused chunk): time, bytes, FLOPs and rows
        (the rows' parts sum to the whole)."""
        part = lambda x: x * (j + 1) // parts - x * j // parts
        return ExpertKernel(self.name, [(ns / parts, b / parts) for ns, b in self.segments],
                            self.flops / parts, part(self.computed), part(self.valid),
                            self.needs_aivs, self.gap_frac)


def _gemm_params(p, counts, n: int, k: int, cores: int, wdt: str) -> GroupedGemmParams:
    if p.comm == "normal":
        return GroupedGemmParams(tuple(counts), n, k, "fp8", wdt, "bf16", "contiguous",
                                 num_cores=cores)
    if wdt == "fp4":
        return GroupedGemmParams(tuple(counts), n, k, "fp8", "fp4", "bf16", "packed",
                                 num_cores=cores, impl="cann")
    return GroupedGemmParams(tuple(counts), n, k, "fp8", wdt, "bf16", "masked", num_cores=cores)


def _gemm(chip, p, name: str, counts, n: int, k: int, cores: int, wdt: str,
          needs_aivs: bool) -> ExpertKernel:
    gp = _gemm_params(p, counts, n, k, cores, wdt)
    blocks = expert_blocks(gp, grouped_tiling(chip, gp))
    flops = 2.0 * sum(counts) * n * k
    computed, valid = sum(b.computed for b in blocks), sum(b.valid for b in blocks)
    if p.comm != "normal":
        segs, gap = decode_profiles.segments(chip, gp)
        return ExpertKernel(name, segs, flops, computed, valid, needs_aivs, gap)
    prof = profiles.grouped_gemm_profile(chip, n, k, "fp8", wdt, "bf16", "contiguous", cores)
    hbm = grouped_gemm_roofline(chip, gp)["hbm_ns"] * chip.memory.hbm_bandwidth_GBps
    return ExpertKernel(name, profiles.with_hbm_bytes(prof.segments(profiles.gemm_units(chip, gp)),
                                                      hbm), flops, computed, valid, needs_aivs)


def _swiglu(chip, p, name: str, rows: int, inter: int, cores: int, needs_aivs: bool) -> ExpertKernel:
    if p.comm != "normal":
        sp = SwigluParams(rows, inter, scale_block=MX_SCALE_BLOCK, sf_dtype="ue8m0",
                          clamp_limit=p.swiglu_clamp, num_cores=cores)
        segs, gap = decode_profiles.swiglu_segments(chip, sp)
        return ExpertKernel(name, segs, 0.0, 0, 0, needs_aivs, gap)
    sp = SwigluParams(rows, inter, num_cores=cores)
    prof = profiles.swiglu_profile(chip, inter, cores)
    return ExpertKernel(name, profiles.with_hbm_bytes(prof.segments(sp.rows),
                                                      swiglu_roofline(chip, sp)["hbm_bytes"]),
                        0.0, 0, 0, needs_aivs)


def expert_kernels(chip, p, counts: list, gemm_cores: int, vec_cores: int,
                   shared: bool = False) -> list[ExpertKernel]:
    """GEMM 1, SwiGLU and GEMM 2 over experts with ``counts`` tokens (one expert of the
    rank's tokens if ``shared``), the GEMMs on ``gemm_cores`` AI cores and SwiGLU on the
    AIVs of ``vec_cores`` (0: none free while communication runs: all of them, after it)."""
    if not counts or sum(counts) == 0:
        return []
    inter = p.shared_intermediate if shared else p.intermediate
    wdt = (p.shared_weight_dtype or p.weight_dtype) if shared else p.weight_dtype
    prefix = "shared " if shared else ""
    # MXFP4 weights are decoded on the AIVs (facts 3.5): their GEMMs need them
    g_wait = wdt == "fp4" and gemm_cores == 0
    g_cores = gemm_cores or chip.num_ai_cores
    s_cores = vec_cores or chip.num_ai_cores
    return [_gemm(chip, p, prefix + "gemm1", counts, 2 * inter, p.hidden, g_cores, wdt, g_wait),
            _swiglu(chip, p, prefix + "swiglu", sum(counts), inter, s_cores, vec_cores == 0),
            _gemm(chip, p, prefix + "gemm2", counts, p.hidden, inter, g_cores, wdt, g_wait)]


def epilogue_segments(chip, p, plan, r: int, kind: str, kernel_launch_ns: float) -> list:
    """The normal DeepEP epilogue of rank r as one memory-bound task on its communication
    AIVs: ``dispatch``: received records scattered into the expert-major layout (facts 4.2,
    deferred epilogue); ``combine``: each token's partial rows summed (facts 4.3 step 6)."""
    sz = plan.sizes
    A = p.comm_aivs
    read_GBps = A * chip.paths["gm_to_ub"].bandwidth_B_per_cycle * chip.aic_freq_GHz
    write_GBps = A * chip.paths["ub_to_gm"].bandwidth_B_per_cycle * chip.aic_freq_GHz
    recv = int(plan.received()[r])
    if kind == "dispatch":
        epr = p.num_experts // p.num_ranks
        rows = int(plan.expert_tokens[r * epr:(r + 1) * epr].sum())
        read = recv * (sz.hidden_row_bytes + sz.metadata_bytes)
        write = rows * (sz.hidden_row_bytes + sz.scales_bytes)
    else:
        T = plan.params.tokens_per_rank
        partials = T * min(p.num_ranks, p.top_k)        # facts 4.3 step 5: <= min(R, k)
        read = partials * sz.combine_row_bytes
        write = T * sz.combine_row_bytes
    ns = kernel_launch_ns + max(read / read_GBps, write / write_GBps)
    return [(ns, float(read + write))]
