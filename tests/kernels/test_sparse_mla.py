"""Sparse MLA schedule generator: structure, FLOPs, buffer plans and user errors (no SimPy)."""

from __future__ import annotations

import pytest

from simnode.errors import ScheduleError
from simnode.instr import isa
from simnode.kernels import sparse_mla_core as core
from simnode.instr.schedule import to_records
from simnode.kernels.sparse_mla import (KV_ROW_BYTES, SparseMlaParams, drain_flags, flops,
                                        item_blocks, select_tokens, sparse_mla_schedule)

SMALL = dict(n_q=64, kv_len=1024, topk=256)


def _sched(chip, **kw):
    return sparse_mla_schedule(chip, SparseMlaParams(**{**SMALL, **kw}))


def test_flops_follow_the_published_formula():
    p = SparseMlaParams(n_q=4096, topk=640)
    assert flops(p) == 2.0 * 4096 * 64 * 640 * (512 + 512)
    d = SparseMlaParams(mode="decode", batch=64, s_q=4, topk_main=128, topk_extra=512)
    assert flops(d) == 2.0 * 256 * 64 * 640 * 1024


@pytest.mark.parametrize("kw", [{}, {"kv_dtype": "fp8"}, {"kv_dtype": "fp4"},
                                {"heads_per_core": 32}, {"vector_cores_per_cube": 1},
                                {"vector_cores_per_cube": 1, "b_topk": 128}, {"b_topk": 128},
                                {"mode": "decode", "batch": 4, "extra_dtype": "fp4"}])
def test_shipped_variants_pass_the_950dt_buffer_check(chip, kw):
    _sched(chip, **kw).check(chip)


def test_oversized_b_topk_is_rejected_naming_the_buffer(chip):
    with pytest.raises(ScheduleError, match=r"L0B of aic overflows: demand 131072 B \(K/V tiles x 2 131072 B\) exceeds the capacity 65536 B"):
        _sched(chip, b_topk=256).check(chip)


@pytest.mark.parametrize("kw, msg", [
    ({"vector_cores_per_cube": 3}, "vector_cores_per_cube = 3: expected 1 or 2"),
    ({"heads_per_core": 48}, "heads_per_core = 48: expected a multiple of 16 that divides heads = 64"),
    ({"b_topk": 40}, "b_topk = 40: expected a positive multiple of 16"),
    ({"topk": 2048}, "kv top-k 2048 over length 1024: expected 0 < top-k <= length"),
    ({"kv_dtype": "int8"}, "kv dtype 'int8': expected one of bf16, fp8, fp4"),
    ({"d_qk": 576}, "d_qk = 576, d_v = 512: the MLA latent is shared by K and V"),
])
def test_bad_parameters_get_a_clear_message(chip, kw, msg):
    with pytest.raises(ScheduleError, match=msg.replace("(", r"\(")):
        _sched(chip, **kw)


def test_each_block_gathers_its_tokens_two_rows_per_request_each_its_own_l2_region(chip):
    s = _sched(chip, n_q=32)
    copies = [i for prog in s.cores for (u, pp), ins in prog.pipes.items() if pp == "mte2" and u != "aic"
              for i in ins if type(i) is isa.Copy and i.label.startswith("KV gather")]
    # gather2 (facts 3.4): one request per 2 tokens, each token its own L2 region
    assert len(copies) == 32 * 256 // 2
    assert {(c.size_bytes, len(c.regions)) for c in copies} == {(2048, 2)}
    assert len({k for c in copies for k in c.regions}) <= 1024
    single = [i for prog in _sched(chip, n_q=32, gather2=False).cores
              for (u, pp), ins in prog.pipes.items() if pp == "mte2" and u != "aic"
              for i in ins if type(i) is isa.Copy and i.label.startswith("KV gather")]
    assert len(single) == 32 * 256 and {c.size_bytes for c in single} == {1024}


def test_gather2_keeps_32_tokens_within_the_16_entry_queue(chip):
    def stalls(g2):
        s = _sched(chip, n_q=32, gather2=g2)
        prog = s.cores[0]
        return sum(1 for i in prog.pipes[("aiv0", "mte2")]
                   if type(i) is isa.SetFlag and i.dst == "v" and i.event == 2)
    assert stalls(True) == 0
    assert stalls(False) == len(item_blocks(SparseMlaParams(**SMALL), 0, 0,
                                            select_tokens(SparseMlaParams(**SMALL))))


def test_skip_scale_off_drains_every_later_block_and_on_drains_the_share(chip):
    p = SparseMlaParams(**SMALL)
    blocks = [b for q in range(8) for b in item_blocks(p, q, q, select_tokens(p))]
    off = drain_flags(SparseMlaParams(**SMALL, skip_scale_threshold=0), blocks)
    assert off == [i > 0 for i in range(len(blocks))]
    on = drain_flags(SparseMlaParams(**SMALL, rescale_share=0.25), blocks)
    firsts = sum(b.first for b in blocks) - 1
    assert sum(on) - firsts == (len(blocks) - firsts - 1) // 4


