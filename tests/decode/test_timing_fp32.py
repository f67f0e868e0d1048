"""FP32 and HF32 on the cube: the chip's rates (facts ascend950 1.2), the GEMM kernel at those
dtypes, and the mHC kernels of the decode step that use them."""

from __future__ import annotations

import pytest

from simnode.config.topology import load_topology
from simnode.decode import deployment as D
from simnode.decode import kernels as K
from simnode.decode import model as M
from simnode.decode import timing as T
from simnode.kernels.gemm import GemmParams, gemm_schedule

FLASH = M.preset("v4-flash")
MTP3 = D.load_deployment(dict(D.FLASH_16_MTP3), FLASH)


def test_the_950s_cube_takes_fp32_and_hf32(topology_path):
    chip = load_topology(topology_path).chip
    assert (chip.cube.macs_per_cycle["fp32"], chip.cube.macs_per_cycle["hf32"]) == (256, 512)
    assert chip.peak_tflops("hf32") == pytest.approx(2 * chip.peak_tflops("fp32"))


def test_a_cube_bound_gemm_runs_at_the_fp32_and_hf32_rates(topology_path):
    chip = load_topology(topology_path).chip
    ns = {}
    for dt in ("fp32", "hf32"):
        sched = gemm_schedule(chip, GemmParams(512, 512, 4096, dt))
        ns[dt], _, bottleneck = T.run_schedule(chip, sched)
        assert bottleneck == "cube (aic.m)"
        assert sched.flops / ns[dt] / 1e3 <= chip.peak_tflops(dt)           # TFLOPS under the peak
        assert sched.flops / ns[dt] / 1e3 > 0.9 * chip.peak_tflops(dt)
    assert ns["fp32"] == pytest.approx(2 * ns["hf32"], rel=0.05)


def test_hc_head_is_the_hc_pre_kernel_without_post_and_comb(topology_path):
    chip = load_topology(topology_path).chip
    head = K.head_kernels(FLASH, MTP3, "final_norm")[0]
    pre = K.layer_kernels(FLASH, MTP3, "csa")[0]
    assert (head.name, pre.name) == ("hc_head", "hc_pre_attn")
    h, p = T.profile(chip, head), T.profile(chip, pre)
    assert (h.model, h.source) == (T.PROXY, "tile:v4_hc_pre")
    # 4 tokens: the FP32 mix's K slices on every core, no Sinkhorn: faster than hc_pre's chain
    assert h.aic == chip.num_ai_cores and h.ns < p.ns
    assert h.ns > K.roofline_ns(head, chip)[0]
