"""DeepSeek-V4's fused mHC kernels (v4_hc_pre.py, v4_hc_post.py) at decode sizes on the
950DT: their GM bytes and FLOPs against closed forms, time that never falls as tokens grow
and never beats the roofline, the bound the mechanism gives at a few tokens (a chain: the
Sinkhorn's dependent rounds, few cores with work) and at 360 (the AIVs' vector work), the
same output twice, and the language's flags free of races and deadlocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simnode.tile import verify
from simnode.tile.programs import mhc_vf

REPO = Path(__file__).resolve().parents[2]
PRE = REPO / "workloads" / "v4-hc-pre.yaml"
POST = REPO / "workloads" / "v4-hc-post.yaml"
PROGRAMS = REPO / "simnode" / "tile" / "programs"
LANES, MIX = 4, 24


def _run(cli, topology_path, workload, **sets):
    res = cli("run", topology_path, workload, "--json", *[f"--set={k}={v}" for k, v in sets.items()])
    assert res.code == 0, res.err
    return json.loads(res.out)


@pytest.mark.parametrize("tokens,hidden", [(4, 4096), (360, 4096), (16, 7168)])
def test_hc_pre_bytes_and_flops_follow_the_closed_forms(cli, topology_path, chip, tokens, hidden):
    r = _run(cli, topology_path, PRE, num_tokens=tokens, hidden=hidden)
    k, kb, m_dim = LANES * hidden, r["k_blocks"], r["m_dim"]
    assert r["part1_cores"] == m_dim * kb <= 32 and r["part2_aivs"] == -(-tokens // r["tokens_per_aiv"])
    # every tensor once: x, hc_fn (FP32), hc_base, y, post, comb; the workspace written and read
    unique = (tokens * k * 2 + MIX * k * 4 + MIX * 4 + tokens * hidden * 2 + tokens * LANES * 4
              + tokens * LANES * LANES * 4 + 2 * kb * tokens * (MIX + 1) * 4)
    assert r["hbm_unique_bytes"] == unique
    # every GM copy: x twice (the GEMM's strips, the weighted sum), hc_fn once per row group,
    # hc_base once per part-2 AIV
    copies = unique + tokens * k * 2 + (m_dim - 1) * MIX * k * 4 + (r["part2_aivs"] - 1) * MIX * 4
    assert r["bound_l2_ns"] * chip.memory.l2_bandwidth_GBps == pytest.approx(copies, rel=1e-9)
    assert r["mix_gemm_flops"] == 2.0 * tokens * MIX * k
    # the HF32 MMADs count the mix GEMM's own FLOPs
    assert r["flops"] == pytest.approx(r["mix_gemm_flops"])


@pytest.mark.parametrize("tokens,hidden", [(4, 4096), (360, 4096), (100, 7168)])
def test_hc_post_bytes_follow_the_closed_form(cli, topology_path, chip, tokens, hidden):
    r = _run(cli, topology_path, POST, num_tokens=tokens, hidden=hidden)
    per_token = hidden * 2 + 2 * LANES * hidden * 2 + LANES * 4 + LANES * LANES * 4
    assert r["hbm_unique_bytes"] == tokens * per_token
    assert r["bound_l2_ns"] * chip.memory.l2_bandwidth_GBps == pytest.approx(tokens * per_token, rel=1e-9)
    assert r["flops"] == 0 and r["d_chunks"] == -(-hidden // 4096)


@pytest.mark.parametrize("workload", [PRE, POST])
@pytest.mark.parametrize("hidden", [4096, 7168])
def test_time_grows_with_tokens_and_stays_above_the_roofline(cli, topology_path, workload, hidden):
    spans = []
    for tokens in (1, 4, 16, 64, 128, 360, 512):
        r = _run(cli, topology_path, workload, num_tokens=tokens, hidden=hidden)
        assert r["roofline_ns"] <= r["makespan_ns"]
        spans.append(r["makespan_ns"])
    assert spans == sorted(spans)
    assert spans[-1] > 3 * spans[1]


def test_hc_pre_at_a_few_tokens_is_a_fixed_chain(cli, topology_path, chip):
    """4 tokens: 4 of 64 AIVs in part 2, one token each; the time is part 1's chain (strip,
    two VFs, push, the HF32 MMADs at m < 64, FixPipe) and part 2's five VFs in a row, the
    Sinkhorn's 19 dependent rounds the longest: no pipe is busy, and 16 tokens cost the same."""
    r4 = _run(cli, topology_path, PRE, num_tokens=4)
    r16 = _run(cli, topology_path, PRE, num_tokens=16)
    assert r4["part2_aivs"] == 4 and r4["tokens_per_aiv"] == 1 and r4["part2_rounds"] == 1
    assert r16["makespan_ns"] == pytest.approx(r4["makespan_ns"], rel=0.05)
    sinkhorn_ns = r4["sinkhorn_cycles"] / chip.aic_freq_GHz
    assert sinkhorn_ns == pytest.approx(mhc_vf.sinkhorn(1, 20).cycles(chip) / chip.aic_freq_GHz)
    assert 1500 < sinkhorn_ns < 2000
    # the MMADs: 2 L0 steps of K 256 at the HF32 rate (2 K a cycle per 16 x 16), each m = 4
    # priced as the cube's saturating 64 rows
    k0 = chip.cube.macs_per_cycle["hf32"] // 256
    mmads_ns = 2 * (64 // 16) * (MIX // 16 + 1) * (256 // k0) / chip.aic_freq_GHz
    assert r4["makespan_ns"] > sinkhorn_ns + mmads_ns + 1000
    assert r4["bottleneck_util_frac"] < 0.5 and r4["tile_sim_over_bound"] > 1.5
    # Sinkhorn rounds are the chain: 10 fewer rounds save ~10 x 136 cycles
    short = _run(cli, topology_path, PRE, num_tokens=4, iters=10)
    assert r4["makespan_ns"] - short["makespan_ns"] == pytest.approx(10 * 136 / chip.aic_freq_GHz, rel=0.05)


def test_hc_pre_at_360_tokens_is_bound_by_the_vector_work(cli, topology_path, chip):
    """360 tokens: 6 per AIV in 3 part-2 rounds of 2 (UB), each with its own Sinkhorn call;
    part 1 casts 16 strips of 96 rows x 64 per AIV beside the cube's HF32 MMADs: the AIVs' vector
    pipe is the busiest and the time is within 1.3x of its work."""
    r = _run(cli, topology_path, PRE, num_tokens=360)
    assert (r["tokens_per_aiv"], r["row_factor"], r["part2_rounds"]) == (6, 2, 3)
    assert (r["m_dim"], r["k_blocks"], r["k_l1"], r["k_ub"]) == (2, 16, 128, 64)
    assert r["bottleneck"] == "vector (aiv.v)" and r["bottleneck_util_frac"] > 0.7
    assert r["makespan_ns"] <= 1.3 * r["roofline_ns"]
    assert r["makespan_ns"] > 3 * r["sinkhorn_cycles"] / chip.aic_freq_GHz
    assert r["bound_hbm_ns"] < 0.5 * r["makespan_ns"]
    # the what-if of the sourced dual issue (the chip file calibrates one instruction per cycle)
    dual = _run(cli, topology_path, PRE, num_tokens=360,
                **{"topology.chip.vector.vf_issue_per_cycle": 2})
    assert dual["makespan_ns"] < 0.95 * r["makespan_ns"]


def test_hc_post_is_one_token_per_aiv_then_vector_bound(cli, topology_path, chip):
    """Up to 64 tokens each AIV updates one token: the same time at 1, 4 and 32. At 360 an
    AIV updates 6 tokens one after another and the lanes-update VF sets the pace."""
    small = [_run(cli, topology_path, POST, num_tokens=n)["makespan_ns"] for n in (1, 4, 32)]
    assert small[0] == pytest.approx(small[1], rel=1e-6) == pytest.approx(small[2], rel=0.02)
    big = _run(cli, topology_path, POST, num_tokens=360)
    assert big["tokens_per_aiv"] == 6 and big["bottleneck"] == "vector (aiv.v)"
    per_token = (mhc_vf.lane_update(LANES, 4096).cycles(chip) + mhc_vf.cast_out(LANES * 4096).cycles(chip)) / chip.aic_freq_GHz
    assert 6 * per_token < big["makespan_ns"] < 6 * per_token + small[0]
    assert big["bound_hbm_ns"] < big["makespan_ns"]


@pytest.mark.parametrize("workload", [PRE, POST])
def test_the_same_run_twice_prints_the_same(cli, topology_path, workload):
    a = cli("run", topology_path, workload, "--json", "--set=num_tokens=64")
    b = cli("run", topology_path, workload, "--json", "--set=num_tokens=64")
    assert a.code == b.code == 0 and a.out == b.out


@pytest.mark.parametrize("name,params", [
    ("v4_hc_pre.py", {"num_tokens": 4}), ("v4_hc_pre.py", {"num_tokens": 360}),
    ("v4_hc_pre.py", {"num_tokens": 1, "hidden": 7168}),
    ("v4_hc_post.py", {"num_tokens": 70, "hidden": 7168}),
])
def test_automatic_flags_are_free_of_deadlocks_and_races(build, name, params):
    verify.check(build(PROGRAMS / name, keep_meta=True, **params))


def test_shapes_the_kernel_does_not_take_are_refused(build):
    with pytest.raises(Exception, match="M-split template"):
        build(PROGRAMS / "v4_hc_pre.py", num_tokens=8192)
    with pytest.raises(Exception, match="multiple of 64"):
        build(PROGRAMS / "v4_hc_post.py", hidden=4000)
