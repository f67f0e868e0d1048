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


def _push(heap, key, pos, size, item, value):
    """Add ``item`` with key ``value`` to the indexed heap of ``size`` items; the new size."""
    key[item] = value
    heap[size] = item
    pos[item] = size
    _sift_up(heap, key, pos, size)
    return size + 1


def _pop(heap, key, pos, size):
    """Remove the top item of the indexed heap of ``size`` items; the new size."""
    size -= 1
    if size > 0:
        heap[0] = heap[size]
        pos[heap[0]] = 0
        _sift_down(heap, key, pos, 0, size)
    return size


def _advance(link, t, V, tl, f):
    V[link] += f[link] * (t - tl[link])
    tl[link] = t


def _next_end(link, t, V, f, n, head, fifo, tag):
    """When the write at the head of ``link`` is done there (inf when the link is idle)."""
    if n[link] == 0:
        return _INF
    return t + (tag[fifo[head[link]]] - V[link]) / f[link]


def _loop(chain, start_of, stage, base, size, rate, wait, links, cap, moff, issue, served, done):
    """The event loop (see the module docstring); writes sorted by chain, then step."""
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
    sk = np.zeros(2 * W)                           # pending starts (i) and local ends (W + i)
    sh = np.zeros(2 * W, np.int64)
    sp = np.zeros(2 * W, np.int64)
    ns = 0
    for i in range(W):
        if i == 0 or chain[i] != chain[i - 1]:
            issue[i] = start_of[chain[i]] + stage[i]
            ns = _push(sh, sk, sp, ns, i, issue[i] + base[i])
    while True:
        t_start = sk[sh[0]] if ns > 0 else _INF
        t_link = key[heap[0]] if L > 0 else _INF
        if t_start == _INF and t_link == _INF:
            break
        finished = -1
        if t_start <= t_link:
            t, i = t_start, sh[0]
            ns = _pop(sh, sk, sp, ns)
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
                    ns = _push(sh, sk, sp, ns, W + i, t + size[i] / rate[i])
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
            nxt = i + 1
            if nxt < W and chain[nxt] == chain[i]:
                issue[nxt] = max(issue[i] + stage[nxt], done[i])
                ns = _push(sh, sk, sp, ns, nxt, issue[nxt] + base[nxt])
    return 0


def link_walk(chain, start_of, stage, base, size, rate, wait, links, cap, compiled=None):
    """(issue, served, done) [W] of writes sorted by ``chain`` (then step): each starts
    ``base`` ns after it is issued and streams ``size`` bytes at ``rate`` alone, sharing the
    links of its row of ``links`` [W, K] (ids into ``cap``, -1: none) with the writes on
    them; the writes on one link must share one size and one rate. ``start_of[c]``: when
    chain c may begin. ``compiled``: None = from ``COMPILED_FROM_WRITES`` writes on."""
    links = np.asarray(links, np.int64).reshape(size.shape[0], -1)
    W = size.shape[0]
    L = cap.shape[0]
    used = links[links >= 0]
    per = np.bincount(used, minlength=L)
    moff = np.concatenate([[0], np.cumsum(per)]).astype(np.int64)
    issue, served, done = np.zeros(W), np.zeros(W), np.zeros(W)
    fn = _loop
    if compiled is None:
        compiled = W >= COMPILED_FROM_WRITES
    if compiled:
        fns = compile_functions((_sift_up, _sift_down, _rekey, _push, _pop, _advance, _next_end,
                                 _loop), {"np": np, "_INF": _INF})
        if fns is not None:
            fn = fns["_loop"]
    fn(np.asarray(chain, np.int64), np.asarray(start_of, float), np.asarray(stage, float),
       np.asarray(base, float), np.asarray(size, float), np.asarray(rate, float),
       np.asarray(wait, float), links, np.asarray(cap, float), moff, issue, served, done)
    return issue, served, done
