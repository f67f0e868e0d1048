"""The uncontended fast path: while nothing contends, no sharing is solved.

While every live transfer runs at its cap (no resource is asked for more than its capacity),
max-min sharing has nothing to decide: each transfer finishes at its start + size / cap. The
share then keeps its transfers in one heap by finish time instead of classes (``enter``),
and solves nothing until a start would overload a resource (``start`` refuses it) or a group
starts: the transfers left go back into classes with what they have left (``leave``), and
solving resumes. A solve that finds every class at its cap switches back. Same rates, so the
same times up to floating-point rounding (tests/engine/test_share.py compares both). Only
on the list table (``simnode.engine.share.lists``), in exact mode (no batch window).
"""

from __future__ import annotations

import heapq

from simnode.engine.share.loops import EPS_UNITS, INF


class FastPath:
    """The fast path of one share: ``on`` while it runs; ``fq``: (finish ns, seq, member,
    key, weights) per transfer in a heap; ``cnt``: per resource, how many of them cross it."""

    def __init__(self):
        self.on = False
        self.fq: list = []
        self.cnt: list = []

    @staticmethod
    def may_enter(table) -> bool:
        """After a solve: does every active class of ``table`` (a list table, no group
        members in keyed classes) run at its cap?"""
        if table.compiled or table.bulk:
            return False
        act = table.active()
        if not len(act):
            return False
        crate, ccap = table.crate, table.ccap
        for c in act:
            if crate[c] != ccap[c]:
                return False
        return True

    def enter(self, table, now: float) -> None:
        """Move every member of the active classes (all at their caps) into the fast heap."""
        fq = []
        cnt = [0] * len(table.cap)
        heaps, V, crate = table.heaps, table.V, table.crate
        freed = table.active()
        for c in freed:
            key = table.cls_key[c]
            v, r = V[c], crate[c]
            for tag, seq, member, weights in heaps[c]:
                fq.append((now + (tag - v) / r, seq, member, key, weights))
            m = table.n[c]
            for x in key[1]:
                cnt[x] += m
            heaps[c] = []
            table.n[c] = 0
            del table.key2cls[key]
            table.cls_key[c] = None
            table.top[c] = INF
            table.crate[c] = 0.0
        table.free.extend(reversed(freed))      # reused lowest first, as after releases
        heapq.heapify(fq)
        table.act.clear()
        table.act_arr = None
        table.layout += 1
        self.fq, self.cnt = fq, cnt
        self.on = True

    def start(self, table, size, resources, weights, cap, member, now: float) -> float | None:
        """Start a transfer uncontended if every resource it crosses has room for it at its
        cap (``table``'s counters brought to ``now``); returns its finish, or None (nothing
        done) if it would contend."""
        if cap == INF:
            return None
        rate, caps = table.rate, table.cap
        for j in range(len(resources)):
            r = resources[j]
            if rate[r] + cap * weights[j] > caps[r]:
                return None
        cnt = self.cnt
        for j in range(len(resources)):
            r = resources[j]
            rate[r] += cap * weights[j]
            cnt[r] += 1
        table.seq += 1
        fin = now + size / cap
        heapq.heappush(self.fq, (fin, table.seq, member, (cap, resources), weights))
        return fin

    def due(self, table, now: float, retire) -> None:
        """Retire (``retire(member, 0.0)``) the transfers done at ``now`` (within the
        completion tolerance) and take their rates off their resources."""
        fq, rate, cnt = self.fq, table.rate, self.cnt
        lim = now * 1e-15                       # float resolution of the clock
        while fq:
            fin, _, member, key, weights = fq[0]
            cap = key[0]
            if fin - now > lim + EPS_UNITS / cap:
                break
            heapq.heappop(fq)
            resources = key[1]
            for j in range(len(resources)):
                r = resources[j]
                cnt[r] -= 1
                if cnt[r] == 0:
                    rate[r] = 0.0               # exactly idle
                else:
                    rate[r] -= cap * weights[j]
            retire(member, 0.0)

    def leave(self, table, now: float) -> bool:
        """Put the transfers of the fast heap into ``table``'s classes with the units they
        have left at ``now`` (their rates are solved at the next wake, at this instant);
        returns whether there were any."""
        fq, self.fq = sorted(self.fq), []
        self.on = False
        for fin, seq, member, key, weights in fq:
            c = table.class_of(key)
            tag = table.V[c] + max(fin - now, 0.0) * key[0]
            heapq.heappush(table.heaps[c], (tag, seq, member, weights))
            if table.n[c] == 0:
                table.act_add(c)
            table.n[c] += 1
            w = table.w[c]
            for j in range(len(weights)):
                w[j] += weights[j]
            if tag < table.top[c]:
                table.top[c] = tag
        table.act_arr = None
        table.layout += 1
        return bool(fq)
