"""The lightning indexer (kernels.indexer): schedule shape, work split, roofline, the pipe that
binds at the V4-Flash decode shape, bad inputs, determinism."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from simnode.config.topology import load_topology_raw, topology_from_mapping
from simnode.errors import ScheduleError
from simnode.instr import isa
from simnode.kernels.indexer import IndexerParams, indexer_roofline, indexer_schedule, keys_visible, useful
from simnode.kernels.indexer.work import cann_parts, deepgemm_segments
from simnode.workloads.kinds.lightning_indexer import KIND

run = KIND.run

PRESET = "workloads/lightning-indexer-decode.yaml"
FIELDS = dict(batch=180, q_per_seq=2, context=8192)           # the preset's shape


@pytest.fixture(scope="module")
def topo(topology_path):
    return topology_from_mapping(load_topology_raw(topology_path), str(topology_path))


def _params(**kw) -> dict:
    return {**{f: getattr(IndexerParams(), f) for f in IndexerParams.__dataclass_fields__}, **kw}


def _records(sched, typ):
    return [ins for prog in sched.cores for instrs in prog.pipes.values() for ins in instrs if type(ins) is typ]


def test_cann_schedule_has_one_mmad_and_one_dual_fixpipe_per_block(chip):
    """4 sequences x 2 queries over 512 keys: one unit of 4 blocks of 128 keys per sequence; each
    block one FP8 MMAD of 2 x 64 rows x 128 keys x 128 and one FP32 FixPipe to both UBs."""
    p = IndexerParams(batch=4, q_per_seq=2, context=2048, split_kv=False)
    assert keys_visible(p, 1) == 512
    sched = indexer_schedule(chip, p)
    mmads, fixes = _records(sched, isa.Mmad), _records(sched, isa.Fixpipe)
    assert len(mmads) == len(fixes) == 16
    assert {(m.m, m.n, m.k, m.dtype) for m in mmads} == {(128, 128, 128, "fp8")}
    assert {(f.dst, f.out_dtype) for f in fixes} == {("ub_dual", "fp32")}
    assert sum(f.m * f.n * 4 for f in fixes) == 16 * 128 * 128 * 4
    keys = [c for c in _records(sched, isa.Copy) if c.label == "keys -> L1"]
    assert sum(c.size_bytes for c in keys) == 4 * 512 * 128          # each sequence's cache once
    assert sched.flops == 2 * 64 * 128 * 4 * (511 + 512) == useful(p).flops
    outs = [c for c in _records(sched, isa.Copy) if c.label == "top-k out"]
    assert len(outs) == 8 and {c.size_bytes for c in outs} == {512 * 4}


def test_deepgemm_schedule_has_one_tile_per_query_and_split(chip):
    """4 sequences x 2 queries over 1024 keys: 2 splits of 512; per split one MXFP8 MMAD of 64 rows
    (one query x 64 heads) x 512 keys per query and a BF16 FixPipe to one UB."""
    p = IndexerParams(kernel="deepgemm", batch=4, q_per_seq=2, context=4096)
    sched = indexer_schedule(chip, p)
    mmads, fixes = _records(sched, isa.Mmad), _records(sched, isa.Fixpipe)
    assert len(mmads) == len(fixes) == 4 * 2 * 2
    assert {(m.m, m.n, m.k) for m in mmads} == {(64, 512, 128)}
    assert {(f.dst, f.out_dtype, f.m * f.n * 2) for f in fixes} == {("ub", "bf16", 64 * 512 * 2)}
    assert useful(p).fix_bytes == 64 * 2 * 4 * (1023 + 1024)


@pytest.mark.parametrize("shape", [dict(batch=180, q_per_seq=2), dict(batch=1, q_per_seq=4),
                                   dict(batch=7, q_per_seq=3), dict(batch=1, q_per_seq=37, context=4096)])
def test_cann_split_deals_every_block_once_and_evenly(shape):
    p = IndexerParams(**{**FIELDS, **shape})
    per_core = cann_parts(p, 32)
    blocks = [sum(x.blocks for x in parts) for parts in per_core]
    assert max(blocks) - min(blocks) <= 1
    seen = Counter((x.seq, x.group, x.first_block + j) for parts in per_core for x in parts for j in range(x.blocks))
    assert all(n == 1 for n in seen.values()) and len(seen) == sum(blocks)
    for parts in per_core:                     # a unit's parts are numbered 0..parts-1
        for x in parts:
            assert 0 <= x.part < x.parts


def test_deepgemm_metadata_cut_covers_every_split_once():
    p = IndexerParams(kernel="deepgemm", **FIELDS)
    segs = [s for core in deepgemm_segments(p, 32) for s in core]
    covered = Counter((s.seq, sp) for s in segs for sp in range(s.first_split, s.end_split))
    assert len(covered) == 180 * 4 and set(covered.values()) == {1}


@pytest.mark.parametrize("kw", [dict(), dict(kernel="deepgemm"), dict(batch=1, q_per_seq=4),
                                dict(batch=1, q_per_seq=4, kernel="deepgemm"), dict(split_kv=False, batch=40),
                                dict(batch=3, q_per_seq=64, context=4096, topk=1024)])
def test_roofline_never_beats_the_run(topo, kw):
    r = run(topo, _params(**kw))
    p = IndexerParams(**_params(**kw))
    bound = indexer_roofline(topo.chip, p)
    assert 0 < bound["bound_ns"] <= r.makespan_ns
    assert bound["bound_ns"] == max(bound["compute_ns"], bound["fixpipe_ns"], bound["hbm_ns"])


def test_cann_at_the_flash_decode_shape_is_vector_bound(topo):
    """At 180 x 2 queries over 2048 keys the cube and FixPipe are equal and light: a 128-row block
    is 256 cycles of FP8 MMAD and 64 KB of FP32 at the dual-destination 256 B/cycle. Each AIV's
    block is longer: its reduction VF (~440 cycles: 64 heads x (2 loads, relu, madd, broadcast)
    at the 950DT's one issue per cycle), and the scalar waits for the scores' store (MTE3_S)
    before issuing the next block's loads, adding the store's and the loads' latencies (~180 +
    ~90 cycles). So the vector binds, not FixPipe: the roofline's FixPipe term (14 us) is reached
    by neither the cube nor FixPipe, both ~30% busy."""
    r = run(topo, _params())
    busy = r.kernels[0].figure("pipe_busy_frac").value
    assert r.bottleneck == "vector (aiv.v)"
    assert busy["aic.fix"] == pytest.approx(busy["aic.m"], rel=1e-6) and busy["aic.fix"] < 0.4
    assert busy["aiv.v"] > 1.5 * busy["aic.fix"]
    assert 2.0 < r.makespan_ns / r.roofline_ns < 4.0


def test_deepgemm_fixpipe_and_cube_tie_when_queries_share_keys(topo):
    """DeepGEMM-Ascend's tile (one query x 64 heads x 512 keys) is 512 cycles on the cube (4 x 32
    x 4 FP8 fractal steps) and 512 on FixPipe (64 KB of BF16 at 128 B/cycle, one destination):
    with 8 queries per sequence sharing each split's keys (HBM light), both pipes are busy the
    same, far above the rest (~80%: the rest is the tile-level handoff between them and the
    single L0B buffer's reload per split): facts 2.1's "FixPipe-bound" is, at simnode's rates,
    FixPipe and cube bound together (any FixPipe cost beyond its rate would tip it)."""
    r = run(topo, _params(kernel="deepgemm", batch=64, q_per_seq=8))
    busy = r.kernels[0].figure("pipe_busy_frac").value
    assert busy["aic.fix"] == pytest.approx(busy["aic.m"], rel=1e-6)
    assert busy["aic.fix"] > 0.75 and r.makespan_ns < 1.35 * r.roofline_ns
    assert all(v < busy["aic.fix"] for k, v in busy.items() if k not in ("aic.fix", "aic.m"))


@pytest.mark.parametrize("kw, msg", [
    (dict(heads=48), "heads = 48: the 950's op takes 16, 24, 32, 64"),
    (dict(head_dim=64), "head_dim = 64: the 950's op is built for 128"),
    (dict(topk=4096), "topk = 4096: expected 1..2048"),
    (dict(q_per_seq=9000, context=8192), "q_per_seq = 9000 exceeds context = 8192"),
    (dict(context=3), "leaves no compressed entry"),
    (dict(kernel="deepgemm", q_per_seq=9), "at most 8 query tokens"),
    (dict(kernel="deepgemm", page_size=256), "page_size = 256: expected 64 or 128"),
])
def test_bad_shapes_get_a_clear_message(chip, kw, msg):
    with pytest.raises(ScheduleError, match=msg):
        indexer_schedule(chip, IndexerParams(**{**FIELDS, **kw}))


@pytest.mark.parametrize("args, needles", [
    (["--set", "heads=48"], ["heads = 48", "16, 24, 32, 64"]),
    (["--set", "num_cores=40"], ["num_cores = 40", "32 AI cores"]),
    (["--set", "kernel=tilelang"], ["kernel = 'tilelang'", "'cann', 'deepgemm'"]),
    (["--set", "context=100000000"], ["batch, q_per_seq, context", "MMAD tiles"]),
    (["--set", "batch=0"], ["batch = 0"]),
])
def test_bad_input_is_a_user_error(cli, user_error, topology_path, repo_root, args, needles):
    user_error(cli("run", topology_path, repo_root / PRESET, *args), *needles, nothing_ran=True)


def test_the_preset_runs_and_is_deterministic(cli, topology_path, repo_root):
    a = cli("run", topology_path, repo_root / PRESET, "--set", "batch=20", "--json")
    b = cli("run", topology_path, repo_root / PRESET, "--set", "batch=20", "--json")
    assert a.code == 0, a.err
    assert a.out == b.out
    res = json.loads(a.out)
    assert res["kind"] == "lightning_indexer" and res["bottleneck"]


def test_a_long_row_is_selected_trunk_by_trunk(chip):
    """Rows over 16K keys (CANN's TRUNK_LEN_16K): each further trunk is selected together with
    the running top-k, so a 20K-key row takes two top-k passes."""
    p = IndexerParams(batch=1, q_per_seq=1, context=4 * 20000, split_kv=False)
    sched = indexer_schedule(chip, p)
    vfs = Counter(ins.label for ins in _records(sched, isa.VecOp))
    assert vfs["top-k: high-byte histogram"] == 2
    assert math.ceil(keys_visible(p, 0) / 128) == len(_records(sched, isa.Mmad))
