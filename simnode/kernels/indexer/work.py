"""How each published indexer kernel cuts its work and deals it to the AI cores.

- CANN (ops-transformer ``quant_lightning_indexer`` arch35 kernel, ``QLIPreload``): a *unit* is
  one sequence's group of up to ``S1_BASE`` = 4 query tokens (M = 4 x 64 rows), walked over its
  keys in *blocks* of ``S2_BASE`` = 128 entries. ``cann_parts`` deals the blocks: with
  ``split_kv`` every core gets an equal run of the (unit, block) sequence (``SplitCore`` with
  LD on: the first cores one block more), so a unit cut between cores becomes *parts* whose
  top-k are merged afterwards (the metadata op's "FlashDecode reduction task"); without it,
  whole units are dealt the same way (``SplitCore`` with LD off, ``isLDOpen = false``).
- DeepGEMM-Ascend (``paged_mqa_logits``): a *request* is one sequence's query tokens, its keys
  walked in splits of ``SPLIT_KV`` = 512; the metadata kernel (``paged_mqa_logits_metadata``)
  prices each split (``split_cost``) and gives every core an equal share of the cost as a
  contiguous run of (request, split); ``deepgemm_segments`` lists each core's run by Q block
  (8 tiles of one MAD row group each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simnode.kernels.indexer.params import IndexerParams, keys_visible

S1_BASE = 4                 # CANN arch35 kernel: S1_BASE_SIZE, query tokens per unit
S2_BASE = 128               # CANN arch35 kernel: S2_BASE_SIZE, keys per block
SPLIT_KV = 512              # DeepGEMM-Ascend: kSplitKV (static_assert == 512)
MAD_ROWS = 64               # DeepGEMM-Ascend select_paged_mqa_logits_config: mad_m = 64 / heads * heads
Q_TILES_PER_BLOCK = 8       # DeepGEMM-Ascend: kNumQHTilesPerBlock (8 Q tiles fill L0A)


@dataclass(frozen=True)
class Part:
    """A run of blocks of one CANN unit on one core."""
    seq: int
    group: int               #: 4-query group of the sequence
    queries: tuple           #: the group's query indices within the sequence
    keys: int                #: the group's keys (its last query's visible entries)
    first_block: int
    blocks: int              #: blocks of this part
    part: int                #: index of this part within its unit
    parts: int               #: parts its unit is cut into (1: whole on one core)

    def block_keys(self, j: int) -> int:
        """Keys of the part's j-th block."""
        b = self.first_block + j
        return min(S2_BASE, self.keys - b * S2_BASE)


def cann_units(p: IndexerParams) -> list[tuple]:
    """(seq, group, queries, keys, blocks) of every unit, in the kernel's (b, gS1) order."""
    out = []
    for b in range(p.batch):
        for g in range(math.ceil(p.q_per_seq / S1_BASE)):
            qs = tuple(range(g * S1_BASE, min((g + 1) * S1_BASE, p.q_per_seq)))
            keys = keys_visible(p, qs[-1])
            out.append((b, g, qs, keys, math.ceil(keys / S2_BASE)))
    return out


def _shares(total: int, cores: int) -> list[int]:
    """``total`` items over ``cores``: total // cores each, the first total % cores one more."""
    return [total // cores + (1 if c < total % cores else 0) for c in range(cores)]


def cann_parts(p: IndexerParams, cores: int) -> list[list[Part]]:
    """Per core, its parts in order (empty lists for idle cores)."""
    units = cann_units(p)
    per_core: list[list] = [[] for _ in range(cores)]
    if not p.split_kv:
        at = 0
        for c, n in enumerate(_shares(len(units), cores)):
            for b, g, qs, keys, nb in units[at:at + n]:
                per_core[c].append(Part(b, g, qs, keys, 0, nb, 0, 1))
            at += n
        return per_core
    shares = _shares(sum(u[4] for u in units), cores)
    raw = []                                    # (core, unit index, first block, blocks)
    c, left = 0, shares[0]
    for ui, (_b, _g, _qs, _keys, nb) in enumerate(units):
        j = 0
        while j < nb:
            while left == 0:
                c += 1
                left = shares[c]
            take = min(left, nb - j)
            raw.append((c, ui, j, take))
            j += take
            left -= take
    counts: dict = {}
    for _c, ui, _j, _n in raw:
        counts[ui] = counts.get(ui, 0) + 1
    seen: dict = {}
    for c, ui, j, n in raw:
        b, g, qs, keys, _nb = units[ui]
        k = seen.get(ui, 0)
        seen[ui] = k + 1
        per_core[c].append(Part(b, g, qs, keys, j, n, k, counts[ui]))
    return per_core


@dataclass(frozen=True)
class Segment:
    """One core's run of one Q block of one DeepGEMM request over splits [first, end)."""
    seq: int
    q0: int                  #: first query token of the Q block (within the sequence)
    queries: int             #: query tokens in the Q block
    first_split: int
    end_split: int
    keys: int                #: the request's keys (its last query's visible entries)

    def split_keys(self, s: int) -> int:
        return min(SPLIT_KV, self.keys - s * SPLIT_KV)


def tokens_per_tile(p: IndexerParams) -> int:
    """Query tokens in one DeepGEMM MAD tile (64 // heads: 1 at 64 heads)."""
    return MAD_ROWS // p.heads


def mad_m(p: IndexerParams) -> int:
    """Rows of one DeepGEMM MAD tile: whole query tokens' heads, at most 64."""
    return tokens_per_tile(p) * p.heads


def split_cost(p: IndexerParams, n_queries: int, n_keys: int) -> int:
    """DeepGEMM-Ascend ``paged_mqa_split_cost``: the metadata kernel's price of one split
    ("measured model: fixed per-split cost plus per-tile cost; H64 uses the tile count")."""
    per_tile = tokens_per_tile(p)
    tiles = math.ceil(n_queries / per_tile)
    cost = 2 + 2 * tiles if per_tile > 1 else tiles
    return math.ceil(n_keys / (SPLIT_KV // 4)) * cost + 2


def deepgemm_segments(p: IndexerParams, cores: int) -> list[list[Segment]]:
    """Per core, its segments in order: the metadata kernel's equal-cost cut of the (request,
    split) sequence (``paged_mqa_logits_metadata_vf``), walked as the scheduler does."""
    keys = keys_visible(p, p.q_per_seq - 1)
    splits = math.ceil(keys / SPLIT_KV)
    full = split_cost(p, p.q_per_seq, SPLIT_KV)
    req = (splits - 1) * full + split_cost(p, p.q_per_seq, keys - (splits - 1) * SPLIT_KV)
    total = req * p.batch
    # core c starts at the (request, split) where its target cost falls (every request costs the same)
    starts = []
    for c in range(cores + 1):
        target = c * (total // cores) + min(c, total % cores)
        if target >= total:
            starts.append((p.batch, 0))
            continue
        r = target // req
        starts.append((r, min((target - r * req) // full, splits - 1)))
    block = Q_TILES_PER_BLOCK * tokens_per_tile(p)
    out: list[list[Segment]] = [[] for _ in range(cores)]
    for c in range(cores):
        (r0, s0), (r1, s1) = starts[c], starts[c + 1]
        for r in range(r0, min(r1 + 1, p.batch)):
            first = s0 if r == r0 else 0
            end = s1 if r == r1 else splits
            if end <= first:
                continue
            for q0 in range(0, p.q_per_seq, block):
                out[c].append(Segment(r, q0, min(block, p.q_per_seq - q0), first, end, keys))
    return out
