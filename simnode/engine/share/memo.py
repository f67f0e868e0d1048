"""The memo of small solves: a chip's few classes come and go in a few recurring sets.

A small interpreted solve (``maxmin.small_rates``) gives rates that are a function of its
inputs alone (the active classes in order, their rows, weights and caps, and the resources'
capacities, which are only ever appended to), so a solve whose inputs equal an earlier one's
sets that one's rates (every active class's and every resource's, all a solve writes)
without solving. A chip's copies come and go in a few recurring class sets (GEMM bf16: 15
distinct inputs in 5,409 solves; sparse MLA prefill n_q 256: 1,761 in 20,424).
tests/engine/test_memo.py: the same rates, to the bit, as solving each time.
"""

from __future__ import annotations

#: at most this many active classes (interpreted, no FCFS resource): ``maxmin.small_rates``
#: (same rates, no index to build)
SMALL_SOLVE = 8
#: small solves remembered by their inputs (cleared when full)
SMALL_MEMO = 4096


class Memo:
    """Small solves' inputs -> their rates, for one list table."""

    def __init__(self):
        self.memo: dict = {}

    def solve(self, table, solve) -> bool:
        """Set the rates of ``table``'s active classes if it is a small solve: an earlier
        solve's if its inputs were the same, else ``solve(table)``'s (remembered). Returns
        False (nothing done) if it is not a small solve."""
        act = table.active()
        if not 0 < len(act) <= SMALL_SOLVE or table.any_fcfs or table.lazy:
            return False
        w, crate = table.w, table.crate
        # a keyed class's key is (its cap, its row); a solo class (a group's) has none
        keys = tuple(map(table.cls_key.__getitem__, act))
        if None in keys:
            return False
        key = (len(table.cap), tuple(act), keys, tuple([tuple(w[c]) for c in act]))
        memo = self.memo
        got = memo.get(key)
        if got is None:
            solve(table)
            if len(memo) >= SMALL_MEMO:
                memo.clear()                        # (bounded memory; same rates either way)
            memo[key] = (tuple([crate[c] for c in act]), tuple(table.rate))
            return True
        rates, res = got
        for c, x in zip(act, rates):
            crate[c] = x
        table.rate[:] = res
        return True
