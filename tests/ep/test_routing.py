"""MoE routing: determinism, distinct picks, skew, placement, DeepEP counts, trace files."""

import numpy as np
import pytest

from simnode.errors import ConfigError
from simnode.ep.routing import (dest_ranks_per_token, expert_counts, expert_rank, has_repeat,
                                 load_routing_file, num_dest_ranks, pair_token_counts, route,
                                 route_supernode, tokens_per_dest_rank)


def distinct_rows(a):
    s = np.sort(a, axis=1)
    return not (s[:, 1:] == s[:, :-1]).any()


@pytest.mark.parametrize("policy, params", [
    ("uniform", {}),
    ("zipf", {"zipf_exponent": 1.2}),
    ("hot", {"hot_experts": [3, 64, 128, 200], "hot_share": 0.25}),
])
def test_shape_dtype_range_distinct_and_determinism(policy, params):
    a = route(4096, 256, 6, 8, policy, seed=7, rank=2, **params)
    assert a.shape == (4096, 6) and a.dtype == np.int32
    assert a.min() >= 0 and a.max() < 256 and distinct_rows(a)
    assert np.array_equal(a, route(4096, 256, 6, 8, policy, seed=7, rank=2, **params))
    assert not np.array_equal(a, route(4096, 256, 6, 8, policy, seed=7, rank=3, **params))
    assert not np.array_equal(a, route(4096, 256, 6, 8, policy, seed=8, rank=2, **params))


def test_distinct_even_when_top_k_is_close_to_the_expert_count():
    a = route(2000, 8, 7, 2, "uniform", seed=1)
    assert distinct_rows(a)
    b = route(2000, 8, 8, 2, "zipf", seed=1, zipf_exponent=2.0)
    assert (np.sort(b, axis=1) == np.arange(8)).all()


def test_uniform_loads_experts_evenly():
    counts = expert_counts(route(16384, 256, 6, 8, "uniform", seed=0), 256)
    mean = 16384 * 6 / 256
    assert abs(counts - mean).max() < 6 * np.sqrt(mean)


def test_zipf_skews_by_popularity_shared_by_all_ranks():
    a = route(16384, 64, 4, 8, "zipf", seed=3, rank=0, zipf_exponent=1.0, shuffle=False)
    counts = expert_counts(a, 64)
    assert counts[0] > counts[7] > counts[63]       # expert 0 is the most popular
    assert counts[0] > 5 * counts[63]
    # with shuffling the hot expert is the same on every rank, and not necessarily 0
    hot = [expert_counts(route(8192, 64, 4, 8, "zipf", seed=3, rank=r, zipf_exponent=1.5),
                         64).argmax() for r in range(3)]
    assert hot[0] == hot[1] == hot[2]


def test_zipf_exponent_zero_is_uniform():
    counts = expert_counts(route(16384, 32, 4, 8, "zipf", seed=0, zipf_exponent=0.0), 32)
    assert abs(counts / counts.mean() - 1).max() < 0.1


def test_hot_experts_take_exactly_their_share():
    hot = [10, 20, 30, 40]
    a = route(10000, 256, 6, 8, "hot", seed=5, hot_experts=hot, hot_share=0.25)
    picks = np.isin(a, hot)
    assert picks.sum() == round(0.25 * 10000 * 6)
    counts = expert_counts(a, 256)[hot]
    assert abs(counts / counts.mean() - 1).max() < 0.05
    assert picks.sum(axis=1).max() <= 4


def test_placement_is_contiguous_blocks():
    assert expert_rank(np.array([0, 31, 32, 255]), 256, 8).tolist() == [0, 0, 1, 7]
    with pytest.raises(ConfigError, match="num_experts = 100: expected a positive multiple"):
        expert_rank(np.array([0]), 100, 8)


def test_a_token_goes_once_to_each_destination_rank():
    topk = np.array([[0, 1, 40, 41, 250, 251],      # ranks 0, 1, 7
                     [0, 33, 66, 99, 132, 165]])    # ranks 0..5
    mask = dest_ranks_per_token(topk, 256, 8)
    assert mask.sum(axis=1).tolist() == [3, 6]
    assert num_dest_ranks(topk, 256, 8).tolist() == [3, 6]
    assert tokens_per_dest_rank(topk, 256, 8).tolist() == [2, 2, 1, 1, 1, 1, 0, 1]


@pytest.mark.parametrize("num_ranks, expected", [(8, 4.44), (128, 5.94)])
def test_distinct_destination_ranks_match_facts(num_ranks, expected):
    """facts 2.4 (derived): expected distinct destination ranks per token, uniform routing."""
    topk = route(16384, 256, 6, num_ranks, "uniform", seed=0)
    assert num_dest_ranks(topk, 256, num_ranks).mean() == pytest.approx(expected, abs=0.02)


def test_pair_counts_are_per_source_rank():
    routes = route_supernode(512, 32, 4, 4, "uniform", seed=9)
    assert routes.shape == (4, 512, 4)
    assert np.array_equal(routes[2], route(512, 32, 4, 4, "uniform", seed=9, rank=2))
    counts = pair_token_counts(routes, 32)
    assert counts.shape == (4, 4)
    assert counts[1].tolist() == tokens_per_dest_rank(routes[1], 32, 4).tolist()
    assert (counts.sum(axis=1) == num_dest_ranks(routes.reshape(-1, 4), 32, 4)
            .reshape(4, 512).sum(axis=1)).all()


