"""A toy supernode kind, ``toy_ring``: a whole new kind in one module. Nothing in simnode
names it; a test plugs it in through ``SIMNODE_KINDS`` (``simnode.workloads.registry``).

Every rank sends ``messages`` messages of ``message_bytes`` to the next rank of a ring
(r -> r + 1), one after the other, over the topology's Clos on the flow network (the one
sharing engine); the ranks' URMA engines are left out, so the bound is the busiest link's.
The result has a header (makespan, bottleneck, the ring's bound), one
kernel record (GB/s per rank, messages) and each link's busy fraction over time as a series.
"""

from __future__ import annotations

import numpy as np
import simpy

from simnode.network.bound import port_loads
from simnode.network.flows import FlowNetwork
from simnode.report.result import KernelRecord, Result, fig
from simnode.workloads.registry import Field, WorkloadKind
from simnode.ep.size import with_num_ranks
from simnode.workloads.supernode import link_series, link_util

FIELDS = (
    Field("num_ranks", "int", 0, "ranks (0 = the topology's supernode.num_ranks)", min_value=0,
          unit="ranks"),
    Field("message_bytes", "int", 1 << 20, "payload of one message", min_value=1, unit="B"),
    Field("messages", "int", 4, "messages each rank sends to the next, one after the other",
          min_value=1, unit="messages"),
)


def check(topology, params: dict, source: str = "workload"):
    """The topology at the workload's num_ranks (an error names a count it cannot take)."""
    return with_num_ranks(topology, params["num_ranks"], "toy_ring", source)


def _rank(env, net: FlowNetwork, rank: int, params: dict, done: list):
    peer = (rank + 1) % net.num_ranks
    for _ in range(params["messages"]):
        yield net.send(rank, peer, params["message_bytes"])
    done[rank] = env.now


def run(topology, params: dict, options=None, name: str = "toy_ring") -> Result:
    topology = check(topology, params)
    ranks = topology.supernode.num_ranks
    env = simpy.Environment()
    net = FlowNetwork(env, topology.supernode)
    done = [0.0] * ranks
    for r in range(ranks):
        env.process(_rank(env, net, r, params, done))
    env.run()
    time_ns = max(done)
    per_rank = params["messages"] * params["message_bytes"]
    traffic = np.zeros((ranks, ranks))
    traffic[np.arange(ranks), (np.arange(ranks) + 1) % ranks] = per_rank
    links = set(net.routes.port_names)
    bound_ns = max(p.time_ns for p in port_loads(traffic, net.routes, with_headers=True) if p.name in links)
    link, _, util = net.hottest_links(1)[0]
    kernel = KernelRecord("ring", time_ns, bound_ns, f"link {link}", util, (
        fig("GBps", per_rank / time_ns, "GB/s", "payload per rank / time", headline=True),
        fig("messages_sent", net.messages_sent, "messages", "messages on the network")))
    return Result(name, "toy_ring", time_ns, f"link {link}", (kernel,),
                  (fig("num_ranks", ranks, "ranks", "ranks of the ring"),),
                  tuple(link_series("ring", link_util(net))), roofline_ns=bound_ns,
                  bottleneck_util_frac=util)


KIND = WorkloadKind("toy_ring", FIELDS, run, "a ring of messages on a supernode (a test's toy kind)",
                    needs_supernode=True, check=check)
