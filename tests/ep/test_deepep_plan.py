"""DeepEP plan: record sizes and token conservation over random routings (no SimPy).

Checks, for any routing: each token reaches each of its destination ranks exactly once
(receive slots), combine returns one partial row per (token, source rank), SQEs are
ceil(tokens / 6) per (rank, AIV, peer), self-rank tokens are copied, not sent.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simnode.ep.deepep_plan import (DeepEPParams, aiv_ranges, build_plan, receive_slots,
                                     record_sizes, token_destinations)
from simnode.ep.routing import dest_ranks_per_token, route_supernode


def test_record_sizes_at_the_published_configuration():
    s = record_sizes(DeepEPParams(8, 16384, 7168, 6, 256, "fp8", "bf16"))
    assert s.hidden_row_bytes == 7168                      # FP8 hidden 7168
    assert s.scales_bytes == 7168 // 128 * 4               # one fp32 scale per 128 channels
    assert s.metadata_bytes == 320                         # 224 + 48 + 24 + 8 = 304 -> 32 B aligned
    assert s.dispatch_wire_bytes == 7168 + 320
    assert s.dispatch_logical_bytes == 7168 + 224 + 48 + 24
    assert s.sqe_bytes == 4 * 64 and s.combine_wqe_bytes == 2 * 64
    assert s.combine_row_bytes == 7168 * 2                 # BF16
    assert s.combine_wire_bytes == 7168 * 2 + 32           # + 6 fp32 weights rounded to 32 B


def test_aiv_ranges_are_contiguous_ceil_splits():
    assert aiv_ranges(130, 64).tolist()[:4] == [0, 3, 6, 9]
    assert aiv_ranges(130, 64)[-1] == 130                  # trailing AIVs get nothing
    assert aiv_ranges(16384, 64)[1] == 256


def test_token_destinations_dedups_and_counts_experts_per_rank():
    topk = np.array([[0, 1, 40, 41, 42, 250],              # ranks 0 (x2), 1 (x3), 7
                     [5, 70, 100, 130, 160, 200]])         # ranks 0, 2, 3, 4, 5, 6
    tok, dst, k_on = token_destinations(topk, 32)
    assert list(zip(tok.tolist(), dst.tolist(), k_on.tolist())) == [
        (0, 0, 2), (0, 1, 3), (0, 7, 1),
        (1, 0, 1), (1, 2, 1), (1, 3, 1), (1, 4, 1), (1, 5, 1), (1, 6, 1)]


# -- random routings ---------------------------------------------------------------------------
@st.composite
def routings(draw):
    """(list of [T, k] expert ids per rank, DeepEPParams): random arrays or seeded policies."""
    num_ranks = draw(st.integers(2, 16))
    per_rank = draw(st.sampled_from([1, 2, 3, 4, 8]))
    num_experts = num_ranks * per_rank
    top_k = draw(st.integers(1, min(8, num_experts)))
    tokens = draw(st.integers(0, 300))
    num_aiv = draw(st.sampled_from([1, 7, 64]))
    seed = draw(st.integers(0, 2**16))
    how = draw(st.sampled_from(["array", "uniform", "zipf", "hot"]))
    if how == "array":
        rng = np.random.default_rng(seed)
        topk = [np.argsort(rng.random((tokens, num_experts)), axis=1)[:, :top_k]
                for _ in range(num_ranks)]
    else:
        extra = {}
        if how == "zipf":
            extra = {"zipf_exponent": draw(st.floats(0, 2))}
        elif how == "hot":
            hot = min(draw(st.integers(1, 4)), num_experts - top_k)
            if hot < 1:
                how, extra = "uniform", {}
            else:
                extra = {"hot_experts": list(range(hot)),
                         "hot_share": min(hot, top_k) / top_k * draw(st.floats(0, 1))}
        topk = list(route_supernode(tokens, num_experts, top_k, num_ranks, how, seed, **extra))
    p = DeepEPParams(num_ranks, tokens, 256, top_k, num_experts, "fp8", "bf16", num_aiv=num_aiv)
    return topk, p


@settings(max_examples=120, deadline=None)
@given(routings())
def test_each_token_reaches_each_destination_rank_exactly_once(case):
    topk, p = case
    plan = build_plan(topk, p)
    R = p.num_ranks
    dest = np.stack([dest_ranks_per_token(t, p.num_experts, R) for t in topk])   # [r, T, d]
    for d in range(R):
        rows = receive_slots(topk, p, d)
        src_tok = {(int(r), int(t)) for r, t, _ in rows}
        assert len(src_tok) == len(rows), "a (source, token) lands twice"
        assert sorted(rows[:, 2].tolist()) == list(range(len(rows))), "slots not 0..n-1"
        expected = {(r, int(t)) for r in range(R) for t in np.flatnonzero(dest[r, :, d])}
        assert src_tok == expected
        counts = np.bincount(rows[:, 0].astype(np.int64), minlength=R)
        assert counts.tolist() == plan.pair_tokens[:, d].tolist()


@settings(max_examples=120, deadline=None)
@given(routings())
def test_plan_counts_conserve_tokens(case):
    topk, p = case
    plan = build_plan(topk, p)
    R, A = p.num_ranks, p.num_aiv
    starts = np.append(aiv_ranges(p.tokens_per_rank, A), p.tokens_per_rank)
    for r in range(R):
        dest = dest_ranks_per_token(topk[r], p.num_experts, R)
        for a in range(A):
            assert plan.aiv_tokens[r, a].tolist() == dest[starts[a]:starts[a + 1]].sum(axis=0).tolist()
        # combine: exactly one partial row per (token, source rank), tasks of <= 8 rows
        for d in range(R):
            assert plan.combine_tokens[d, :, r].sum() == plan.pair_tokens[r, d]
    assert (plan.combine_tasks == -(-plan.combine_tokens // p.combine_task_tokens)).all()
    # combine spreads a pair's rows over the AIVs within one row of each other
    spread = plan.combine_tokens.max(axis=1) - plan.combine_tokens.min(axis=1)
    assert spread.max(initial=0) <= 1
    # SQEs: ceil(tokens / 6) per (rank, AIV, peer); none for self-rank tokens
    idx = np.arange(R)
    expect = -(-plan.aiv_tokens // p.tokens_per_sqe)
    expect[idx, :, idx] = 0
    assert (plan.aiv_sqes == expect).all()
    assert (plan.aiv_sqes[idx, :, idx] == 0).all()
    # the [r, d] and [r] reductions the timing model uses match the whole arrays
    assert (plan.pair_sqes == plan.aiv_sqes.sum(axis=1)).all()
    assert (plan.aiv_sqes_max == plan.aiv_sqes.sum(axis=2).max(axis=1)).all()
    assert (plan.combine_pair_tasks == plan.combine_tasks.sum(axis=1)).all()
    # a plan built from the routes as they are generated, one rank at a time, is the same
    again = build_plan(iter(topk), p)
    assert (again.aiv_tokens == plan.aiv_tokens).all() and (again.reduce_rows == plan.reduce_rows).all()
    # network receives exclude self-rank copies
    assert plan.received(include_self=False).tolist() == (plan.pair_tokens.sum(axis=0)
                                           - np.diag(plan.pair_tokens)).tolist()
    assert plan.received().sum() == plan.pair_tokens.sum()
    # every (token, expert) pick lands on its expert
    assert plan.expert_tokens.sum() == R * p.tokens_per_rank * p.top_k
    # reductions: tokens with >= 2 of their experts on the owner, and those experts' rows
    epr = p.num_experts // R
    for r in range(R):
        on = np.stack([(topk[r] // epr == d).sum(axis=1) for d in range(R)])   # [d, T]
        assert plan.reduce_tokens[:, r].tolist() == (on >= 2).sum(axis=1).tolist()
        assert plan.reduce_rows[:, r].tolist() == np.where(on >= 2, on, 0).sum(axis=1).tolist()


@pytest.mark.parametrize("tokens", [1, 5, 6, 7, 64 * 6 + 1])
def test_sqes_pack_six_tokens_when_every_token_goes_to_one_peer(tokens):
    # 2 ranks, 2 experts: every token picks expert 1 (on rank 1): rank 0 sends all, rank 1 none
    topk = [np.ones((tokens, 1), dtype=np.int32)] * 2
    p = DeepEPParams(2, tokens, 256, 1, 2, "fp8", "bf16")
    plan = build_plan(topk, p)
    per_aiv = np.diff(np.append(aiv_ranges(tokens, 64), tokens))
    assert plan.pair_tokens.tolist() == [[0, tokens], [0, tokens]]
    assert plan.pair_sqes.tolist() == [[0, sum(math.ceil(n / 6) for n in per_aiv)], [0, 0]]
    assert plan.received(include_self=False).tolist() == [0, tokens]   # rank 1's own are local


def test_build_plan_wants_one_routing_per_rank():
    p = DeepEPParams(4, 8, 256, 1, 4, "fp8", "bf16")
    with pytest.raises(ValueError, match="routing for 3 ranks, expected 4"):
        build_plan([np.zeros((8, 1), dtype=np.int32)] * 3, p)
    with pytest.raises(ValueError, match="more than 4 ranks"):
        build_plan([np.zeros((8, 1), dtype=np.int32)] * 5, p)
