"""Writes of many in-order chains sharing the links they cross: a fluid event loop.

Each write of a low-latency kernel streams its bytes over its path: out of the writing die,
through the switches, into the receiving die; writes meet on every link of it (a rank's
AIVs all write at once; every source writes to every receiver). Here each link serves its
streaming writes as a processor-sharing queue: every write on link l advances at f_l =
min(its own rate, capacity_l / the writes on l), and a write's stream is over once every
link of its path has carried its bytes (each link keeps its own account of the write: it
leaves a link as soon as that link is done with it). Against max-min sharing of the same
writes (a flow each) this is work-conserving per link but not across links: a write held
back elsewhere still takes a link's equal share while that link serves it, so it errs
slow where one end of a path is much busier than the other (tests/ep measure it).
The writes of one kernel have one size and one rate, so on a link they finish in the order
they joined: a link is a FIFO with one virtual clock (bytes served per write since the
start), and a start or an end costs O(log links), whatever the number of writes streaming.

The chains around the streams are ``simnode.ep.lowlatency_chains.walk``'s: write j of a
chain starts ``base`` ns after max(issue_{j-1} + stage_j, done_{j-1}) and is done ``wait``
ns after its stream. ``link_walk`` returns (issue, served, done) per write.

Written once in numba's subset of Python (``simnode.engine.jit``): interpreted for small
problems, compiled for large ones, with the same results.
"""

from __future__ import annotations

import numpy as np

from simnode.engine.jit import compile_functions

#: from this many writes on, the loop runs compiled (numba's import and cached code repay)
COMPILED_FROM_WRITES = 4000
_INF = np.inf


def _sift_up(heap, key, pos, k):
    item = heap[k]
    while k > 0:
        parent = (k - 1) // 2
        if key[heap[parent]] <= key[item]:
            break
        heap[k] = heap[parent]
        pos[heap[k]] = k
        k = parent
    heap[k] = item
    pos[item] = k


def _sift_down(heap, key, pos, k, size):
    item = heap[k]
    while True:
        child = 2 * k + 1
        if child >= size:
            break
        if child + 1 < size and key[heap[child + 1]] < key[heap[child]]:
            child += 1
        if key[heap[child]] >= key[item]:
            break
        heap[k] = heap[child]
        pos[heap[k]] = k
        k = child
    heap[k] = item
    pos[item] = k


def _rekey(heap, key, pos, link, value, size):
    """Set ``key[link]`` and restore the heap (every link is always in it)."""
    old = key[link]
    key[link] = value
    if value < old:
        _sift_up(heap, key, pos, pos[link])
    else:
        _sift_down(heap, key, pos, pos[link], size)


def _timed_push(hk, hi, size, item, value):
    """Add ``item`` at time ``value`` to the heap of ``size`` (time, item) pairs; the new
    size. The times sit beside the items (not looked up by item, as ``_rekey``'s keys of
    the few links are), so a sift touches only the heap's own two arrays: the pending
    writes are one per chain, thousands, and an indirect look-up missed the cache."""
    k = size
    while k > 0:
        parent = (k - 1) // 2
        if hk[parent] <= value:
            break
        hk[k] = hk[parent]
        hi[k] = hi[parent]
        k = parent
    hk[k] = value
    hi[k] = item
    return size + 1


def _timed_pop(hk, hi, size):
    """Remove the earliest pair of the heap of ``size`` (``_timed_push``'s); the new size."""
    size -= 1
    if size > 0:
        value, item = hk[size], hi[size]
        k = 0
        while True:
            child = 2 * k + 1
            if child >= size:
                break
            if child + 1 < size and hk[child + 1] < hk[child]:
                child += 1
            if hk[child] >= value:
                break
            hk[k] = hk[child]
            hi[k] = hi[child]
            k = child
        hk[k] = value
        hi[k] = item
    return size


def _advance(link, t, V, tl, f):
    V[link] += f[link] * (t - tl[link])
    tl[link] = t


def _next_end(link, t, V, f, n, head, fifo, tag):
    """When the write at the head of ``link`` is done there (inf when the link is idle)."""
    if n[link] == 0:
        return _INF
    return t + (tag[fifo[head[link]]] - V[link]) / f[link]


