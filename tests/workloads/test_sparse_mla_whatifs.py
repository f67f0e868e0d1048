"""The FlashMLA design reasoning (facts 3.4, S1) as what-ifs on the sparse_mla kind.

Small shapes (128 queries: 4 items per core) keep each run near a second; the full
published shapes are in benchmarks/bench_sparse_mla.py and the report.
"""

from __future__ import annotations

import copy

import pytest

from simnode.config.topology import load_topology_raw, topology_from_mapping
from simnode.kernels.sparse_mla import COLD_START_NS, KERNEL_LAUNCH_NS
from simnode.workloads.kinds.sparse_mla import KIND as SPARSE_MLA

BASE = dict(mode="prefill", n_q=128, kv_len=8192, topk=640, kv_dtype="bf16", batch=64, s_q=4,
            topk_main=128, topk_extra=512, main_len=256, extra_len=2048, main_dtype="fp8",
            extra_dtype="fp8", heads=64, d_qk=512, d_v=512, heads_per_core=64, b_topk=64,
            vector_cores_per_cube=2, gather2=True, skip_scale_threshold=6.0,
            rescale_share=0.05, sinks=True, seed=0, num_cores=0,
            # the what-ifs compare the kernels' steady states: no per-launch time, which would
            # dilute the ratios of these short runs
            kernel_launch_ns=0, cold_start_ns=0)


@pytest.fixture(scope="module")
def topo(topology_path):
    return topology_from_mapping(load_topology_raw(topology_path), str(topology_path))


@pytest.fixture(scope="module")
def go(topo):
    cache = {}

    def r(**kw):
        key = tuple(sorted(kw.items()))
        if key not in cache:
            cache[key] = SPARSE_MLA.run(topo, {**BASE, **kw})
        return cache[key]
    return r


def test_a_32_heads_per_core_is_l2_bound_64_is_cube_bound(go):
    assert go().bottleneck == "cube (aic.m)"
    half = go(heads_per_core=32)
    assert half.bottleneck == "L2 bandwidth"
    assert half.l2_util_frac > 0.9
    assert half.tflops < go().tflops


def test_b_one_vector_core_per_cube_is_clearly_slower(go):
    one, two = go(vector_cores_per_cube=1), go()
    assert one.tflops < 0.75 * two.tflops
    assert one.bottleneck in ("vector (aiv.v)", "AIV MTE2 (GM->UB)")
    # the reason: the one AIV carries both AIVs' vector work (ND2NZ of 64 tokens, softmax
    # of 64 rows) and gathers 64 tokens = 32 descriptors, twice the 16-entry MTE2 queue. Its
    # vector time grows by less than 2x: a softmax phase's dependent chain is as long for 64
    # rows as for 32 (its row iterations overlap), and it pays the same VF start and drain
    v_one = one.pipe_busy_frac["aiv.v"] * one.makespan_ns
    v_two = two.pipe_busy_frac["aiv.v"] * two.makespan_ns
    assert 1.5 * v_two < v_one < 2 * v_two
    # ... and the result says where its time goes: with one UB holding all 64 rows of O,
    # only 2 gather chunks fit, so the vector unit idles on the MTE2 gather
    assert one.details["idle_on_flags_frac"]["aiv.v"]["mte2"] > 0.2
    assert two.details["idle_on_flags_frac"]["aiv.v"].get("mte2", 0.0) < 0.1


def test_b_fp8_dequant_on_one_vector_core_outruns_the_cube(go):
    r = go(vector_cores_per_cube=1, kv_dtype="fp8")
    assert r.pipe_busy_frac["aiv.v"] > r.pipe_busy_frac["aic.m"]


