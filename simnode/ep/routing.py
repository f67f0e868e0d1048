"""MoE routing: which top-k experts each token picks, and what that means per rank.

Pure, seeded functions (no SimPy). ``route(num_tokens, num_experts, top_k, num_ranks,
policy, seed, rank=0, **params)`` gives one rank's ``int32 [tokens, top_k]`` array of
distinct expert ids per token; ``route_supernode`` gives every rank's, ``[ranks,
tokens, top_k]``. Policies (registry ``POLICIES``):

- ``uniform``: every set of top_k distinct experts equally likely.
- ``zipf`` (``zipf_exponent`` s >= 0, ``shuffle`` = True): the expert at popularity
  position i has weight 1 / (i + 1)^s; a token draws top_k experts one after another
  without replacement, each with probability proportional to weight. The popularity
  order is a permutation drawn from ``seed`` alone (the same for every rank: an
  expert's popularity belongs to the model), or expert id order if ``shuffle=False``.
- ``hot`` (``hot_experts`` ids, ``hot_share``): exactly round(hot_share x tokens x top_k)
  of the picks go to the hot experts, spread at random over tokens (at most one pick
  per hot expert per token), uniformly among the hot experts; the other picks are
  uniform over the remaining experts.
- ``hash`` (``vocab`` = 129280, DeepSeek-V4's): a fixed table from token id to top_k
  distinct experts (V4's first 3 layers, facts v4-decode 1: "token id -> 6 experts
  table"; CR modeling_deepseek.py tid2eid [vocab, top_k]), the table drawn from ``seed``
  alone (the model's, the same for every rank); each token's id is uniform over the
  vocabulary, so tokens with the same id pick the same experts.

Seeds: rank r's tokens use ``SeedSequence(seed, spawn_key=(0, r))``; the shared
popularity order uses ``spawn_key=(1,)``, the hash table ``spawn_key=(2,)``. Same
arguments, same arrays, on any machine.

Placement: experts sit on ranks in contiguous blocks, expert e on rank
``e // (num_experts / num_ranks)`` (``expert_rank``). DeepEP accounting helpers:
``dest_ranks_per_token`` (a token is sent once per destination rank, facts 4.2),
``num_dest_ranks``, ``tokens_per_dest_rank``, ``pair_token_counts`` ([src, dst] tokens),
``expert_counts``.

Routing traces: ``load_routing_file(path, num_tokens, num_experts, top_k, num_ranks)``
reads a ``.npy`` holding one rank's ``[tokens, top_k]`` array (used for every rank) or
a ``.npz`` holding ``rank0``, ``rank1``, ... ``rank{R-1}`` arrays (one per rank), and
rejects wrong shapes, non-integer types, ids out of range and repeated ids in a row
with a ``ConfigError`` naming the file, the array (and row) and the value.
"""

from __future__ import annotations

import zipfile

from pathlib import Path
from typing import Callable

import numpy as np

from simnode.config.fields import did_you_mean
from simnode.errors import ConfigError

_SRC = "routing"          # the source named by errors in arguments (not a file)


def _rng(seed: int, *spawn_key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=spawn_key))


def experts_per_rank(num_experts: int, num_ranks: int) -> int:
    """Experts on each rank; ``num_experts`` must be a multiple of ``num_ranks``."""
    if num_ranks < 1 or num_experts < 1 or num_experts % num_ranks:
        raise ConfigError(_SRC, "num_experts", num_experts,
                          f"a positive multiple of num_ranks ({num_ranks})")
    return num_experts // num_ranks


def expert_rank(expert_ids: np.ndarray, num_experts: int, num_ranks: int) -> np.ndarray:
    """Rank that holds each expert: contiguous blocks of num_experts / num_ranks."""
    return np.asarray(expert_ids) // experts_per_rank(num_experts, num_ranks)


# -- samplers ------------------------------------------------------------------------------
def _distinct_uniform(rng: np.random.Generator, rows: int, n: int, k: int) -> np.ndarray:
    """[rows, k] ids in 0..n-1, distinct per row, every ordered k-tuple equally likely."""
    if k == 0:
        return np.zeros((rows, 0), dtype=np.int64)
    if n < 4 * k:                               # dense: rank random keys
        return np.argsort(rng.random((rows, n)), axis=1)[:, :k]
    ids = rng.integers(0, n, size=(rows, k))
    bad = np.flatnonzero(has_repeat(ids))
    while bad.size:                             # redraw rows with a repeat (rejection)
        ids[bad] = rng.integers(0, n, size=(bad.size, k))
        bad = bad[has_repeat(ids[bad])]         # only redrawn rows can still repeat
    return ids


