"""Micro benchmark of the flow network: an EP128 dispatch-sized all-to-all.

Each of ``--ranks`` ranks has ``--queues`` send queues (one per AIV, facts 4.1); queue q
of rank r owns a contiguous range of the rank's tokens (facts 4.2) and sends one
message per peer (or one per ``--tokens-per-message`` tokens) with the records of
its tokens routed there, peers in round-robin order from r + q + 1 (facts 4.3). A
queue's next message starts when the previous one has left (``transfer.injected``):
a Jetty's WQEs go out in order. Messages go through ``RankEndpoints`` as DeepEP's do,
so the ranks' HBM, URMA engine and URMA ceiling (``urma_payload_GBps``) share them too.
Routing is uniform top-6 of 256 experts (facts 2.4). Prints wall time, solver
recomputes, messages per second, peak memory, and the simulated time against the
analytical bound (busiest port's bytes / bandwidth).

    python benchmarks/bench_network.py                   # EP128, 64 queues, spray
    python benchmarks/bench_network.py --ranks 32 --routing ecmp --window-ns 0
    python benchmarks/bench_network.py --tokens-per-message 8 --record-bytes 14368  # combine-like
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import simpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simnode.config.topology import load_topology                      # noqa: E402
from simnode.ep.routing import dest_ranks_per_token, route_supernode  # noqa: E402
from simnode.network.bound import busiest_port                          # noqa: E402
from simnode.network.flows import FlowNetwork                           # noqa: E402
from simnode.network.urma import RankEndpoints                          # noqa: E402
from simnode.units import BYTES_PER_GB, BYTES_PER_MiB, NS_PER_MS, NS_PER_S, ns_to_us  # noqa: E402

TOPOLOGY = Path(__file__).resolve().parents[1] / "topologies" / "atlas950-supernode.yaml"
# One dispatch record per (token, remote rank): FP8 hidden 7168 B + fp32 scale per 128
# channels (224 B) + 6 int64 ids + 6 fp32 weights + int64 source index (facts 4.2; the
# exact metadata size is open, facts 5.6). A benchmark input, not a model parameter.
RECORD_BYTES = 7168 + 7168 // 128 * 4 + 6 * 8 + 6 * 4 + 8
TOKENS_PER_SQE = 6          # facts 4.2: one SQE carries up to 6 tokens
SQE_WQEBBS = 4              # facts 4.2: 48 B header + 12 x 16 B SGEs <= 4 x 64 B WQEBBs


def plan(num_ranks: int, queues: int, tokens: int, seed: int) -> np.ndarray:
    """Tokens per (rank, queue, peer): ``int64 [ranks, queues, ranks]``."""
    routes = route_supernode(tokens, 256, 6, num_ranks, "uniform", seed)
    per_queue = -(-tokens // queues)
    counts = np.zeros((num_ranks, queues, num_ranks), dtype=np.int64)
    for r in range(num_ranks):
        mask = dest_ranks_per_token(routes[r], 256, num_ranks)
        for q in range(queues):
            counts[r, q] = mask[q * per_queue:(q + 1) * per_queue].sum(axis=0)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=128)
    ap.add_argument("--queues", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=16384, help="tokens per rank (facts 2.4)")
    ap.add_argument("--tokens-per-message", type=int, default=0,
                    help="split a (queue, peer) batch into messages of this many tokens "
                         "(6 = one dispatch SQE, facts 4.2); 0 = one message per peer")
    ap.add_argument("--record-bytes", type=int, default=RECORD_BYTES,
                    help="bytes per token record (default: a dispatch record; 14368 = a "
                         "combine row + weights, facts 4.3)")
    ap.add_argument("--routing", choices=("spray", "ecmp"), default=None)
    ap.add_argument("--window-ns", type=float, default=200.0, help="batch_window_ns")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--task-round-robin", action="store_true",
                    help="post one message per peer in turn (combine's task order) instead of "
                         "all of a peer's messages together")
    ap.add_argument("--jitter-ns", type=float, default=0.0,
                    help="each queue starts after a random delay in [0, this): desynchronizes "
                         "the queues' round-robin")
    args = ap.parse_args()

    topo = load_topology(TOPOLOGY)
    spec = replace(topo.supernode, num_ranks=args.ranks)
    t0 = time.perf_counter()
    counts = plan(args.ranks, args.queues, args.tokens, args.seed)
    t_plan = time.perf_counter() - t0

    env = simpy.Environment()
    net = FlowNetwork(env, spec, routing=args.routing, batch_window_ns=args.window_ns)
    ends = RankEndpoints(net, topo.chip.memory.hbm_bandwidth_GBps,
                         hbm_fcfs=topo.chip.memory.hbm_arbitration == "fcfs")
    traffic = np.zeros((args.ranks, args.ranks, args.queues))   # bytes per (src, dst, queue)
    per_msg = args.tokens_per_message

    delays = np.random.default_rng(args.seed).uniform(0.0, args.jitter_ns, (args.ranks, args.queues))

    def queue(r: int, q: int):
        if args.jitter_ns > 0:
            yield env.timeout(delays[r, q])
        peers = [(r + q + i) % args.ranks for i in range(1, args.ranks + 1)]
        peers = [d for d in peers if d != r]
        chunks = {d: [int(counts[r, q, d])] if per_msg <= 0 else
                  [min(per_msg, int(counts[r, q, d]) - k) for k in range(0, int(counts[r, q, d]), per_msg)]
                  for d in peers}
        if args.task_round_robin:     # combine's order: one task per peer in turn (facts 4.3)
            order = [(d, ch[k]) for k in range(max(map(len, chunks.values()), default=0))
                     for d, ch in chunks.items() if k < len(ch)]
        else:                         # every message of a peer, then the next peer
            order = [(d, c) for d, ch in chunks.items() for c in ch]
        for d, c in order:
            if True:
                if c > 0:
                    traffic[r, d, q] += c * args.record_bytes
                    sqes = -(-c // TOKENS_PER_SQE)
                    yield ends.send(r, d, c * args.record_bytes, sqes * SQE_WQEBBS * spec.wqebb_bytes,
                                    sqes, flow_key=q, peers=args.ranks - 1).injected

    for r in range(args.ranks):
        for q in range(args.queues):
            env.process(queue(r, q))
    t0 = time.perf_counter()
    env.run()
    wall = time.perf_counter() - t0
    peak_MiB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / BYTES_PER_MiB

    port = busiest_port(traffic, spec, routing=net.routing, with_headers=True)
    sent = traffic.sum(axis=(1, 2))
    print(f"EP{args.ranks}, {args.queues} queues/rank, routing {net.routing}, "
          f"batch window {args.window_ns:g} ns")
    print(f"  messages         {net.messages_sent:>12,d}   ({net.payload_bytes_sent / BYTES_PER_GB:.2f} GB payload)")
    print(f"  wall time        {wall:>12.1f} s    (+{t_plan:.1f} s routing/plan)")
    print(f"  messages/s       {net.messages_sent / wall:>12,.0f}")
    print(f"  solver runs      {net.recomputes:>12,d}   ({wall / max(net.recomputes, 1) * NS_PER_S / NS_PER_MS:.2f} ms wall each, all costs)")
    print(f"  peak memory      {peak_MiB:>12.0f} MiB (max RSS)")
    print(f"  simulated        {ns_to_us(env.now):>12.1f} us")
    print(f"  bound            {ns_to_us(port.time_ns):>12.1f} us   ({port.name}, wire bytes)")
    print(f"  sim / bound      {env.now / port.time_ns:>12.3f}")
    print(f"  payload/rank     {sent.mean() / env.now:>12.1f} GB/s  (mean)")
    for name, size, util in net.hottest_links(3):
        print(f"  hot link         {name:>20s} {size / BYTES_PER_MiB:9.1f} MiB  util {util:.3f}")


if __name__ == "__main__":
    main()