@pytest.mark.parametrize("b_topk, fix_over_cube", [(64, True), (128, False)])
def test_c_1c1v_fixpipe_outweighs_the_cube_below_b_topk_73(go, b_topk, fix_over_cube):
    # S1: 16 B_TOPK > 1024 + 2 B_TOPK with an O rescale every block (skip-scale off)
    r = go(vector_cores_per_cube=1, skip_scale_threshold=0.0, b_topk=b_topk)
    ratio = r.pipe_busy_frac["aic.fix"] / r.pipe_busy_frac["aic.m"]
    assert (ratio > 1.0) is fix_over_cube
    assert ratio == pytest.approx((1024 + 2 * b_topk) / (16 * b_topk), rel=0.02)
    # the result names FixPipe as the AIC's binding pipe below the crossover, the cube above;
    # the kernel as a whole is paced by the one AIV (reasons (a), (b)): its vector pipe is the
    # busiest, though below saturation, as it also waits on its gathers
    aic = r.details["busiest_pipe_by_unit"]["aic"]
    assert aic == ("FixPipe (aic.fix)" if fix_over_cube else "cube (aic.m)")
    assert r.bottleneck == "vector (aiv.v)"


@pytest.mark.parametrize("b_topk, binding", [(64, "FixPipe (aic.fix)"), (80, "cube (aic.m)")])
def test_c_alone_1c1v_with_an_aiv_as_strong_as_two_is_fixpipe_bound_below_73(topology_path, b_topk,
                                                                           binding):
    """S1 gives three reasons against 1C1V, each enough alone. Give the one AIV the MTE2
    bandwidth and queue, vector rates and UB bandwidth of two, so (a) and (b) are gone and
    only FixPipe's single destination differs from 1C2V: then the AI core is FixPipe-bound
    below B_TOPK ~73 (the kernel's bottleneck too) and cube-bound above (where the one AIV,
    with every block's O rescale to do, is less busy than the cube)."""
    raw = copy.deepcopy(load_topology_raw(topology_path))
    chip = raw["chip"]
    chip["sync"]["mte2_outstanding_per_aiv"] *= 2
    chip["paths"]["gm_to_ub"]["bandwidth_B_per_cycle"] *= 2
    chip["vector"]["ub_bandwidth_B_per_cycle"] *= 2
    for op in chip["vector"]["ops_per_cycle"]:
        chip["vector"]["ops_per_cycle"][op] *= 2
    for ports in ("vf_issue_ports", "vf_issue_per_cycle", "vf_load_ports", "vf_store_ports",
                  "vf_ub_slots"):
        chip["vector"][ports] *= 2
    # one VF call does two AIVs' work in the time of one: its fixed start and drain and its
    # dependent chains take half
    for fixed in ("vf_startup_cycles", "vf_drain_cycles", "vf_load_latency_cycles",
                  "vf_store_latency_cycles", "vf_alu_latency_cycles", "vf_intlv_latency_cycles",
                  "vf_reduce_latency_cycles", "vf_sfu_latency_cycles"):
        chip["vector"][fixed] /= 2
    strong = topology_from_mapping(raw, str(topology_path))
    r = SPARSE_MLA.run(strong, {**BASE, "vector_cores_per_cube": 1, "skip_scale_threshold": 0.0,
                     "b_topk": b_topk, "n_q": 256})
    assert r.details["busiest_pipe_by_unit"]["aic"] == binding
    if binding.startswith("FixPipe"):
        assert r.bottleneck == binding
    else:
        assert r.pipe_busy_frac["aiv.v"] < r.pipe_busy_frac["aic.m"]


def test_d_gather2_off_is_slower(go):
    assert go(gather2=False).makespan_ns > go().makespan_ns


def test_decode_tflops_rises_with_batch_as_the_per_launch_time_amortizes(go):
    """Each launch pays kernel launch + InitSocState (facts 1.2, S6), the cold start and the
    pipeline's fill and drain once, whatever the batch: at 1 item per core (batch 8) they
    weigh, at 4 (batch 32) less. The makespan grows by the same time per item, so a line
    through the two cuts the axis at that per-launch time."""
    launch = dict(mode="decode", kernel_launch_ns=KERNEL_LAUNCH_NS, cold_start_ns=COLD_START_NS)
    small, big = go(**launch, batch=8), go(**launch, batch=32)
    assert big.tflops > 1.1 * small.tflops
    per_item = (big.makespan_ns - small.makespan_ns) / 3
    fixed = small.makespan_ns - per_item
    assert KERNEL_LAUNCH_NS + COLD_START_NS < fixed < KERNEL_LAUNCH_NS + COLD_START_NS + per_item


