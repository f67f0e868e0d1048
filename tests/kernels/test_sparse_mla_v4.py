"""DeepSeek-V4's decode attention op (sparse_mla mode v4): closed-form counts, the metadata
op's deal of rows to cores, bounds, user errors and determinism."""

from __future__ import annotations

import json
import math

import pytest

from simnode.config.topology import load_topology
from simnode.instr import isa
from simnode.kernels.sparse_mla import (KV_ROW_BYTES, SparseMlaParams, metadata, sparse_mla_roofline,
                                        sparse_mla_schedule, v4, vf)
from simnode.workloads.chiprun import run_schedule

V4 = dict(mode="v4", main_dtype="c8", extra_dtype="c8", b_topk=128, skip_scale_threshold=0,
          context_len=8192, window=128, topk_extra=512)
SMALL = dict(V4, batch=1, s_q=4)                   # shape (a): 1 sequence x s_q 4
LARGE = dict(V4, batch=180, s_q=2)                 # shape (b): 180 sequences x s_q 2
PRO = dict(heads=128, topk_extra=1024)


def _p(**kw) -> SparseMlaParams:
    return SparseMlaParams(**{**V4, **kw})


def _run(topology_path, **kw):
    topo = load_topology(topology_path)
    p = _p(**kw)
    sched = sparse_mla_schedule(topo.chip, p)
    return p, sched, run_schedule(topo, sched)


def _kv_reads(sched) -> list:
    return [i for prog in sched.cores for (u, pp), ins in prog.pipes.items() if u != "aic" and pp == "mte2"
            for i in ins if type(i) is isa.Copy and i.label.startswith("KV")]


# -- closed forms ------------------------------------------------------------------------