def has_repeat(rows: np.ndarray) -> np.ndarray:
    """bool per row: does any value occur twice in it (column pairs compared: for the few
    columns of a top-k, far faster than sorting each row)."""
    k = rows.shape[1]
    if k > 16:
        s = np.sort(rows, axis=1)
        return (s[:, 1:] == s[:, :-1]).any(axis=1)
    out = np.zeros(rows.shape[0], dtype=bool)
    for i in range(k):
        for j in range(i + 1, k):
            out |= rows[:, i] == rows[:, j]
    return out


def sort_rows(rows: np.ndarray) -> np.ndarray:
    """Each row sorted ascending (``np.sort(rows, axis=1)``); for few columns by an
    odd-even transposition network over whole columns, far faster than a sort per row."""
    k = rows.shape[1]
    if k > 16:
        return np.sort(rows, axis=1)
    cols = [rows[:, j].copy() for j in range(k)]
    for p in range(k):
        for j in range(p % 2, k - 1, 2):
            lo = np.minimum(cols[j], cols[j + 1])
            cols[j + 1] = np.maximum(cols[j], cols[j + 1])
            cols[j] = lo
    return np.stack(cols, axis=1) if k else rows.copy()


def _uniform(rng, num_tokens, num_experts, top_k, seed, params):
    _no_params("uniform", params, ())
    return _distinct_uniform(rng, num_tokens, num_experts, top_k)


def _zipf(rng, num_tokens, num_experts, top_k, seed, params):
    _no_params("zipf", params, ("zipf_exponent", "shuffle"))
    s = params.get("zipf_exponent", "<missing>")
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not s >= 0:
        raise ConfigError(_SRC, "zipf_exponent", s, "a number >= 0 (0 = uniform)")
    order = (_rng(seed, 1).permutation(num_experts) if params.get("shuffle", True)
             else np.arange(num_experts))
    weight = np.empty(num_experts)
    weight[order] = 1.0 / np.arange(1, num_experts + 1) ** float(s)
    # successive weighted draws without replacement = the k smallest exponential clocks
    clocks = rng.exponential(size=(num_tokens, num_experts)) / weight
    picks = np.argpartition(clocks, top_k - 1, axis=1)[:, :top_k]
    first = np.take_along_axis(clocks, picks, axis=1).argsort(axis=1)
    return np.take_along_axis(picks, first, axis=1)


