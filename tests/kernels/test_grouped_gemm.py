"""The grouped GEMM kernel (DeepGEMM-Ascend m-grouped, facts 3.5, S3): the issue's two
acceptance figures (>= 4096 tokens per expert runs as fast as the dense GEMM of the same
total shape; ~100 tokens per expert with BLOCK_M 128 loses what padding_frac says),
conservation over random expert counts (every routed row computed exactly once, FLOPs
= 2 x sum_e m_e x N x K), the masked layout's skipping, the Dequant-B path, the roofline
and the errors."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simnode import units
from simnode.config.topology import Topology
from simnode.errors import ScheduleError
from simnode.instr import isa
from simnode.kernels.gemm import GemmParams, gemm_schedule
from simnode.kernels.grouped_gemm import (CONTIGUOUS_BLOCK_M, MASKED_BLOCK_M_CANDIDATES, GroupedGemmParams,
                                          cann_block_m, expert_blocks, grouped_gemm_roofline,
                                          grouped_gemm_schedule, grouped_tiling, padding_frac)
from simnode.kernels.gemm.core import sub_tiles
from simnode.workloads.chiprun import run_schedule


def _run(chip, sched):
    return run_schedule(Topology("test", chip), sched)


def _tflops(chip, sched) -> float:
    return units.tflops(sched.flops, _run(chip, sched).makespan_ns)


def _records(sched, pipe, typ=None):
    for prog in sched.cores:
        for (unit, p), instrs in prog.pipes.items():
            if p == pipe:
                for ins in instrs:
                    if typ is None or type(ins) is typ:
                        yield unit, ins


# -- acceptance figures -----------------------------------------------------------------------

def test_many_tokens_per_expert_run_as_fast_as_the_dense_gemm(chip):
    """Issue 18: with >= 4096 tokens per expert the grouped GEMM's TFLOPS is within 2% of
    the dense GEMM of the same total shape (2 x 4096 x 4096 x 7168, GEMM 1 of the MoE layer
    at n = 2 x 2048, k = 7168). The dense GEMM stores C as S3 does for a GEMM of many waves
    (through the UB: can_direct_store fails); the gemm kind's default direct store stalls the
    cube on FixPipe while all cores write C at once, and is slower (below)."""
    grouped = _tflops(chip, grouped_gemm_schedule(chip, GroupedGemmParams((4096, 4096), 4096, 7168)))
    dense = _tflops(chip, gemm_schedule(chip, GemmParams(8192, 4096, 7168, "fp8", epilogue="ub")))
    assert grouped == pytest.approx(dense, rel=0.02)
    direct = _tflops(chip, gemm_schedule(chip, GemmParams(8192, 4096, 7168, "fp8")))
    assert grouped >= direct * 0.98


PADDED_COUNTS = (100, 93, 107, 110, 96, 101, 99, 104, 90, 100, 108, 95, 102, 97, 105, 98)


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_about_100_tokens_per_expert_lose_what_padding_frac_says(chip, layout):
    """Issue 18: ~100 tokens per expert with BLOCK_M 128: every expert's block is computed at
    128 rows, so the run takes as long as with 128 tokens per expert and its (useful) TFLOPS
    falls by 1 - padding_frac. (The masked buffer holds 128 rows per expert here.)"""
    n, k = 4096, 7168
    kw = dict(layout=layout, block_m=128, max_m=128 if layout == "masked" else 0)
    padded = grouped_gemm_schedule(chip, GroupedGemmParams(PADDED_COUNTS, n, k, **kw))
    full = grouped_gemm_schedule(chip, GroupedGemmParams((128,) * len(PADDED_COUNTS), n, k, **kw))
    frac = padded.meta["padding_frac"]
    assert frac == pytest.approx(1 - sum(PADDED_COUNTS) / (128 * len(PADDED_COUNTS)))
    assert full.meta["padding_frac"] == 0
    t_pad, t_full = _run(chip, padded).makespan_ns, _run(chip, full).makespan_ns
    assert t_pad == pytest.approx(t_full, rel=0.01)
    tf_pad = units.tflops(padded.flops, t_pad)
    tf_full = units.tflops(full.flops, t_full)
    assert tf_pad == pytest.approx(tf_full * (1 - frac), rel=0.01)


# -- conservation over random expert counts ---------------------------------------------------

@st.composite
def grouped_shapes(draw):
    experts = draw(st.integers(1, 10))
    counts = tuple(draw(st.lists(st.integers(0, 600), min_size=experts, max_size=experts)))
    layout = draw(st.sampled_from(["contiguous", "masked"]))
    pair = draw(st.sampled_from([("fp8", "fp8"), ("fp8", "fp4"), ("bf16", "bf16")]))
    block_m = draw(st.sampled_from([0, 64, 128, 256]))
    max_m = 0
    if layout == "masked" and counts:
        max_m = max(counts) + draw(st.sampled_from([0, 1, 100]))
    n = draw(st.sampled_from([256, 300, 1024]))
    k = draw(st.sampled_from([512, 700, 1024]))
    return GroupedGemmParams(counts, n, k, *pair, layout=layout, max_m=max_m, block_m=block_m,
                             l1_stages=draw(st.sampled_from([0, 2])),
                             num_cores=draw(st.sampled_from([0, 3])))


def _rows_of_stores(p, t, sched):
    """From the C stores of the schedule: ((expert, expert-local row), n-block) -> times a
    stored C tile holds it, and the number of stored tiles that hold no token. A block's
    MAD sub-tiles split its rows (split by M) or its columns (split by N); a sub-tile may
    hold only padding, a block never."""
    starts, s = [], 0
    for m in p.m_per_expert:
        starts.append(s)
        s += -(-m // t.block_m) * t.block_m
    covered, tokens = Counter(), Counter()
    for _, ins in _records(sched, "mte3", isa.Copy):
        if ins.path != "ub_to_gm":
            continue
        *key, i = ins.gm_key[1:]
        lo = i * t.sub_m if t.sub_m < t.block_m else 0
        hi = lo + (t.sub_m if t.sub_m < t.block_m else t.block_m)
        if p.layout == "contiguous":
            mb, nb = key
            rows = range(mb * t.block_m + lo, mb * t.block_m + hi)
            hits = [(e, r - starts[e]) for r in rows for e in range(len(starts))
                    if starts[e] <= r < starts[e] + p.m_per_expert[e]]
        else:
            e, j, nb = key
            hits = [(e, r) for r in range(j * t.block_m + lo, j * t.block_m + hi)
                    if r < p.m_per_expert[e]]
        tokens[tuple(key)] += len(hits)
        for h in hits:
            covered[(h, nb)] += 1
    return covered, sum(1 for n in tokens.values() if n == 0)


@settings(max_examples=30, deadline=None)
@given(p=grouped_shapes())
@example(p=GroupedGemmParams((0, 0), 256, 512))
@example(p=GroupedGemmParams((1, 600, 0, 129), 300, 700, "fp8", "fp4", layout="masked", block_m=256))
def test_every_routed_row_is_computed_exactly_once(chip, p):
    sched = grouped_gemm_schedule(chip, p)
    sched.check(chip)
    t = grouped_tiling(chip, p)
    blocks = expert_blocks(p, t)
    nbs = math.ceil(p.n / t.block_n)
    # FLOPs count the routed rows only
    assert sched.flops == 2.0 * sum(p.m_per_expert) * p.n * p.k
    # every (token, expert) row is in exactly one stored block per n-block, no block is empty
    covered, empty = _rows_of_stores(p, t, sched)
    parts = [len(sub_tiles(t.block_m, min(t.block_n, p.n - nb * t.block_n), t))
             if t.sub_n < t.block_n else 1 for nb in range(nbs)]      # column parts per n-block
    want = {((e, r), nb): parts[nb] for e, m in enumerate(p.m_per_expert) for r in range(m)
            for nb in range(nbs)}
    assert dict(covered) == want
    assert empty == 0
    # ... and in exactly one computed block: the blocks' valid rows tile each expert's rows
    for e, m in enumerate(p.m_per_expert):
        mine = [b for b in blocks if b.expert == e]
        assert sorted(r for b in mine for r in range(b.row0, b.row0 + b.valid)) == list(range(m))
        assert all(b.valid <= b.computed <= b.rows for b in mine)
    # the cube multiplies exactly the computed rows: MACs = rows computed x n x k
    macs = sum(i.m * i.n * i.k for _, i in _records(sched, "m", isa.Mmad))
    assert macs == sum(b.computed for b in blocks) * p.n * p.k
    assert sched.meta["padding_frac"] == pytest.approx(padding_frac(blocks))
    # the stores write every loaded row once, BF16 (2 B) per element
    stored = sum(i.size_bytes for _, i in _records(sched, "mte3", isa.Copy) if i.path == "ub_to_gm")
    assert stored == sum(b.rows for b in blocks) * p.n * 2
    # it runs (no deadlock: the flag protocol holds for any count, stage and core number)
    # and never beats its roofline
    run = _run(chip, sched)
    assert run.makespan_ns >= grouped_gemm_roofline(chip, p, sched)["bound_ns"] * (1 - 1e-9)


def test_masked_blocks_past_the_count_are_never_scheduled(chip):
    """An expert of 100 valid rows in a 1024-row masked buffer, BLOCK_M 256 split into two
    MAD sub-tiles of 128 rows: one block (not four), its tile loaded and stored whole, its
    second sub-tile (rows 128..255, no token) not multiplied."""
    p = GroupedGemmParams((100,), 512, 1024, layout="masked", max_m=1024, block_m=256)
    t = grouped_tiling(chip, p)
    assert (t.sub_m, t.sub_n) == (128, 256)
    (b,) = expert_blocks(p, t)
    assert (b.rows, b.valid, b.computed) == (256, 100, 128)
    sched = grouped_gemm_schedule(chip, p)
    mmads = [i for _, i in _records(sched, "m", isa.Mmad)]
    assert {i.m for i in mmads} == {128} and sum(i.m * i.n * i.k for i in mmads) == 128 * 512 * 1024
    loads_a = [i for _, i in _records(sched, "mte2", isa.Copy) if i.label == "load A"]
    assert sum(i.size_bytes for i in loads_a) == 2 * 256 * 1024     # one block, per n-block, FP8
    assert sched.meta["padding_frac"] == pytest.approx(28 / 128)
    # the contiguous layout pads the segment to BLOCK_M and multiplies all of it (S3)
    c = expert_blocks(GroupedGemmParams((100,), 512, 1024, block_m=256), t)
    assert [(b.rows, b.valid, b.computed) for b in c] == [(256, 100, 256)]


def test_counts_from_numpy_are_plain_ints(chip):
    """Routing hands NumPy counts; the params keep plain ints (hashable, JSON-ready meta)."""
    p = GroupedGemmParams(np.array([300, 0, 7]), 256, 512)
    assert p.m_per_expert == (300, 0, 7) and all(type(m) is int for m in p.m_per_expert)
    assert grouped_gemm_schedule(chip, p).meta["tokens"] == 307


def test_tiles_follow_the_layouts_rules(chip):
    contiguous = grouped_tiling(chip, GroupedGemmParams((3000, 3100), 4096, 7168))
    assert (contiguous.block_m, contiguous.block_n) == (CONTIGUOUS_BLOCK_M, 256)   # L0C: 256 x 256 fp32
    masked = grouped_tiling(chip, GroupedGemmParams((40, 50), 4096, 7168, layout="masked"))
    assert masked.block_m in MASKED_BLOCK_M_CANDIDATES
    assert masked.block_m * masked.block_n * 4 <= chip.buffers.capacity_bytes("l0c")
    fp4 = grouped_tiling(chip, GroupedGemmParams((3000,), 4096, 7168, weight_dtype="fp4", block_m=128))
    assert fp4.block_n == 256 and fp4.block_k in (256, 512)       # facts 3.5: <= 256 for dequant-B


# -- the Dequant-B path -----------------------------------------------------------------------

def test_fp4_weights_are_decoded_on_aiv0_and_pushed_to_l1(chip):
    p = GroupedGemmParams((512, 256), 512, 1024, weight_dtype="fp4")
    sched = grouped_gemm_schedule(chip, p)
    t = grouped_tiling(chip, p)
    m_blocks = len(expert_blocks(p, t))
    aic_b = [i for u, i in _records(sched, "mte2", isa.Copy) if u == "aic" and i.label == "load B"]
    assert aic_b == []                                       # the AIC loads no B
    fp4 = [i for u, i in _records(sched, "mte2", isa.Copy) if u == "aiv0"]
    assert sum(i.size_bytes for i in fp4) == m_blocks * p.n * p.k // 2   # packed FP4, per m-block
    to_l1 = [i for u, i in _records(sched, "mte3", isa.Copy) if u == "aiv0"]
    assert {i.path for i in to_l1} == {"ub_to_l1"}
    assert sum(i.size_bytes for i in to_l1) == m_blocks * p.n * p.k     # FP8 after decoding
    dec = {i for _, i in _records(sched, "v", isa.VecOp)}
    assert len(dec) == 1
    (d,) = dec
    assert d.decode_bytes == t.block_n // 2 * t.block_k                 # a stage template of FP8
    assert {i.dtype for _, i in _records(sched, "m", isa.Mmad)} == {"fp8"}


def test_few_tokens_with_fp4_weights_are_decoder_bound(chip):
    """16 tokens per expert: the cube has little to do and AIV0's decoder (64 B/cycle of FP8
    out, facts 1.2, S3) sets the time, as S3's refinement cost adds decode time beyond the
    compute; with FP8 weights the same shape is faster."""
    p = GroupedGemmParams((16,) * 8, 2048, 2048, weight_dtype="fp4", layout="masked")
    sched = grouped_gemm_schedule(chip, p)
    bound = grouped_gemm_roofline(chip, p, sched)
    assert bound["decode_ns"] == bound["bound_ns"]
    run = _run(chip, sched)
    assert run.makespan_ns >= bound["decode_ns"]
    fp8 = GroupedGemmParams((16,) * 8, 2048, 2048, layout="masked")
    assert _run(chip, grouped_gemm_schedule(chip, fp8)).makespan_ns < run.makespan_ns


def test_fp4_weights_cost_little_when_the_cube_binds(chip):
    """3072 tokens per expert: the decode of one K block (~1000 cycles) hides under its
    MMADs (~2000 cycles), so FP4 weights run within 3% of FP8 ones."""
    fp8 = _tflops(chip, grouped_gemm_schedule(chip, GroupedGemmParams((3072,), 4096, 7168)))
    fp4 = _tflops(chip, grouped_gemm_schedule(chip, GroupedGemmParams((3072,), 4096, 7168,
                                                                      weight_dtype="fp4")))
    assert fp4 == pytest.approx(fp8, rel=0.03)


# -- CANN's weight-quant grouped matmul (impl cann) ---------------------------------------------

def _cann(counts, n=4096, k=4096, **kw):
    return GroupedGemmParams(tuple(counts), n, k, "fp8", "fp4", layout="packed", impl="cann", **kw)


def test_cann_tiles_and_blocks_follow_its_tiling_and_controller(chip):
    """grouped_weight_quant_batch_matmul_tiling: baseM 256, baseN 256 (128 below 256 x cores
    columns), K tiles of 4 x baseK 64, the weight tile double-buffered in L1; the controller
    cuts an expert of 257..1023 rows into 2 or 4 equal blocks."""
    t = grouped_tiling(chip, _cann((16,) * 4))
    assert (t.block_m, t.block_n, t.block_k, t.k_l0, t.l1_stages) == (256, 128, 256, 64, 2)
    assert grouped_tiling(chip, _cann((16,), n=256 * chip.num_ai_cores)).block_n == 256
    assert [cann_block_m(m) for m in (1, 256, 300, 512, 513, 1023, 1024, 5000)] == \
        [256, 256, 150, 256, 129, 256, 256, 256]
    blocks = expert_blocks(_cann((300, 40, 0)), t)
    assert [(b.expert, b.rows) for b in blocks] == [(0, 150), (0, 150), (1, 40)]
    assert all(b.rows == b.valid == b.computed for b in blocks)     # no padding: its own rows


def test_cann_decodes_fp4_on_both_aivs_once_per_block(chip):
    """C:V = 1:2 (weight_quant_basic_block.h): each AIV decodes half of every weight tile with
    the bit-op VF, the cube multiplies FP8, C leaves L0C straight to GM; an expert of up to
    256 rows is one basic block, so its weights are decoded once."""
    p = _cann((40, 200), n=512, k=1024)
    sched = grouped_gemm_schedule(chip, p)
    per_unit = Counter()
    for u, i in _records(sched, "mte2", isa.Copy):
        if u.startswith("aiv"):
            per_unit[u] += i.size_bytes
    assert per_unit["aiv0"] == per_unit["aiv1"] == 2 * p.n * p.k // 2 // 2   # 2 experts, halves
    vfs = {i for _, i in _records(sched, "v", isa.VecOp)}
    assert {v.op_class for v in vfs} == {"vf_alu"} and all(v.decode_bytes == 0 for v in vfs)
    assert {i.dst for _, i in _records(sched, "fix", isa.Fixpipe)} == {"gm"}
    assert {i.dtype for _, i in _records(sched, "m", isa.Mmad)} == {"fp8"}


def test_cann_decode_beats_one_aiv_at_decode_shapes(chip):
    """16 rows per expert: both AIVs decode, so the kernel is faster than S3's one-AIV
    Dequant-B on the same shape, and its decode bound is lower."""
    cann = _cann((16,) * 8, n=2048, k=2048)
    s3 = GroupedGemmParams((16,) * 8, 2048, 2048, "fp8", "fp4", layout="masked")
    assert grouped_gemm_roofline(chip, cann)["decode_ns"] < grouped_gemm_roofline(chip, s3)["decode_ns"]
    t_cann = _run(chip, grouped_gemm_schedule(chip, cann)).makespan_ns
    assert t_cann < _run(chip, grouped_gemm_schedule(chip, s3)).makespan_ns
    assert t_cann >= grouped_gemm_roofline(chip, cann)["bound_ns"]


# -- roofline ---------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [
    GroupedGemmParams((300, 0, 513), 768, 1024),
    GroupedGemmParams((300, 17, 513), 700, 1000, "fp8", "fp4", layout="masked", max_m=600),
    GroupedGemmParams((100, 200), 512, 512, "bf16", "bf16", block_m=64),
])
def test_roofline_matches_the_schedule_and_bounds_the_run(chip, p):
    sched = grouped_gemm_schedule(chip, p)
    bound = grouped_gemm_roofline(chip, p, sched)
    reads = sum(i.size_bytes for _, i in _records(sched, "mte2", isa.Copy))
    assert bound["l2_ns"] == pytest.approx(reads / chip.memory.l2_bandwidth_GBps)
    dt = p.cube_dtype
    peak = 2 * chip.cube.macs_per_cycle[dt] * chip.aic_freq_GHz * chip.num_ai_cores
    assert bound["compute_ns"] == pytest.approx(2 * sched.meta["rows_computed"] * p.n * p.k / peak)
    assert _run(chip, sched).makespan_ns >= bound["bound_ns"]


# -- errors -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kw,message", [
    (dict(m_per_expert=()), "m_per_expert is empty"),
    (dict(m_per_expert=(5, -1)), "m_per_expert[1] = -1: expected an integer >= 0"),
    (dict(act_dtype="bf16", weight_dtype="fp8"), "activations bf16 x weights fp8: expected one of"),
    (dict(layout="ragged"), "layout 'ragged': expected one of contiguous, masked, packed"),
    (dict(layout="masked", max_m=10), "max_m = 10 is below the largest expert count 64"),
    (dict(block_m=100), "block_m = 100: expected 0 (heuristic) or a multiple of 16"),
    (dict(weight_dtype="fp4", block_k=1024), "FP4 weights: BLOCK_K = 1024"),
    (dict(block_m=512, block_n=512), "exceeds L0C"),
    (dict(impl="cann"), "impl cann is CANN's weight-quant grouped matmul"),
    (dict(layout="packed"), "layout packed is the input of CANN's grouped matmul"),
])
def test_impossible_grouped_gemms_are_rejected(chip, kw, message):
    args = dict(m_per_expert=(64, 32), n=512, k=1024)
    args.update(kw)
    with pytest.raises(ScheduleError) as info:
        grouped_gemm_schedule(chip, GroupedGemmParams(**args))
    assert message in str(info.value)