def test_the_c8_entry_is_crs_aligned_640_bytes():
    # CR-code Attention._get_cache_dim_and_cmp_dtype: align_up(448 + 2 x 64 + 2 x 448 / 64, 128)
    assert KV_ROW_BYTES["c8"] == math.ceil((448 + 2 * 64 + 2 * 448 // 64) / 128) * 128 == 640


@pytest.mark.parametrize("layer, selected", [("csa", [512] * 4), ("hca", [63, 63, 63, 64]),
                                             ("window", [0] * 4)])
def test_entries_read_per_query_by_layer_type(layer, selected):
    p = _p(batch=1, s_q=4, layer=layer)
    assert [v4.window_len(p, pos) for _, pos in v4.positions(p)] == [128] * 4
    assert [v4.selected(p, pos) for _, pos in v4.positions(p)] == selected
    # the causal mask: a sequence's s_q queries are its last positions, each window ending at its own
    assert [pos for _, pos in v4.positions(p)] == [8188, 8189, 8190, 8191]
    assert [v4.compressed_len(p, pos) for _, pos in v4.positions(p)] == (
        {"csa": [2047, 2047, 2047, 2048], "hca": [63, 63, 63, 64], "window": [0] * 4}[layer])
    tokens = {"csa": 4 * (128 + 512), "hca": 4 * 128 + 63 * 3 + 64, "window": 4 * 128}[layer]
    assert v4.flops(p) == 2.0 * 64 * tokens * (512 + 512)


def test_early_positions_see_fewer_entries():
    p = _p(batch=1, s_q=2, context_len=200, layer="csa")
    pos = v4.positions(p)[0][1]                     # 198: a full window, 49 compressed entries
    assert (v4.window_len(p, pos), v4.compressed_len(p, pos), v4.selected(p, pos)) == (128, 49, 49)
    q = _p(batch=1, s_q=1, context_len=5, layer="window")
    assert v4.window_len(q, v4.positions(q)[0][1]) == 5


@pytest.mark.parametrize("layer", ["csa", "hca", "window"])
def test_every_selected_entry_is_read_once_per_row_in_640_byte_rows(chip, layer):
    p = _p(batch=2, s_q=2, layer=layer)
    sched = sparse_mla_schedule(chip, p)
    rows = sum(v4.window_len(p, pos) + v4.selected(p, pos) for _, pos in v4.positions(p))
    reads = _kv_reads(sched)
    assert sum(c.size_bytes for c in reads) == rows * 640
    assert sum(len(c.regions) for c in reads) == rows
    # the window (and HCA's cache) is read a page run per request; CSA's rows two per request
    labels = {c.label for c in reads}
    assert labels == ({"KV rows", "KV gather2"} if layer == "csa" else {"KV rows"})


def test_c8_dequant_counts_follow_the_ops_two_vfs():
    scales, body = vf.dequant("c8", 16, 640)
    assert scales.vf_calls == body.vf_calls == 1           # CastScale and AntiquantVFImplFp8D448
    assert body.loads == 16 * (3 * 4 + 3) and body.stores == 16 * 5
    assert body.ops == (16 * (3 * 7 + 4) + 1) * vf.REG_OPS
    assert body.exu0_ops == (16 * 4 + 1) * vf.REG_OPS        # one deinterleave per 128 values


# -- the metadata op ---------------------------------------------------------------------

def test_block_cost_is_the_metadata_ops_formula():
    assert metadata.block_cost(64, 128) == 6 * 4 + 10 * 2 == 44
    assert metadata.block_cost(128, 64) == 6 * 8 + 10 == 58


def test_small_batch_keeps_each_query_on_one_core_as_published():
    # split-KV off (supportFd = false): 4 rows of 5 blocks on 4 of 32 cores
    parts, fd = metadata.balance([[128] * 5] * 4, [0] * 4, 64, 32)
    assert [len(c) for c in parts[:4]] == [1, 1, 1, 1] and not any(parts[4:]) and fd == []
    assert all(pt.b0 == 0 and pt.b1 == 5 for c in parts[:4] for pt in c)


def test_small_batch_schedule_uses_the_cores_the_metadata_says(chip):
    assert sparse_mla_schedule(chip, _p(**SMALL)).meta["cores_used"] == 4
    pro = sparse_mla_schedule(chip, _p(**{**SMALL, **PRO}))             # 4 rows, each on a core pair
    assert (pro.meta["cores_used"], pro.meta["row_cores"]) == (8, 2)
    split = sparse_mla_schedule(chip, _p(**SMALL, split_kv=True))   # one block per core
    assert (split.meta["cores_used"], split.meta["split_rows"]) == (20, 4)


def test_split_kv_deals_single_blocks_and_combines_every_split_row():
    parts, fd = metadata.balance([[128] * 5] * 4, [0] * 4, 64, 32, split_kv=True)
    assert sum(1 for c in parts if c) == 20
    assert all(len(c) == 1 and c[0].b1 - c[0].b0 == 1 for c in parts if c)
    assert fd == [metadata.FdTask(r, 5) for r in range(4)]
    tasks = metadata.split_fd(fd, 64, 64)
    heads = {}
    for t in tasks:
        for row, h0, n in t:
            heads.setdefault(row, []).append((h0, n))
    assert all(sum(n for _, n in v) == 64 for v in heads.values())       # every head combined once


def test_large_batch_deals_whole_sequences_evenly():
    parts, fd = metadata.balance([[128] * 5] * 360, [r // 2 for r in range(360)], 64, 32)
    counts = [sum(pt.b1 - pt.b0 for pt in c) // 5 for c in parts]
    assert sum(counts) == 360 and fd == []
    assert set(counts) <= {11, 12} and all(counts)
    # rows in (sequence, query) order, each core a contiguous run of them
    flat = [pt.row for c in parts for pt in c]
    assert flat == list(range(360))


# -- bounds --------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(SMALL, layer="csa"), dict(SMALL, layer="hca"), dict(SMALL, layer="window"),
                                {**SMALL, **PRO}, dict(V4, batch=24, s_q=2)])
def test_roofline_is_below_the_makespan(topology_path, kw):
    p, sched, run = _run(topology_path, **kw)
    bound = sparse_mla_roofline(load_topology(topology_path).chip, p)
    assert 0 < bound["bound_ns"] <= run.makespan_ns


def test_small_batch_is_latency_bound_large_batch_vector_bound(cli, topology_path, repo_root):
    small = json.loads(cli("run", topology_path, repo_root / "workloads" / "v4-attention-decode-b1.yaml",
                           "--json").out)
    large = json.loads(cli("run", topology_path, repo_root / "workloads" / "v4-attention-decode.yaml",
                           "--set", "batch=48", "--json").out)
    # (a): 4 busy cores, launch and cold start on the scalar pipes, no unit above 80%
    assert small["cores_used"] == 4 and small["bottleneck"] == "AIC scalar"
    assert small["bottleneck_util_frac"] < 0.8
    # (b)-like: every core, the AIVs' dequant and softmax set the time
    assert large["cores_used"] == 32 and large["bottleneck"] == "vector (aiv.v)"
    assert large["tflops"] > 4 * small["tflops"]


def test_graph_replay_swaps_the_cold_start(topology_path):
    _, _, cold = _run(topology_path, **SMALL)
    _, _, warm = _run(topology_path, **SMALL, graph_replay=True)
    _, _, hot = _run(topology_path, **SMALL, graph_replay=True, replay_cold_start_ns=2000)
    assert cold.makespan_ns - warm.makespan_ns == pytest.approx(10686, abs=1)
    assert hot.makespan_ns - warm.makespan_ns == pytest.approx(2000, abs=1)


def test_split_kv_adds_its_combine_phase(cli, topology_path, repo_root):
    work = repo_root / "workloads" / "v4-attention-decode-b1.yaml"
    off = json.loads(cli("run", topology_path, work, "--json").out)
    on = json.loads(cli("run", topology_path, work, "--set", "split_kv=true", "--json").out)
    assert on["cores_used"] == 20 and on["combine_ns"] > 0
    assert on["makespan_ns"] < off["makespan_ns"]


# -- user errors and determinism -------------------------------------------------------------

@pytest.mark.parametrize("sets, needle", [
    (["heads=192"], "heads = 192, heads_per_core = 64: V4's op runs 64 heads per core"),
    (["skip_scale_threshold=6"], "skip_scale_threshold = 6.0: V4's op rescales O on every block"),
    (["context_len=2"], "context_len = 2 below s_q = 4"),
    (["heads=128", "num_cores=31"], "num_cores = 31: 128 heads run on core pairs"),
    (["layer=mla"], "layer"),
])
def test_bad_v4_input_is_one_line_exit_2(cli, user_error, repo_root, topology_path, sets, needle):
    res = cli("run", topology_path, repo_root / "workloads" / "v4-attention-decode-b1.yaml",
              *[a for s in sets for a in ("--set", s)])
    user_error(res, needle, nothing_ran=True)


def test_same_input_same_bytes_and_the_seed_moves_csa_selection(cli, topology_path, repo_root):
    work = repo_root / "workloads" / "v4-attention-decode-b1.yaml"
    a = cli("run", topology_path, work, "--json").out
    assert a == cli("run", topology_path, work, "--json").out
    rng_a, rng_b = (v4.row_caches(_p(**SMALL), __import__("numpy").random.default_rng(s), 8191)
                    for s in (0, 1))
    assert rng_a[0] == rng_b[0] and rng_a[1] != rng_b[1]      # the window is fixed, the top-k is not