def _hot(rng, num_tokens, num_experts, top_k, seed, params):
    _no_params("hot", params, ("hot_experts", "hot_share"))
    hot = np.asarray(params.get("hot_experts", ()))
    if hot.ndim != 1 or hot.size == 0 or hot.dtype.kind not in "iu":
        raise ConfigError(_SRC, "hot_experts", params.get("hot_experts", "<missing>"),
                          "a non-empty list of expert ids")
    if hot.min() < 0 or hot.max() >= num_experts or np.unique(hot).size != hot.size:
        raise ConfigError(_SRC, "hot_experts", hot.tolist(),
                          f"distinct expert ids in 0..{num_experts - 1}")
    cold = np.setdiff1d(np.arange(num_experts), hot)
    if cold.size < top_k:
        raise ConfigError(_SRC, "hot_experts", hot.tolist(),
                          f"at most {num_experts - top_k} hot experts, so that a token can "
                          f"pick {top_k} experts that are not hot")
    per_token = min(top_k, hot.size)            # a token picks each expert at most once
    share = params.get("hot_share", "<missing>")
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not (
            0 <= share <= per_token / top_k):
        raise ConfigError(_SRC, "hot_share", share,
                          f"a share of all picks in 0..{per_token / top_k:g} "
                          f"({per_token} of {top_k} picks per token at most)")
    total = int(round(share * num_tokens * top_k))
    slots = rng.choice(num_tokens * per_token, size=total, replace=False)
    n_hot = np.bincount(slots // per_token, minlength=num_tokens)   # hot picks per token
    hot_pick = hot[_distinct_uniform(rng, num_tokens, hot.size, per_token)]
    cold_pick = cold[_distinct_uniform(rng, num_tokens, cold.size, top_k)]
    cand = np.concatenate([hot_pick, cold_pick], axis=1)
    col = np.arange(per_token + top_k)
    keep = np.where(col < per_token, col < n_hot[:, None], col - per_token < top_k - n_hot[:, None])
    return cand[keep].reshape(num_tokens, top_k)


#: DeepSeek-V4's vocabulary (facts v4-decode 1): the hash table's rows
V4_VOCAB = 129280
_TABLES: dict = {}


def hash_table(seed: int, vocab: int, num_experts: int, top_k: int) -> np.ndarray:
    """``int64 [vocab, top_k]``: each token id's top_k distinct experts (memoized)."""
    key = (seed, vocab, num_experts, top_k)
    if key not in _TABLES:
        _TABLES[key] = _distinct_uniform(_rng(seed, 2), vocab, num_experts, top_k)
    return _TABLES[key]


def _hash(rng, num_tokens, num_experts, top_k, seed, params):
    _no_params("hash", params, ("vocab",))
    vocab = params.get("vocab", V4_VOCAB)
    if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1:
        raise ConfigError(_SRC, "vocab", vocab, "a vocabulary of at least 1 token id")
    ids = rng.integers(0, vocab, size=num_tokens)
    return hash_table(seed, vocab, num_experts, top_k)[ids]


#: routing policies by name: fn(rng, num_tokens, num_experts, top_k, seed, params)
POLICIES: dict[str, Callable] = {"uniform": _uniform, "zipf": _zipf, "hot": _hot,
                                 "hash": _hash}


def _no_params(policy: str, params: dict, allowed: tuple) -> None:
    for key in params:
        if key not in allowed:
            raise ConfigError(_SRC, key, params[key],
                              f"a parameter of policy '{policy}' (" +
                              (", ".join(allowed) or "it takes none") + ")",
                              did_you_mean(key, allowed))


# -- public API ----------------------------------------------------------------------------
def route(num_tokens: int, num_experts: int, top_k: int, num_ranks: int,
          policy: str = "uniform", seed: int = 0, *, rank: int = 0, **params) -> np.ndarray:
    """One rank's routing: ``int32 [num_tokens, top_k]`` distinct expert ids per token."""
    experts_per_rank(num_experts, num_ranks)
    if not 1 <= top_k <= num_experts:
        raise ConfigError(_SRC, "top_k", top_k, f"an integer in 1..num_experts ({num_experts})")
    if num_tokens < 0:
        raise ConfigError(_SRC, "num_tokens", num_tokens, "an integer >= 0")
    if not 0 <= rank < num_ranks:
        raise ConfigError(_SRC, "rank", rank, f"a rank in 0..{num_ranks - 1}")
    fn = POLICIES.get(policy)
    if fn is None:
        raise ConfigError(_SRC, "policy", policy, "one of " + ", ".join(map(repr, POLICIES)),
                          did_you_mean(str(policy), POLICIES))
    out = fn(_rng(seed, 0, rank), num_tokens, num_experts, top_k, seed, params)
    return np.ascontiguousarray(out, dtype=np.int32)


def route_supernode(num_tokens: int, num_experts: int, top_k: int, num_ranks: int,
                    policy: str = "uniform", seed: int = 0, **params) -> np.ndarray:
    """Every rank's routing, ``int32 [num_ranks, num_tokens, top_k]``; rank r as
    ``route(..., rank=r)``."""
    return np.stack(list(iter_route_supernode(num_tokens, num_experts, top_k, num_ranks,
                                              policy, seed, **params)))


def iter_route_supernode(num_tokens: int, num_experts: int, top_k: int, num_ranks: int,
                         policy: str = "uniform", seed: int = 0, **params):
    """``route_supernode`` one rank at a time, so a large EP size need not hold every
    rank's routing at once (1024 ranks x 16384 tokens x 6 = 400 MB)."""
    for r in range(num_ranks):
        yield route(num_tokens, num_experts, top_k, num_ranks, policy, seed, rank=r, **params)


def dest_ranks_per_token(topk_ids: np.ndarray, num_experts: int, num_ranks: int) -> np.ndarray:
    """bool ``[tokens, num_ranks]``: does the token go to the rank (once, however many of
    the rank's experts it picked; facts 4.2)."""
    ranks = expert_rank(topk_ids, num_experts, num_ranks)
    mask = np.zeros((ranks.shape[0], num_ranks), dtype=bool)
    mask[np.arange(ranks.shape[0])[:, None], ranks] = True
    return mask


def num_dest_ranks(topk_ids: np.ndarray, num_experts: int, num_ranks: int) -> np.ndarray:
    """Distinct destination ranks of each token, ``int64 [tokens]``."""
    return dest_ranks_per_token(topk_ids, num_experts, num_ranks).sum(axis=1)


def tokens_per_dest_rank(topk_ids: np.ndarray, num_experts: int, num_ranks: int) -> np.ndarray:
    """Tokens one rank sends to each rank (deduplicated per token), ``int64 [num_ranks]``;
    the entry of the rank itself counts its local copies."""
    return dest_ranks_per_token(topk_ids, num_experts, num_ranks).sum(axis=0)


def pair_token_counts(routes: np.ndarray, num_experts: int) -> np.ndarray:
    """``int64 [src, dst]`` tokens each rank sends to each rank, from ``[ranks, tokens, k]``
    routing (the diagonal holds local copies)."""
    num_ranks = routes.shape[0]
    return np.stack([tokens_per_dest_rank(routes[r], num_experts, num_ranks)
                     for r in range(num_ranks)])


def expert_counts(topk_ids: np.ndarray, num_experts: int) -> np.ndarray:
    """Picks of each expert, ``int64 [num_experts]``."""
    return np.bincount(np.asarray(topk_ids).ravel(), minlength=num_experts)


# -- routing traces ------------------------------------------------------------------------
def _check_array(arr, source: str, key: str, num_tokens: int, num_experts: int,
                 top_k: int) -> np.ndarray:
    if arr.dtype.kind not in "iu":
        raise ConfigError(source, key, str(arr.dtype), "an integer array of expert ids")
    if arr.shape != (num_tokens, top_k):
        raise ConfigError(source, key, tuple(arr.shape),
                          f"shape ({num_tokens}, {top_k}) = (num_tokens, top_k)")
    bad = np.flatnonzero(((arr < 0) | (arr >= num_experts)).any(axis=1))
    if bad.size:
        row = int(bad[0])
        raise ConfigError(source, f"{key}[{row}]", arr[row].tolist(),
                          f"expert ids in 0..{num_experts - 1}")
    s = np.sort(arr, axis=1)
    dup = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
    if dup.size:
        row = int(dup[0])
        raise ConfigError(source, f"{key}[{row}]", arr[row].tolist(),
                          "distinct expert ids in a row (a token picks top_k different experts)")
    return arr.astype(np.int32)


def load_routing_file(path: str | Path, num_tokens: int, num_experts: int, top_k: int,
                      num_ranks: int) -> np.ndarray:
    """Routing from a trace file as ``int32 [num_ranks, num_tokens, top_k]``; see the module
    docstring for the .npy / .npz layouts."""
    experts_per_rank(num_experts, num_ranks)
    p = Path(path)
    src = str(p)
    if p.suffix not in (".npy", ".npz"):
        raise ConfigError(src, "", p.suffix or p.name, "a .npy or .npz routing file")
    if not p.is_file():
        raise ConfigError(src, "", src, "an existing routing file")
    try:
        data = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ConfigError(src, "", "<unreadable>", f"a NumPy {p.suffix} file ({exc})") from None
    if p.suffix == ".npy":
        if not isinstance(data, np.ndarray):        # an .npz archive under a .npy name
            data.close()
            raise ConfigError(src, "", "<an .npz archive>", "one array in .npy format (or name the file .npz)")
        one = _check_array(data, src, "", num_tokens, num_experts, top_k)
        return np.broadcast_to(one, (num_ranks,) + one.shape)   # the same array, not R copies
    if isinstance(data, np.ndarray):                # a single .npy array under a .npz name
        raise ConfigError(src, "", "<one .npy array>",
                          "an .npz archive of arrays rank0 .. rank{} (or name the file .npy)".format(num_ranks - 1))
    with data:
        names = [f"rank{r}" for r in range(num_ranks)]
        for key in data.files:
            if key not in names:
                raise ConfigError(src, key, "<array>",
                                  f"arrays named rank0 .. rank{num_ranks - 1} only",
                                  did_you_mean(key, names))
        out = []
        for key in names:
            if key not in data.files:
                raise ConfigError(src, key, "<missing>",
                                  f"an array for every rank, rank0 .. rank{num_ranks - 1}")
            try:
                arr = data[key]
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
                raise ConfigError(src, key, "<unreadable>", f"an integer array ({exc})") from None
            out.append(_check_array(arr, src, key, num_tokens, num_experts, top_k))
    return np.stack(out)