@pytest.mark.parametrize("kwargs, expected", [
    ({"policy": "zipfian"}, "routing: policy = 'zipfian': expected one of 'uniform', 'zipf'"),
    ({"policy": "zipf"}, "zipf_exponent = '<missing>': expected a number >= 0"),
    ({"policy": "zipf", "zipf_exponnet": 1.0}, "Did you mean 'zipf_exponent'?"),
    ({"policy": "uniform", "hot_share": 0.2}, "hot_share = 0.2: expected a parameter of policy"),
    ({"policy": "hot", "hot_experts": [1, 1], "hot_share": 0.1}, "hot_experts = [1, 1]"),
    ({"policy": "hot", "hot_experts": [300], "hot_share": 0.1}, "in 0..255"),
    ({"policy": "hot", "hot_experts": [1, 2], "hot_share": 0.5}, "hot_share = 0.5: expected a share"),
    ({"top_k": 0}, "top_k = 0"),
    ({"rank": 8}, "rank = 8: expected a rank in 0..7"),
])
def test_bad_arguments_are_named(kwargs, expected):
    args = dict(num_tokens=64, num_experts=256, top_k=6, num_ranks=8, seed=0)
    args.update(kwargs)
    with pytest.raises(ConfigError) as info:
        route(**args)
    assert expected in str(info.value)


# -- trace files -------------------------------------------------------------------------------
def test_npy_holds_one_rank_used_by_every_rank(tmp_path):
    one = route(100, 256, 6, 8, "uniform", seed=1).astype(np.int64)
    np.save(tmp_path / "r.npy", one)
    got = load_routing_file(tmp_path / "r.npy", 100, 256, 6, 8)
    assert got.shape == (8, 100, 6) and got.dtype == np.int32
    assert all(np.array_equal(got[r], one) for r in range(8))


def test_npz_holds_one_array_per_rank(tmp_path):
    routes = route_supernode(50, 16, 2, 4, "uniform", seed=2)
    np.savez(tmp_path / "r.npz", **{f"rank{r}": routes[r] for r in range(4)})
    assert np.array_equal(load_routing_file(tmp_path / "r.npz", 50, 16, 2, 4), routes)


def file_error(tmp_path, name, content, **kw) -> str:
    path = tmp_path / name
    if isinstance(content, dict):
        np.savez(path, **content)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        np.save(path, content)
    args = dict(num_tokens=3, num_experts=16, top_k=2, num_ranks=2)
    args.update(kw)
    with pytest.raises(ConfigError) as info:
        load_routing_file(path, **args)
    msg = str(info.value)
    assert str(path) in msg
    return msg


GOOD = np.array([[0, 1], [2, 3], [4, 5]])


def test_wrong_shape(tmp_path):
    msg = file_error(tmp_path, "a.npy", GOOD[:2])
    assert "(2, 2): expected shape (3, 2) = (num_tokens, top_k)" in msg


def test_id_out_of_range_names_the_row(tmp_path):
    bad = GOOD.copy()
    bad[1, 0] = 16
    msg = file_error(tmp_path, "a.npz", {"rank0": GOOD, "rank1": bad})
    assert "rank1[1] = [16, 3]: expected expert ids in 0..15" in msg


def test_duplicate_in_a_row(tmp_path):
    bad = GOOD.copy()
    bad[2] = [7, 7]
    msg = file_error(tmp_path, "a.npy", bad)
    assert "[2] = [7, 7]: expected distinct expert ids" in msg


def test_non_integer_ids(tmp_path):
    assert "'float64': expected an integer array" in file_error(tmp_path, "a.npy", GOOD * 1.0)


def test_missing_and_unknown_rank_arrays(tmp_path):
    assert "rank1 = '<missing>'" in file_error(tmp_path, "a.npz", {"rank0": GOOD})
    msg = file_error(tmp_path, "b.npz", {"rank0": GOOD, "rank1": GOOD, "rank_2": GOOD})
    assert "rank_2 = '<array>'" in msg and "Did you mean" in msg


def test_bad_files(tmp_path):
    assert "expected a .npy or .npz routing file" in file_error(tmp_path, "a.csv", b"0,1\n")
    assert "<unreadable>" in file_error(tmp_path, "a.npy", b"not numpy")
    with pytest.raises(ConfigError, match="expected an existing routing file"):
        load_routing_file(tmp_path / "none.npy", 3, 16, 2, 2)


def test_hash_routing_is_a_fixed_table_from_token_id_to_experts():
    """V4's first layers (facts v4-decode 1): one table, the model's (the same on every rank,
    from the seed alone), token id -> top_k distinct experts; a rank's tokens draw ids."""
    from simnode.ep.routing import V4_VOCAB, hash_table
    table = hash_table(0, V4_VOCAB, 256, 6)
    assert table.shape == (V4_VOCAB, 6)
    assert not has_repeat(table[:5000]).any()
    a = route(512, 256, 6, 16, "hash", 0, rank=3)
    b = route(512, 256, 6, 16, "hash", 0, rank=3)
    assert (a == b).all() and a.dtype == np.int32
    every = set(map(tuple, table.tolist()))
    assert all(tuple(r) in every for r in a[:20].tolist())
    # another rank draws other token ids from the same table
    c = route(512, 256, 6, 16, "hash", 0, rank=4)
    assert not (a == c).all()
    small = route(64, 16, 2, 2, "hash", 1, rank=0, vocab=8)
    assert len({tuple(r) for r in small.tolist()}) <= 8        # 8 ids, 8 expert sets at most


def test_hash_routing_rejects_a_bad_vocabulary():
    with pytest.raises(ConfigError) as info:
        route(8, 16, 2, 2, "hash", 0, vocab=0)
    assert "vocab" in str(info.value)