def _loop(chain, first, after, start_of, stage, base, size, rate, wait, links, cap, moff, issue,
          served, done):
    """The event loop (see the module docstring): ``first`` [chains] each chain's first write,
    ``after`` [W] the write after each in its chain (-1: its last)."""
    W = size.shape[0]
    K = links.shape[1]
    L = cap.shape[0]
    V = np.zeros(L)
    tl = np.zeros(L)
    f = np.zeros(L)
    n = np.zeros(L, np.int64)
    head = moff[:L].copy()
    tail = moff[:L].copy()
    fifo = np.zeros(max(moff[L], 1), np.int64)     # K i + side of the writes, in join order
    lrate = np.zeros(L)                            # the rate of the writes on each link
    tag = np.zeros(K * W)                          # where each write ends on each of its links
    parts = np.zeros(W, np.int64)
    key = np.full(L, _INF)
    heap = np.arange(L)
    pos = np.arange(L)
    sk = np.zeros(W)                               # pending starts (i) and local ends (W + i):
    sh = np.zeros(W, np.int64)                     # at most one per chain at a time
    ns = 0
    for h in range(first.shape[0]):
        i = first[h]
        issue[i] = start_of[chain[i]] + stage[i]
        ns = _timed_push(sk, sh, ns, i, issue[i] + base[i])
    while True:
        t_start = sk[0] if ns > 0 else _INF
        t_link = key[heap[0]] if L > 0 else _INF
        if t_start == _INF and t_link == _INF:
            break
        finished = -1
        if t_start <= t_link:
            t, i = t_start, sh[0]
            ns = _timed_pop(sk, sh, ns)
            if i >= W:                             # a local write's end
                finished = i - W
            else:
                used = 0
                for side in range(K):
                    link = links[i, side]
                    if link >= 0:
                        used += 1
                        _advance(link, t, V, tl, f)
                        tag[K * i + side] = V[link] + size[i]
                        fifo[tail[link]] = K * i + side
                        tail[link] += 1
                        n[link] += 1
                        lrate[link] = rate[i]
                        f[link] = min(lrate[link], cap[link] / n[link])
                        _rekey(heap, key, pos, link, _next_end(link, t, V, f, n, head, fifo, tag), L)
                parts[i] = used
                if used == 0:                      # a local write: its own rate alone
                    ns = _timed_push(sk, sh, ns, W + i, t + size[i] / rate[i])
        else:
            link = heap[0]
            t = t_link
            _advance(link, t, V, tl, f)
            i = fifo[head[link]] // K
            head[link] += 1
            n[link] -= 1
            f[link] = min(lrate[link], cap[link] / n[link]) if n[link] > 0 else 0.0
            _rekey(heap, key, pos, link, _next_end(link, t, V, f, n, head, fifo, tag), L)
            parts[i] -= 1
            if parts[i] == 0:
                finished = i
        if finished >= 0:
            i = finished
            served[i] = t
            done[i] = t + wait[i]
            nxt = after[i]
            if nxt >= 0:
                issue[nxt] = max(issue[i] + stage[nxt], done[i])
                ns = _timed_push(sk, sh, ns, nxt, issue[nxt] + base[nxt])
    return 0


def link_walk(chain, step, start_of, stage, base, size, rate, wait, links, cap, compiled=None):
    """(issue, served, done) [W] of writes given by their ``chain`` and ``step`` in it (0, 1,
    ... in every chain; any order): each starts ``base`` ns after it is issued and streams
    ``size`` bytes at ``rate`` alone, sharing the links of its row of ``links`` [W, K] (ids
    into ``cap``, -1: none) with the writes on them; the writes on one link must share one
    size and one rate. ``start_of[c]``: when chain c may begin. ``compiled``: None = from
    ``COMPILED_FROM_WRITES`` writes on.

    The loop takes the writes step-major (every chain's first write, then every chain's
    second, ...): the writes in flight at one time are then near each other in memory."""
    chain, step = np.asarray(chain, np.int64), np.asarray(step, np.int64)
    W = chain.shape[0]
    C = len(start_of)
    links = np.asarray(links, np.int64).reshape(W, -1)
    L = cap.shape[0]
    J = int(step.max()) + 1 if W else 0
    perm = np.argsort(step * C + chain)                  # step-major, chains in order
    at = np.full((C, J + 1), -1, np.int64)               # [chain, step]: where it is in perm
    at[chain[perm], step[perm]] = np.arange(W)
    first = at[:, 0][at[:, 0] >= 0]
    after = at[chain[perm], step[perm] + 1]
    links = links[perm]
    per = np.bincount(links[links >= 0], minlength=L)
    moff = np.concatenate([[0], np.cumsum(per)]).astype(np.int64)
    issue, served, done = np.zeros(W), np.zeros(W), np.zeros(W)
    fn = _loop
    if compiled is None:
        compiled = W >= COMPILED_FROM_WRITES
    if compiled:
        fns = compile_functions((_sift_up, _sift_down, _rekey, _timed_push, _timed_pop, _advance,
                                 _next_end, _loop), {"np": np, "_INF": _INF})
        if fns is not None:
            fn = fns["_loop"]
    per_write = [np.broadcast_to(np.asarray(a, dtype=float), (W,))[perm]
                 for a in (stage, base, size, rate, wait)]
    fn(chain[perm], first, after, np.asarray(start_of, float), *per_write, links,
       np.asarray(cap, float), moff, issue, served, done)
    out = [np.empty(W) for _ in range(3)]
    for o, x in zip(out, (issue, served, done)):
        o[perm] = x
    return tuple(out)


def warm() -> None:
    """Load the compiled loop now (numba's import, its compiler's set-up and the cached
    machine code: ~0.4 s), so that a process forked after this inherits it."""
    one, zero = np.ones(1), np.zeros(1)
    link_walk(np.zeros(1, np.int64), np.zeros(1, np.int64), zero, zero, zero, one, one, zero,
              np.zeros((1, 1), np.int64), one, compiled=True)
