"""The low-latency kernels' writes: one schedule in two forms (``FORMS``), one per speed.

``SendForms`` is the part of ``simnode.ep.lowlatency.LowLatencySim`` that runs a rank's
writes (``send(r, kind)``, a SimPy generator returning each AIV's completion time, its
exposed preparation time and the rank's stretch). Every AIV walks its writes in order
(``simnode.ep.lowlatency_chains``); what differs is how a write's bytes meet the others':

- ``per_write``: each AIV a SimPy process and each remote write a flow on the engine: the
  path's links and the destination's HBM, holding the AIV's MTE3 for its bytes (over URMA,
  one work request through the rank's engine, the AIV's Jetty taking them in order). The
  flows share every resource max-min fairly. Exact, ~1000 R flows: small EP sizes only.
- ``chains``: every chain at once, ahead of the clock, each remote write's stream sharing
  every link of its path with the others (``simnode.ep.lowlatency_links``); then, for the
  result and the trace, one flow per rank that puts its writes' bytes on those links and
  on the receivers' HBMs (each in its share) over the span of all ranks' writes: the
  record of the load, which no write waits for (an HBM takes far more than these writes
  bring). Over URMA the chains are the AIVs' postings and one message train per (rank,
  peer) carries the engine's work (``simnode.network.urma``); the writes are complete once
  the trains have landed and been acknowledged. tests/ep hold the two forms together at
  small EP sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simnode.ep.lowlatency_chains import shared_chains, walk

FORMS = ("chains", "per_write")


@dataclass
class _Arrows:
    """Messages for the trace only: (src, dst) arrays, their start and arrival times."""
    tag: tuple
    start_ns: float
    arrival_ns: np.ndarray


class SendForms:
    """Mixin of ``LowLatencySim``: the writes of a rank (see the module docstring)."""

    def send(self, r: int, kind: str):
        """Rank r's writes of ``kind`` from now: ([A] when each AIV's are complete, [A] the
        time each waited for rows to be prepared)."""
        return (yield from (self._send_chains(r, kind) if self.form == "chains"
                            else self._send_per_write(r)))

    # -- chains --------------------------------------------------------------------------------
    def prepare_chains(self) -> None:
        """Every chain's times relative to its rank's start, and its rank's load."""
        k, w, R, A = self._k, self._writes, self.spec.num_ranks, self.plan.num_aiv
        remote = w.remote
        if self.transport == "memory":
            rates = self.st.rates
            size = np.where(remote, float(self.net.wire_bytes(self._nbytes)), self._nbytes)
            links, cap = self._path_links(w.src, w.dst)
            ch = shared_chains(k.chain, k.step, R * A, k.start, k.stage, rates.mte3_base_ns,
                               size, rates.mte3_GBps * size / self._nbytes, k.wait, links, cap)
            served, done = ch.served, ch.done                  # [writes]
        else:
            ch = walk(k.grid(k.stage), k.grid(k.stream), k.grid(k.wait), k.start)
            served, done = ch.served[k.chain, k.step], ch.done[k.chain, k.step]
        self._rel_end = ch.end.reshape(R, A)
        self._rel_exposed = ch.exposed_stage.reshape(R, A)
        self._rel_done = done
        last = np.zeros(R)
        np.maximum.at(last, w.src[remote], served[remote])
        self._span = np.maximum(last, 1e-9)                     # [R] its last remote byte leaves
        if self.transport == "memory":
            self._rank_flows(w)

    def _rank_flows(self, w) -> None:
        """Per rank: the resources its remote writes cross and its share of them (one flow
        per rank records the load)."""
        R = self.spec.num_ranks
        pair = np.zeros((R, R))
        np.add.at(pair, (w.src[w.remote], w.dst[w.remote]), 1.0)
        src, dst = np.nonzero(pair)
        payload = pair[src, dst] * self._nbytes
        wire = self.net.wire_bytes(payload)
        rows, lat = self.net.routes.route(src, dst)
        res = np.where(rows >= 0, self.net.ports[np.maximum(rows, 0)], -1)
        res = np.concatenate([res, self.r_hbm[dst][:, None]], axis=1)
        units = np.concatenate([np.where(rows >= 0, wire[:, None], 0.0), payload[:, None]], axis=1)
        # per rank: the unique resources of its pairs and the bytes on each, in one pass
        n_res = len(self.net.share.names) + 1
        key = (src[:, None] * n_res + (res + 1)).ravel()
        keys, at = np.unique(key, return_inverse=True)
        per = np.bincount(at, weights=units.ravel())
        rank_of, res_of = keys // n_res, keys % n_res - 1
        keep = res_of >= 0
        rank_of, res_of, per = rank_of[keep], res_of[keep], per[keep]
        bounds = np.searchsorted(rank_of, np.arange(R + 1))
        total = np.bincount(src, weights=wire, minlength=R)
        far = np.zeros(R)
        np.maximum.at(far, src, lat)
        sent = np.bincount(src, weights=payload, minlength=R)
        starts = np.searchsorted(src, np.arange(R + 1))        # src is sorted (np.nonzero)
        self._flow = {}
        for r in np.flatnonzero(total):
            a, b = bounds[r], bounds[r + 1]
            self._flow[int(r)] = (float(total[r]), res_of[a:b][None, :],
                                  (per[a:b] / total[r])[None, :], float(far[r]),
                                  dst[starts[r]:starts[r + 1]], float(sent[r]))

    def _send_chains(self, r: int, kind: str):
        env = self.env
        t0 = env.now
        ends = t0 + self._rel_end[r]
        row = self.plan.pair[r] if kind == "dispatch" else self.plan.pair[:, r]
        peers = np.flatnonzero(row)
        peers = peers[peers != r]
        if len(peers) == 0:
            return ends, self._rel_exposed[r]
        if self.transport == "memory":
            total, res, weights, latency, dsts, payload = self._flow[r]
            self.payload_sent += payload
            span = float(self._span.max())     # every rank's load over one span: one solve
            self.net.share.start_group([total], res, weights, [total / span], [latency])
            if self.tracer is not None:       # an arrow per peer for the trace
                self.post(_Arrows((np.full(len(dsts), r), dsts), t0,
                                  t0 + self._span[r] + self.one_way_ns[r, dsts]))
            yield env.timeout(0)
            return ends, self._rel_exposed[r]
        payload = row[peers] * self._nbytes
        self.payload_sent += float(payload.sum())
        src = np.full(len(peers), r)
        wqes = row[peers].astype(float)
        group = self.post(self.ends.send_many(
            src, peers, payload, wqes * self.spec.wqebb_bytes, wqes, self._stall_peers[r],
            tag=(src, peers), cap_GBps=self.net.wire_bytes(payload) / self._span[r]))
        yield group
        # the writes are complete once landed and acknowledged (each AIV polls its CQ)
        done = float(np.max(group.arrival_ns + self.one_way_ns[peers, r]))
        return np.maximum(ends, done), self._rel_exposed[r]

    def _path_links(self, src: np.ndarray, dst: np.ndarray) -> tuple:
        """(links [writes, K]: each write's path, its links numbered from 0 over the links
        kept, -1 padded (a local write crosses none); their capacities). A link inside the
        path is left out when it can never fill: its capacity is at least that of all the
        edge links (first or last of a path) its writes come from, or of all they go to
        (a non-blocking Clos's leaf and spine links); an oversubscribed one stays."""
        R = self.spec.num_ranks
        key = src * R + dst
        pairs = np.flatnonzero(np.bincount(key, minlength=R * R))
        rows, _ = self.net.routes.route(pairs // R, pairs % R)
        rows = np.where((pairs // R == pairs % R)[:, None], -1, rows)
        n_used = (rows >= 0).sum(axis=1)
        first = rows[:, 0]
        last = rows[np.arange(len(rows)), np.maximum(n_used - 1, 0)]
        capacity = self.net.share.capacity[self.net.ports]          # per port
        P = len(capacity)
        inner = (rows >= 0) & (np.arange(rows.shape[1])[None, :] < (n_used - 1)[:, None])
        inner[:, 0] = False
        port = rows[inner]
        feeds = []
        for edge in (first, last):               # the edge links each inner port collects from
            e = np.broadcast_to(edge[:, None], rows.shape)[inner]
            pairs_pe = np.unique(port * P + e)
            feeds.append(np.bincount(pairs_pe // P, weights=capacity[pairs_pe % P], minlength=P))
        # it can never fill (to rounding: a non-blocking leaf equals its ranks exactly)
        never = capacity >= np.minimum(feeds[0], feeds[1]) * (1 - 1e-9)
        rows = np.where(inner & never[np.maximum(rows, 0)], -1, rows)
        used, idx = np.unique(rows[rows >= 0], return_inverse=True)
        ids = np.full(rows.shape, -1)
        ids[rows >= 0] = idx
        of_pair = np.zeros(R * R, np.int64)
        of_pair[pairs] = np.arange(len(pairs))
        return ids[of_pair[key]], capacity[used]

    # -- per write -------------------------------------------------------------------------------
    def prepare_per_write(self) -> None:
        """One AIV resource per (rank, AIV) and each chain's writes in its order."""
        k, R, A = self._k, self.spec.num_ranks, self.plan.num_aiv
        self.aiv_resources("write")
        order = np.lexsort((k.step, k.chain))
        bounds = np.searchsorted(k.chain[order], np.arange(R * A + 1))
        self._by_chain = [order[bounds[i]:bounds[i + 1]] for i in range(R * A)]

    def _send_per_write(self, r: int):
        env, A = self.env, self.plan.num_aiv
        t0 = env.now
        ends, exposed = np.zeros(A), np.zeros(A)
        yield env.all_of([env.process(self.aiv_writes(r, a, t0, ends, exposed)) for a in range(A)])
        return ends, exposed

    def aiv_writes(self, r: int, a: int, t0: float, ends: np.ndarray, exposed: np.ndarray,
                   on_done=None):
        """AIV a of rank r walks its writes from ``t0``; ``ends[a]``: when they are complete;
        ``on_done(write, done_ns)`` once each is seen complete (memory) or posted (URMA)."""
        env, k, w, rates = self.env, self._k, self._writes, self.st.rates
        c = r * self.plan.num_aiv + a
        aiv = int(self.pools["write"][c])
        last_issue = last_done = t0 + k.start[c]
        urma = self.transport == "urma"
        pending = []
        for i in self._by_chain[c]:
            ready = last_issue + k.stage[i]
            exposed[a] += max(ready - last_done, 0.0)
            issue = max(ready, last_done)
            yield env.timeout(issue - env.now)
            dst = int(w.dst[i])
            if dst == r or urma:
                served = issue + k.stream[i]
                yield env.timeout(served - env.now)
                if dst != r:                  # URMA: the Jetty takes the posted writes in order
                    tr = self.ends.send(r, dst, self._nbytes, self.spec.wqebb_bytes, 1, flow_key=a,
                                        peers=int(self._stall_peers[r]))
                    self.payload_sent += self._nbytes
                    pending.append((tr, dst))
                    yield tr.injected
                done = max(env.now, served) + k.wait[i]
            else:
                yield env.timeout(rates.mte3_base_ns)
                yield self.copy_flow(r, dst, self._nbytes, aiv, self._nbytes / rates.mte3_GBps,
                                     from_ub=True)
                # landed (one way): the remote cost and the acknowledgement's way back remain
                done = env.now + k.wait[i] - self.one_way_ns[r, dst]
            if on_done is not None:
                on_done(int(i), done)
            last_issue, last_done = issue, done
        if pending:
            yield env.all_of([tr for tr, _ in pending])
            last_done = max(last_done, max(tr.served_ns + tr.latency_ns + self.one_way_ns[d, r]
                                           for tr, d in pending))
        yield env.timeout(max(last_done - env.now, 0.0))
        ends[a] = last_done
