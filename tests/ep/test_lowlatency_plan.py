"""Low-latency plan (no SimPy): conservation, alignment, window sizes, layouts, limits,
determinism, over the published A3 case and random routings (with unselected -1 entries)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simnode.errors import ConfigError
from simnode.ep.aiv import split
from simnode.ep.lowlatency_limits import A3_OP_LIMITS, API_LIMITS, check_limits
from simnode.ep.lowlatency_plan import (SLOT_ALIGN, STATE_WINDOW_BYTES, LLShape, build_plan,
                                        combine_slot_bytes, record_bytes, slot_bytes)
from simnode.ep.routing import route_supernode

#: the published A3 case (facts v4-decode 3): 128 tokens per rank, hidden 7168, top-8 of 256
A3 = dict(tokens_per_rank=128, max_tokens_per_rank=128, hidden=7168, top_k=8, num_experts=256,
          num_aiv=48, dispatch_dtype="int8")


def a3_plan(R, seed=0):
    shape = LLShape(R, **A3)
    return build_plan(route_supernode(128, 256, 8, R, "uniform", seed), shape)


@st.composite
def cases(draw):
    R = draw(st.sampled_from([2, 4, 8]))
    E = R * draw(st.integers(1, 4))
    K = draw(st.integers(1, min(E, 6)))
    T = draw(st.integers(0, 12))
    A = draw(st.integers(1, 7))
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    topk = np.stack([np.stack([rng.permutation(E)[:K] for _ in range(T)]) if T else
                     np.zeros((0, K), np.int64) for _ in range(R)])
    drop = rng.random(topk.shape) < draw(st.sampled_from([0.0, 0.3]))
    topk = np.where(drop, -1, topk)
    shape = LLShape(R, T, T + draw(st.integers(0, 3)), 1024, K, E, A,
                    draw(st.sampled_from(["int8", "mxfp8", "bf16"])))
    return build_plan(topk, shape)


# -- record and slot sizes -------------------------------------------------------------------
@pytest.mark.parametrize("dtype, record, slot", [
    ("int8", 7212, 7680),       # ceil32(7168) + 32-B scale slot + 12-B triple
    ("mxfp8", 7404, 7680),      # 7168 + 224 E8M0 scales + triple (A5 kernel's table)
    ("mxfp4", 3820, 4096),      # 3584 + 224 + triple
    ("bf16", 14380, 14848),
])
def test_record_and_slot_bytes_at_hidden_7168(dtype, record, slot):
    assert record_bytes(7168, dtype) == record
    assert slot_bytes(7168, dtype) == slot
    assert slot % SLOT_ALIGN == 0


def test_combine_slot_is_the_bf16_row_aligned():
    assert combine_slot_bytes(7168) == 14336
    assert combine_slot_bytes(7000) == 14336          # 14000 up to 512


def test_split_gives_the_remainder_to_the_first_parts():
    assert split(1024, 48).tolist() == [22] * 16 + [21] * 32
    assert split(3, 5).tolist() == [1, 1, 1, 0, 0]


# -- conservation ----------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(cases())
def test_every_pair_is_written_once_and_comes_back_once(plan):
    s = plan.shape
    w = plan.dispatch
    valid = {(r, t, k) for r, t, k in zip(*np.nonzero(plan.topk >= 0))}
    written = list(zip(w.src.tolist(), w.token.tolist(), w.k.tolist()))
    assert len(written) == len(set(written)) and set(written) == valid
    assert (w.expert == plan.topk[w.src, w.token, w.k]).all()
    assert (w.dst == w.expert // s.experts_per_rank).all()
    # counts add up: statuses, received rows, rows copied, packed rows
    assert plan.counts.sum() == len(valid)
    assert plan.pair_rows().sum() == len(valid)
    for d in range(s.num_ranks):
        assert plan.status_counts(d).sum() == plan.recv_rows()[d] == plan.copy_rows()[d].sum()
        assert plan.expert_token_nums()[d].sum() == len(plan.packed_rows(d))
    assert (plan.ep_recv_counts().sum(axis=2) == plan.expert_token_nums()).all()
    # combine: one write-back per dispatched pair, to its source, at slot token * K + k
    cw = plan.combine_writes()
    back = list(zip(cw.dst.tolist(), cw.token.tolist(), cw.k.tolist()))
    assert sorted(back) == sorted(written)
    assert (cw.slot == cw.token * s.top_k + cw.k).all()
    assert (cw.src == cw.expert // s.experts_per_rank).all()
    assert plan.reduce_rows().sum(axis=1).tolist() == (plan.topk >= 0).sum(axis=(1, 2)).tolist()


@settings(max_examples=40, deadline=None)
@given(cases())
def test_aiv_shares_and_order(plan):
    s = plan.shape
    w = plan.dispatch
    for r in range(s.num_ranks):
        mine = w.src == r
        n = split(int(mine.sum()), s.num_aiv)
        assert np.bincount(w.aiv[mine], minlength=s.num_aiv).tolist() == n.tolist()
        # contiguous shares in flat (token, k) order, each AIV's sequence 0, 1, ...
        flat = w.token[mine] * s.top_k + w.k[mine]
        assert (np.diff(flat) > 0).all() and (np.diff(w.aiv[mine]) >= 0).all()
        for a in range(s.num_aiv):
            assert w.order[mine & (w.aiv == a)].tolist() == list(range(n[a]))
    cw = plan.combine_writes()
    for d in range(s.num_ranks):
        mine = cw.src == d
        assert np.bincount(cw.aiv[mine], minlength=s.num_aiv).tolist() == \
            split(int(mine.sum()), s.num_aiv).tolist()


# -- alignment and windows ---------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(cases())
def test_slots_are_aligned_distinct_and_inside_the_window(plan):
    s = plan.shape
    w = plan.dispatch
    half = s.window()
    assert (w.offset % SLOT_ALIGN == 0).all()
    assert (w.slot < s.max_tokens_per_rank).all()
    assert (w.offset >= half.combine_half).all()
    assert (w.offset + s.record_bytes <= half.half).all()
    for d in range(s.num_ranks):
        off = w.offset[w.dst == d]
        assert len(np.unique(off)) == len(off)           # no two records share a slot
    cw = plan.combine_writes()
    assert (cw.offset % SLOT_ALIGN == 0).all()
    assert (cw.offset + s.combine_row_bytes <= half.combine_half).all()
    for r in range(s.num_ranks):
        off = cw.offset[cw.dst == r]
        assert len(np.unique(off)) == len(off)


def test_window_of_the_published_case_does_not_depend_on_the_ep_size():
    for R in (8, 32, 256):
        win = LLShape(R, **A3).window()
        assert win.dispatch_half == 128 * 7680 * 256        # max tokens x slot x experts
        assert win.combine_half == 128 * 14336 * 8           # max tokens x BF16 slot x K
        assert win.data == 2 * (win.dispatch_half + win.combine_half)
        assert win.total == win.data + STATE_WINDOW_BYTES


def test_status_blocks_fill_one_state_half_without_overlap():
    plan = a3_plan(8)
    owner, offset = plan.status_dst_offset()
    assert owner.tolist() == (np.arange(256) // 32).tolist()
    for d in range(8):
        o = offset[:, owner == d].reshape(-1)
        assert len(np.unique(o)) == o.size and o.max() + 32 <= 500 * 1024
    assert np.bincount(plan.status_writers()).tolist() == split(256, 48).tolist()


# -- the published case ------------------------------------------------------------------------
@pytest.mark.parametrize("R", [8, 32])
def test_published_case_writes_per_aiv(R):
    plan = a3_plan(R)
    per = plan.dispatch.per_aiv(R, 48)
    assert per.max() == 22 and per.min() == 21              # 1024 pairs over 48 AIVs
    remote = plan.dispatch.per_aiv(R, 48, remote_only=True)
    assert remote.max() == 22                               # some AIV writes only to peers
    assert abs(remote.mean() - 1024 / 48 * (R - 1) / R) < 0.3
    assert plan.poll_ranges()[:, 1].max() == 256            # E statuses per receiver at any R


# -- layouts -----------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(cases())
def test_packed_and_masked_layouts(plan):
    s = plan.shape
    for d in range(s.num_ranks):
        rows = plan.packed_rows(d)
        assert len(rows) <= s.packed_capacity_rows
        pos = plan.masked_positions(d)
        le = pos[:, 0]
        assert (np.diff(le) >= 0).all()                     # expert-contiguous
        nums = plan.expert_token_nums()[d]
        for e in range(s.experts_per_rank):
            assert pos[le == e, 1].tolist() == list(range(nums[e]))
        assert (pos[:, 1] < s.masked_rows_per_expert).all()
        # within an expert, sources in order (the kernel's status order)
        for e in range(s.experts_per_rank):
            assert (np.diff(rows[le == e, 0]) >= 0).all()


# -- limits --------------------------------------------------------------------------------------
@pytest.mark.parametrize("change, limits, key, words, names_limits", [
    (dict(tokens_per_rank=513, max_tokens_per_rank=513), API_LIMITS, "tokens_per_rank", "0..512", True),
    (dict(top_k=17), API_LIMITS, "top_k", "1..16", True),
    (dict(num_experts=512 + 8), API_LIMITS, "num_experts", "1..512", True),
    (dict(num_experts=1024 + 8), A3_OP_LIMITS, "num_experts", "1..1024", True),
    (dict(num_experts=260), API_LIMITS, "num_experts", "a multiple of num_ranks (8)", False),
    (dict(hidden=512), API_LIMITS, "hidden", "1024..8192", True),
    (dict(dispatch_dtype="mxfp8"), A3_OP_LIMITS, "dispatch_dtype", "one of int8, bf16", True),
    (dict(max_tokens_per_rank=64), API_LIMITS, "max_tokens_per_rank", "at least tokens_per_rank (128)", False),
])
def test_limits_are_errors_with_clear_messages(change, limits, key, words, names_limits):
    shape = LLShape(8, **{**A3, **change})
    with pytest.raises(ConfigError) as exc:
        check_limits(shape, limits, source="ll.yaml")
    msg = str(exc.value)
    assert msg.startswith(f"ll.yaml: {key} = ") and f"expected {words}" in msg
    assert (limits.name in msg) == names_limits


def test_ep_size_limits():
    with pytest.raises(ConfigError, match="num_ranks = 1: expected an EP size in 2..768"):
        check_limits(LLShape(1, **A3), API_LIMITS)
    check_limits(LLShape(8, **{**A3, "num_experts": 1024}), A3_OP_LIMITS)      # the A3 op allows it


def test_window_over_hbm_is_an_error():
    shape = LLShape(8, **{**A3, "tokens_per_rank": 512, "max_tokens_per_rank": 512, "num_experts": 1024})
    need = shape.window().total
    check_limits(shape, A3_OP_LIMITS, hbm_capacity_bytes=need)
    with pytest.raises(ConfigError, match="a window that fits the rank's HBM") as exc:
        check_limits(shape, A3_OP_LIMITS, hbm_capacity_bytes=need - 1)
    assert f"{need:,} B" in str(exc.value)


def test_routing_that_does_not_fit_the_shape_is_refused():
    shape = LLShape(2, 3, 3, 1024, 2, 4, 2)
    with pytest.raises(ValueError, match="shape"):
        build_plan(np.zeros((2, 4, 2), np.int64), shape)
    with pytest.raises(ValueError, match="-1..3"):
        build_plan(np.full((2, 3, 2), 4), shape)


# -- determinism -----------------------------------------------------------------------------------
def test_same_routing_same_plan():
    a, b = a3_plan(16, seed=3), a3_plan(16, seed=3)
    for f in ("src", "aiv", "order", "dst", "token", "k", "expert", "slot", "offset"):
        assert np.array_equal(getattr(a.dispatch, f), getattr(b.dispatch, f))
        assert np.array_equal(getattr(a.combine_writes(), f), getattr(b.combine_writes(), f))
    assert np.array_equal(a.copy_rows(), b.copy_rows())
