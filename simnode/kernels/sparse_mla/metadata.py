"""How DeepSeek-V4's attention op deals its work to the cores: its AICPU metadata op.

On the 950, ``npu_kv_quant_sparse_attn_sharedkv`` reads a 1024-word tiling table that a
preceding AICPU op writes (``npu_kv_quant_sparse_attn_sharedkv_metadata``, hicann
ops-transformer ``experimental/attention/kv_quant_sparse_attn_sharedkv_metadata``,
``KvQuantSparseAttnSharedkvMetadataCpuKernel::BalanceSchedule``). ``balance(rows, cores,
split_kv)`` is that algorithm:

- the work is rows of ``m`` query heads (one query x 64 heads; V4-Pro's 128 heads are one row
  of 128 on a pair of cores, ``aicCoreNum /= 2``), in (sequence, query) order, each a list of
  128-token S2 blocks: the window's, then the compressed cache's (``CalcS1GCache``);
- a block costs ``6 * ceil(m / 16) + 10 * ceil(tokens / 64)`` (``WinCalcCost`` /
  ``CmpCalcCost``);
- core i gets the cost limit ``unassigned // (cores - i)`` (at least the largest row's cost
  when KV is not split), then whole sequences, then whole rows, then (split-KV only) single
  blocks, while the running cost stays within limit + half the next unit's last block cost
  (``IsWithinTolerance``, ``FA_TOLERANCE_RATIO = 2``); a split-KV core that got nothing takes
  one block (``ForceAssign``);
- a row split over cores leaves partial results that vector cores combine after the
  attention (flash-decode, ``RecordFDInfo`` / ``SplitFD``): ``FdTask`` records.

The published op runs with split-KV off (``supportFd = false`` in the kernel's header, and
no line sets it): a row is never split, so one sequence of 4 queries uses 4 cores.
``split_kv=True`` is the what-if of the code path that is there. Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

COST_M, COST_S2 = 6, 10           # WinCalcCost / CmpCalcCost weights per 16 rows, per 64 tokens
TOLERANCE_RATIO = 2               # FA_TOLERANCE_RATIO


def block_cost(m: int, tokens: int) -> int:
    """The metadata op's cost of one S2 block of ``tokens`` for ``m`` query rows."""
    return COST_M * -(-m // 16) + COST_S2 * -(-tokens // 64)


@dataclass(frozen=True)
class Part:
    """One core's share of one row: blocks [b0, b1) of row ``row`` (global row index)."""
    row: int
    b0: int
    b1: int


@dataclass(frozen=True)
class FdTask:
    """A row split over ``splits`` cores: its partial results combined by vector cores."""
    row: int
    splits: int


def balance(rows: list, seq_of: list, m: int, cores: int, split_kv: bool = False
            ) -> tuple[list, list]:
    """(per core: list of ``Part``, the ``FdTask`` list). ``rows``: per row, its blocks'
    token counts (window blocks first); ``seq_of``: per row, its sequence (rows of one
    sequence are consecutive); ``m``: query rows (heads) per row; ``cores``: the cores (or
    core pairs) the table deals to."""
    costs = [[block_cost(m, t) for t in r] for r in rows]
    row_cost = [sum(c) for c in costs]
    seqs: list[list[int]] = []
    for i, s in enumerate(seq_of):
        if not seqs or seq_of[seqs[-1][0]] != s:
            seqs.append([])
        seqs[-1].append(i)
    if not rows or not any(row_cost):
        return [[] for _ in range(cores)], []
    unassigned = sum(row_cost)
    max_row = max(row_cost)
    out: list[list[Part]] = [[] for _ in range(cores)]
    # the cursor: sequence si, row ri (global), block bi within it
    si, ri, bi = 0, seqs[0][0], 0
    done = False
    split_parts: dict[int, int] = {}                 # row -> cores it was dealt to

    def take(core: int, r: int, b0: int, b1: int) -> int:
        out[core].append(Part(r, b0, b1))
        split_parts[r] = split_parts.get(r, 0) + 1
        return sum(costs[r][b0:b1])

    def last_cost(r: int) -> int:
        return costs[r][-1] if costs[r] else 0

    def seq_rest(s: int, r: int, b: int) -> int:
        rest = [x for x in seqs[s] if x >= r]
        return sum(row_cost[x] for x in rest) - sum(costs[r][:b])

    def next_row(s: int, r: int) -> tuple[int, int, bool]:
        """The row after r (skipping rows without blocks): (sequence, row, finished)."""
        while True:
            members = seqs[s]
            k = members.index(r) + 1
            if k < len(members):
                r = members[k]
            else:
                s += 1
                if s == len(seqs):
                    return s, r, True
                r = seqs[s][0]
            if row_cost[r]:
                return s, r, False

    if not row_cost[ri]:
        si, ri, done = next_row(si, ri)
    for core in range(cores):
        if done or unassigned <= 0:
            break
        avg = unassigned // (cores - core)
        limit = avg if split_kv else max(avg, max_row)
        cost = blocks = 0
        # 1. whole sequences (what is left of the current one first)
        while not done:
            rest = seq_rest(si, ri, bi)
            if rest and limit + last_cost(seqs[si][-1]) // TOLERANCE_RATIO < cost + rest:
                break
            for r in (x for x in seqs[si] if x >= ri):
                if row_cost[r]:
                    b0 = bi if r == ri else 0
                    cost += take(core, r, b0, len(costs[r]))
                    blocks += len(costs[r]) - b0
            si, bi = si + 1, 0
            if si == len(seqs):
                done = True
                break
            ri = seqs[si][0]
            if not row_cost[ri]:
                si, ri, done = next_row(si, ri)
        # 2. whole rows
        while not done:
            rest = row_cost[ri] - sum(costs[ri][:bi])
            if limit + last_cost(ri) // TOLERANCE_RATIO < cost + rest:
                break
            cost += take(core, ri, bi, len(costs[ri]))
            blocks += len(costs[ri]) - bi
            bi = 0
            si, ri, done = next_row(si, ri)
        # 3. single blocks, and 4. at least one (split-KV only)
        if split_kv and not done:
            b0 = bi
            while bi < len(costs[ri]) and (
                    limit + costs[ri][bi] // TOLERANCE_RATIO >= cost + costs[ri][bi] or blocks == 0):
                cost += costs[ri][bi]
                bi += 1
                blocks += 1
            if bi > b0:
                take(core, ri, b0, bi)
            if bi == len(costs[ri]):
                bi = 0
                si, ri, done = next_row(si, ri)
        unassigned -= cost
    fd = [FdTask(r, n) for r, n in sorted(split_parts.items()) if n > 1]
    return out, fd


def split_fd(tasks: list, m: int, vector_cores: int) -> list[list[tuple[int, int, int]]]:
    """``SplitFD``: the combine work dealt to the vector cores, per vector core a list of
    (row, first head, heads): each task's ``splits x m`` load over the vector cores in
    proportion, in whole heads."""
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(vector_cores)]
    if not tasks:
        return out
    total = sum(t.splits * m for t in tasks)
    avg = -(-total // vector_cores)
    v = 0
    for t in tasks:
        n = max(1, t.splits * m // avg)
        per = -(-m // n)
        n = -(-m // per)
        for k in range(n):
            if v < vector_cores:
                out[v].append((t.row, k * per, min(per, m - k * per)))
            v += 1
    return out