def test_decode_fp4_extra_cache_is_faster_than_fp8_by_its_smaller_gathers_and_dequant(go):
    # FP4 rows are 288 B against FP8's 528 B (facts 2.2), so the AIVs' gathers move fewer
    # bytes and their MTE2 is less busy. The FP4 VF is paced by its decoder (512 cycles per
    # 32 tokens, facts 1.2, S3), FP8's by its 22 instructions per token at the calibrated
    # one per cycle (704; topologies/ascend950dt.yaml vf_issue_per_cycle), so the vector
    # pipe is less busy with FP4 too.
    fp4 = go(mode="decode", batch=64, extra_dtype="fp4")
    fp8 = go(mode="decode", batch=64, extra_dtype="fp8")
    assert fp4.makespan_ns < 0.97 * fp8.makespan_ns
    v_fp4 = fp4.pipe_busy_frac["aiv.v"] * fp4.makespan_ns
    v_fp8 = fp8.pipe_busy_frac["aiv.v"] * fp8.makespan_ns
    assert v_fp4 < v_fp8
    g_fp4 = fp4.pipe_busy_frac["aiv.mte2"] * fp4.makespan_ns
    g_fp8 = fp8.pipe_busy_frac["aiv.mte2"] * fp8.makespan_ns
    assert g_fp4 < 0.75 * g_fp8


def test_cli_rejects_an_oversized_b_topk_naming_the_buffer(cli, topology_path, repo_root):
    res = cli("run", topology_path, repo_root / "workloads" / "sparse-mla-prefill.yaml",
              "--set", "b_topk=256", "--set", "n_q=8")
    assert res.code == 2
    assert "L0B of aic overflows" in res.err and "K/V tiles" in res.err


def test_cli_rejects_a_negative_cold_start_naming_the_field(cli, topology_path, repo_root, user_error):
    res = cli("run", topology_path, repo_root / "workloads" / "sparse-mla-decode.yaml",
              "--set", "cold_start_ns=-5")
    user_error(res, "sparse-mla-decode.yaml (with --set overrides)", "cold_start_ns = -5",
               "expected a number >= 0")


def test_a_prefill_runs_in_lock_step_groups_and_says_so(go):
    # eight representative cores by default (simnode.hardware.lockstep), every core with
    # lockstep_groups=0: the same traffic, the makespan within 0.1%
    # (tests/hardware/test_lockstep.py compares the two forms in detail)
    reduced, full = go(), go(lockstep_groups=0)
    names = lambda r: {f.name: f.value for f in r.kernels[0].figures}  # noqa: E731
    assert names(reduced)["lockstep_groups"] == 8 and "lockstep_groups" not in names(full)
    assert names(reduced)["hbm_bytes"] == pytest.approx(names(full)["hbm_bytes"], rel=1e-9)
    assert reduced.makespan_ns != full.makespan_ns
    assert reduced.makespan_ns == pytest.approx(full.makespan_ns, rel=1e-3)


@pytest.mark.parametrize("value, expected", [("-1", "expected an integer >= 0"),
                                             ("2.5", "expected an integer")])
def test_cli_rejects_a_bad_lockstep_groups_naming_the_field(cli, topology_path, repo_root, user_error,
                                                            value, expected):
    res = cli("run", topology_path, repo_root / "workloads" / "sparse-mla-prefill.yaml",
              "--set", f"lockstep_groups={value}")
    user_error(res, "sparse-mla-prefill.yaml (with --set overrides)", f"lockstep_groups = {value}",
               expected)


def test_a_traced_prefill_runs_every_core_and_does_not_claim_groups(topo, tmp_path):
    # a trace shows every core, so the run is the detailed form: lockstep_groups=0's makespan
    # (to rounding: a traced run also reads read by read, ``ChipSim(gm_bursts=...)``) and no
    # lockstep_groups figure
    from simnode.workloads.registry import RunOptions
    traced = SPARSE_MLA.run(topo, BASE, RunOptions(trace_path=str(tmp_path / "t.json")))
    full = SPARSE_MLA.run(topo, {**BASE, "lockstep_groups": 0})
    names = {f.name for f in traced.kernels[0].figures}
    assert "lockstep_groups" not in names
    assert traced.makespan_ns == pytest.approx(full.makespan_ns, rel=1e-9)
