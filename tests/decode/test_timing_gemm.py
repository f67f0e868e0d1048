"""The decode step's GEMMs: wo_a as a batch matmul (one kernel of o_groups GEMMs, each its
own A and B), and the tile choice at M = 360."""

from __future__ import annotations

import json

import pytest

from simnode.config.topology import load_topology
from simnode.decode import deployment as D
from simnode.decode import kernels as K
from simnode.decode import model as M
from simnode.decode import timing as T
from simnode.kernels.gemm import GemmParams, choose_tiling, gemm_roofline, gemm_schedule

FLASH = M.preset("v4-flash")
MTP3 = D.load_deployment(dict(D.FLASH_16_MTP3), FLASH)
MTP1 = D.load_deployment(dict(D.FLASH_16_MTP1), FLASH)


def test_a_batch_is_its_gemms_blocks_dealt_together(topology_path):
    chip = load_topology(topology_path).chip
    one = gemm_schedule(chip, GemmParams(4, 1024, 4096, "fp8"))
    eight = gemm_schedule(chip, GemmParams(4, 1024, 4096, "fp8", gemms=8))
    assert eight.flops == 8 * one.flops and eight.meta["gemms"] == 8 and "gemms" not in one.meta
    # each GEMM its own B: eight times the weight bytes, HBM-bound at decode M
    bound = gemm_roofline(chip, GemmParams(4, 1024, 4096, "fp8", gemms=8), eight)
    ns, hbm, bottleneck = T.run_schedule(chip, eight)
    assert bottleneck == "HBM bandwidth" and hbm == pytest.approx(8 * 1024 * 4096 * (1 + 1 / 32), rel=0.02)
    assert bound["hbm_ns"] <= ns < 1.3 * bound["hbm_ns"]


def test_wo_a_is_the_batch_matmul(topology_path):
    chip = load_topology(topology_path).chip
    for dep in (MTP3, MTP1):
        c = {x.name: x for x in K.layer_kernels(FLASH, dep, "csa")}["wo_a"]
        p = T.profile(chip, c)
        assert (p.model, p.source) == (T.PIPE, "gemm")
        assert p.ns < 1.3 * K.roofline_ns(c, chip)[0]


def test_the_gemm_kind_takes_a_batch_of_gemms(cli, topology_path, gemm_workload_path):
    sets = ["m=4", "n=1024", "k=4096", "dtype=fp8"]
    args = [a for s in sets for a in ("--set", s)]
    one = json.loads(cli("run", topology_path, gemm_workload_path, *args, "--json").out)
    eight = json.loads(cli("run", topology_path, gemm_workload_path, *args, "--set", "gemms=8", "--json").out)
    assert eight["flops"] == 8 * one["flops"] and eight["makespan_ns"] > 4 * one["makespan_ns"]


def test_at_m_360_one_m_block_covers_the_rows_of_a_wide_gemm(topology_path):
    """wq_b (360 x 32768 x 1024): BLOCK_M 368 holds every row, so the weights are read once;
    its L2 traffic is A re-read by each of the 256 N blocks (BLOCK_N 128, bounded by L0C)."""
    chip = load_topology(topology_path).chip
    p = GemmParams(360, 32768, 1024, "fp8")
    t = choose_tiling(chip, p)
    assert (t.block_m, t.block_n) == (368, 128)
    assert t.block_m * t.block_n * 4 <= chip.buffers.capacity_bytes("l0c")