def test_heads_below_the_saturating_m_put_tokens_on_the_mmad_m(chip):
    s = _sched(chip, n_q=8, heads_per_core=32)
    mm = [i for i in s.cores[0].pipes[("aic", "m")] if type(i) is isa.Mmad]
    assert all(i.m >= chip.cube.saturating_m_rows for i in mm)
    assert s.meta["orientation"] == "tokens-as-M"


def test_generation_is_deterministic(chip):
    assert to_records(_sched(chip, n_q=8)) == to_records(_sched(chip, n_q=8))
    assert to_records(_sched(chip, n_q=8, seed=1)) != to_records(_sched(chip, n_q=8))


def test_l0c_holds_one_o_and_one_p_and_fixpipe_follows_the_kernels_order(chip):
    """S2 kernel_body.h: l0c_p_buf = l0c_out_buf + MMA_M * D_VO (one O, one P, no spare
    regions); FIX copies P[g], then the rescale drain before O[g-1], then the O of an item
    ending at g-1; a rescale drain holds the whole O += S V back (L0C_O_EMPTY), an item's
    first O += S V waits n-tile by n-tile (unit_flag)."""
    nq = chip.num_ai_cores + 1                 # core 0 runs items 0 and num_ai_cores
    s = _sched(chip, n_q=nq, rescale_share=0.5)
    prog = s.cores[0]
    l0c = [b for b in prog.buffers if b.unit == "aic" and b.buffer == "l0c"]
    assert sorted(b.size_bytes for b in l0c) == [64 * 64 * 4, 64 * 512 * 4]
    fix = [("P" if i.label == "P -> UB" else "O") for i in prog.pipes[("aic", "fix")]
           if type(i) is isa.Fixpipe]
    p = SparseMlaParams(**{**SMALL, "n_q": nq, "rescale_share": 0.5})
    blocks = [b for q in (0, nq - 1) for b in item_blocks(p, q, q, select_tokens(p))]
    drain = drain_flags(p, blocks)
    expect = []
    n = len(blocks)
    for g in range(n + 1):
        expect += ["P"] if g < n else []
        expect += ["O"] * 4 if g >= 1 and drain[g - 1] and not blocks[g - 1].first else []
        expect += ["O"] * 4 if g >= 1 and (g == n or blocks[g].first) else []
    assert fix == expect
    # M: every P after the first waits for the previous P's copy-out (event 0); an O += S V
    # after a rescale drain waits for all four O n-tiles before its first MMAD
    m = prog.pipes[("aic", "m")]
    waits_p = [i for i in m if type(i) is isa.WaitFlag and i.src == "fix" and i.event == 0]
    assert len(waits_p) == n - 1
    rescales = sum(1 for b, d in zip(blocks, drain) if d and not b.first)
    assert rescales >= 1
    runs, cur = [], 0
    for i in m:
        if type(i) is isa.WaitFlag and i.src == "fix" and i.event >= 1:
            cur += 1
        elif type(i) is isa.Mmad:
            if cur:
                runs.append(cur)
            cur = 0
    assert runs.count(4) == rescales and runs.count(1) == 4 and set(runs) <= {1, 4}


@pytest.mark.parametrize("vpc", [2, 1])
def test_the_aiv_preprocesses_indices_after_softmax_as_the_kernel_orders_its_vector_work(chip,
                                                                                          vpc):
    """facts 3.4, S2: the vector step s is ND2NZ(s+a), softmax(s+1), index preprocessing(s+g),
    O scale(s). With one AIV per cube the gather lead g shrinks to the ND2NZ lead a, and the
    preprocessing of block b must come before ND2NZ(b) (which needs the gather it releases),
    so it moves in front of the step's ND2NZ and follows softmax(s) of the step before."""
    p = SparseMlaParams(**{**SMALL, "vector_cores_per_cube": vpc})
    a, g = core.leads(p, core.choose_plan(chip, p, KV_ROW_BYTES["bf16"]))
    assert (g > a) is (vpc == 2)
    labels = [i.label for i in sparse_mla_schedule(chip, p).cores[0].pipes[("aiv0", "v")]
              if type(i) is isa.VecOp]
    pre = [k for k, lab in enumerate(labels) if lab == "index preprocess"]
    softmax = [k for k, lab in enumerate(labels) if lab == "softmax"]
    assert len(pre) == len(softmax) >= 4     # one of each per block
    for b in range(g, len(pre)):
        last = max(i for i, k in enumerate(softmax) if k < pre[b])   # block of that softmax
        assert last == (b - g + 1 if g > a else b - g)
