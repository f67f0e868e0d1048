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
  its two edge links with the others (``simnode.ep.lowlatency_links``: the writing die's
  links out, the receiving die's links in); then one flow per (rank, peer) carrying the
  pair's bytes over the span of the rank's writes (capped so that, alone, it ends with
  them): the links' and HBMs' load for the result and the trace, and the stretch of a rank
  whose flows find a resource (a spine, an HBM) that its chains did not model too slow to
  carry them in time. Over URMA the chains are the AIVs' postings and the flows carry the
  engine's work (``simnode.network.urma``): the writes are complete once the flows have
  landed and been acknowledged. tests/ep hold the two forms together at small EP sizes.
"""

from __future__ import annotations

import numpy as np

from simnode.ep.lowlatency_chains import shared_chains, walk

FORMS = ("chains", "per_write")
#: relative slack below which a rank's flows count as keeping up with its chains
STRETCH_TOL = 1e-6


class SendForms:
    """Mixin of ``LowLatencySim``: the writes of a rank (see the module docstring)."""

    def send(self, r: int, kind: str):
        return (yield from (self._send_chains(r, kind) if self.form == "chains"
                            else self._send_per_write(r)))

    # -- chains --------------------------------------------------------------------------------
    def prepare_chains(self) -> None:
        """Every chain's times relative to its rank's start, and its flows' caps."""
        k, w, R, A = self._k, self._writes, self.spec.num_ranks, self.plan.num_aiv
        remote = w.remote
        if self.transport == "memory":
            rates = self.st.rates
            size = np.where(remote, float(self.net.wire_bytes(self._nbytes)), self._nbytes)
            (la, cap), (lb, _) = self._edge_links(w.src, w.dst)
            ch = shared_chains(k.chain, k.step, R * A, k.start, k.stage[k.chain, k.step],
                               rates.mte3_base_ns, size, rates.mte3_GBps * size / self._nbytes,
                               k.wait[k.chain, k.step], la, lb, cap)
        else:
            ch = walk(k.stage, k.stream, k.wait, k.start)
        served = ch.served[k.chain, k.step]
        self._rel_end = ch.end.reshape(R, A)
        self._rel_exposed = ch.exposed_stage.reshape(R, A)
        self._rel_done = ch.done[k.chain, k.step]              # [writes]
        last = np.zeros(R)
        np.maximum.at(last, w.src[remote], served[remote])
        self._span = np.maximum(last, 1e-9)                     # [R] its last remote byte leaves
        self._rel_tail = np.maximum(self._rel_end.max(axis=1) - last, 0.0)

    def _send_chains(self, r: int, kind: str):
        env = self.env
        t0 = env.now
        row = self.plan.pair[r] if kind == "dispatch" else self.plan.pair[:, r]
        peers = np.flatnonzero(row)
        peers = peers[peers != r]
        ends = t0 + self._rel_end[r]
        if len(peers) == 0:
            return ends, self._rel_exposed[r], 1.0
        payload = row[peers] * self._nbytes
        src = np.full(len(peers), r)
        cap = self.net.wire_bytes(payload) / self._span[r]
        self.payload_sent += float(payload.sum())
        if self.transport == "urma":
            wqes = row[peers].astype(float)
            group = self.post(self.ends.send_many(
                src, peers, payload, wqes * self.spec.wqebb_bytes, wqes, self._stall_peers[r],
                tag=(src, peers), cap_GBps=cap))
            yield group
            # the writes are complete once landed and acknowledged (each AIV polls its CQ)
            done = float(np.max(group.arrival_ns + self.one_way_ns[peers, r]))
            return np.maximum(ends, done), self._rel_exposed[r], 1.0
        group = self.post(self.net.send_many(src, peers, payload, self.r_hbm[peers][:, None],
                                             payload[:, None], tag=(src, peers), cap_GBps=cap))
        yield group
        served = float(np.max(group.served_ns)) - t0
        stretch = 1.0
        if served > self._span[r] * (1 + STRETCH_TOL):
            stretch = (served + self._rel_tail[r]) / self._rel_end[r].max()
        return t0 + stretch * self._rel_end[r], self._rel_exposed[r], stretch

    def _edge_links(self, src: np.ndarray, dst: np.ndarray) -> tuple:
        """((first link [writes], capacities), (last link [writes], capacities)) of each
        write's path, numbered from 0 over the links used; a local write crosses neither (-1)."""
        R = self.spec.num_ranks
        pairs = np.unique(src * R + dst)
        rows, _ = self.net.routes.route(pairs // R, pairs % R)
        first = rows[:, 0]
        last = rows[np.arange(len(rows)), np.maximum((rows >= 0).sum(axis=1) - 1, 0)]
        ports = np.concatenate([first, last])
        used, idx = np.unique(ports[ports >= 0], return_inverse=True)
        ids = np.full(len(ports), -1)
        ids[ports >= 0] = idx
        cap = self.net.share.capacity[self.net.ports[used]]
        at = np.searchsorted(pairs, src * R + dst)
        local = src == dst
        la, lb = ids[:len(pairs)][at], ids[len(pairs):][at]
        return (np.where(local, -1, la), cap), (np.where(local, -1, lb), cap)

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
        return ends, exposed, 1.0

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
            j = k.step[i]
            ready = last_issue + k.stage[c, j]
            exposed[a] += max(ready - last_done, 0.0)
            issue = max(ready, last_done)
            yield env.timeout(issue - env.now)
            dst = int(w.dst[i])
            if dst == r or urma:
                served = issue + k.stream[c, j]
                yield env.timeout(served - env.now)
                if dst != r:                  # URMA: the Jetty takes the posted writes in order
                    tr = self.ends.send(r, dst, self._nbytes, self.spec.wqebb_bytes, 1, flow_key=a,
                                        peers=int(self._stall_peers[r]))
                    self.payload_sent += self._nbytes
                    pending.append((tr, dst))
                    yield tr.injected
                done = max(env.now, served) + k.wait[c, j]
            else:
                yield env.timeout(rates.mte3_base_ns)
                yield self.copy_flow(r, dst, self._nbytes, aiv, self._nbytes / rates.mte3_GBps,
                                     from_ub=True)
                # landed (one way): the remote cost and the acknowledgement's way back remain
                done = env.now + k.wait[c, j] - self.one_way_ns[r, dst]
            if on_done is not None:
                on_done(int(i), done)
            last_issue, last_done = issue, done
        if pending:
            yield env.all_of([tr for tr, _ in pending])
            last_done = max(last_done, max(tr.served_ns + tr.latency_ns + self.one_way_ns[d, r]
                                           for tr, d in pending))
        yield env.timeout(max(last_done - env.now, 0.0))
        ends[a] = last_done
