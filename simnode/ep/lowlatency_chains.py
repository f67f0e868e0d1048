"""Closed forms of the low-latency kernels' per-AIV schedules (pure numpy, no SimPy).

Every AIV of a low-latency kernel walks its writes in order (``simnode.ep.lowlatency_plan``:
a dispatch AIV its share of (token, k) pairs, a combine AIV its share of received rows).
Write j's preparation (``stage``: the slot count, the row's read, its quantization) starts
once write j - 1 has been issued (two UB buffers), and write j is issued once it is ready
and write j - 1 is complete: it streams for ``stream`` ns, then waits ``wait`` ns until it
is seen complete (a remote write's round trip and cost). So, per chain::

    issue_j  = max(issue_{j-1} + stage_j, done_{j-1})
    served_j = issue_j + stream_j           (its last byte has left the AIV)
    done_j   = served_j + wait_j

``walk(stage, stream, wait)`` runs this for many chains at once ([chains, J] arrays, padded
with zeros: a padded step changes nothing) and returns ``Chains``: the times above, each
chain's end and the part of it spent waiting for the next row to be prepared rather than
for a write (``exposed_stage``). ``dense(writes, R, A)`` lays a plan's writes out as those
[R x A, J] arrays.

Writes that stream at once share the links they cross: ``shared_chains`` runs the same
chains with each write's stream on its path's links (``simnode.ep.lowlatency_links``).

``reduce_ends(start, token_land, ...)``: a source AIV's weighted sums, token by token: each
waits for its rows' last landing, found by polling (half a round on average, then one
round), then sums them. It is the one formula both forms of the member use: the fast form
on all AIVs at once, the per-write form as each AIV's process replays it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simnode.ep.lowlatency_links import link_walk


@dataclass(frozen=True)
class Chains:
    """Times of in-order write chains, ns from the chains' start: ``issue``, ``served`` and
    ``done`` ``[chains, J]`` (``walk``) or per write (``shared_chains``)."""
    issue: np.ndarray
    served: np.ndarray
    done: np.ndarray
    exposed_stage: np.ndarray        #: [chains] time the chain waited for a row to be prepared

    end: np.ndarray                  #: [chains] when each chain's last write is seen complete


def walk(stage: np.ndarray, stream: np.ndarray, wait: np.ndarray, start=None) -> Chains:
    """The chains' times (see the module docstring); arrays of one shape ``[chains, J]``;
    ``start`` [chains]: when each chain may begin (0 by default)."""
    n, J = stage.shape
    issue, served, done = (np.zeros((n, J)) for _ in range(3))
    last_issue = np.zeros(n) if start is None else np.asarray(start, dtype=float).copy()
    last_done = last_issue.copy()
    exposed = np.zeros(n)
    for j in range(J):
        ready = last_issue + stage[:, j]
        exposed += np.maximum(ready - last_done, 0.0)
        last_issue = np.maximum(ready, last_done)
        issue[:, j] = last_issue
        served[:, j] = last_issue + stream[:, j]
        last_done = served[:, j] + wait[:, j]
        done[:, j] = last_done
    return Chains(issue, served, done, exposed, last_done)


def shared_chains(chain: np.ndarray, step: np.ndarray, num_chains: int, start, stage, base, size,
                  rate, wait, links, link_cap, compiled=None) -> Chains:
    """``simnode.ep.lowlatency_links.link_walk`` for writes given with their chain and step
    (any order; ``links`` [W, K] the link ids of each one's path): the ``Chains`` ``walk``
    would give, with each write's stream sharing its path's links; its ``issue``, ``served``
    and ``done`` per write, in the writes' order ([W], not [chains, J])."""
    issue, served, done = link_walk(chain, step, start, stage, base, size, rate, wait, links,
                                    link_cap, compiled)
    # the chain's wait for row preparation: issue - the previous write's done (or the start)
    start = np.asarray(start, dtype=float)
    prev_done = start[chain].copy()
    J = int(step.max()) + 1 if step.size else 0
    at = np.full((num_chains, J), -1, np.int64)
    at[chain, step] = np.arange(len(chain))
    later = step > 0
    prev_done[later] = done[at[chain[later], step[later] - 1]]
    exposed = np.zeros(num_chains)
    np.add.at(exposed, chain, np.maximum(issue - prev_done, 0.0))
    end = start.copy()
    np.maximum.at(end, chain, done)
    return Chains(issue, served, done, exposed, end)


def dense(src: np.ndarray, aiv: np.ndarray, order: np.ndarray, num_ranks: int,
          num_aiv: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(chain index src x A + aiv, step = order, steps J) of each write, for ``walk``'s
    arrays: ``values[chain, step] = per_write``."""
    chain = src * num_aiv + aiv
    J = int(order.max()) + 1 if order.size else 0
    return chain, order, J


def scatter(chain: np.ndarray, step: np.ndarray, shape: tuple, values) -> np.ndarray:
    """A ``[chains, J]`` array holding ``values`` (per write, or one value) at its writes."""
    out = np.zeros(shape)
    out[chain, step] = values
    return out


def reduce_ends(start: np.ndarray, token_land: np.ndarray, counts: np.ndarray,
                poll_ns: float, per_token_ns: np.ndarray) -> np.ndarray:
    """End of each source AIV's sums: ``start`` [A] (when it begins polling), ``token_land``
    [tokens] (when each token's last row lands; tokens split over the AIVs in order by
    ``counts`` [A]), ``per_token_ns`` [tokens] (the clear and the sum, once detected).
    Token t of an AIV: now = max(now, land_t + poll / 2) + poll + per_token_t."""
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    now = np.asarray(start, dtype=float).copy()
    for i in range(int(counts.max(initial=0))):
        mine = counts > i
        tok = starts[mine] + i
        now[mine] = np.maximum(now[mine], token_land[tok] + 0.5 * poll_ns) + poll_ns + per_token_ns[tok]
    return now
