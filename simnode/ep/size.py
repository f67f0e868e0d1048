"""The topology at a run's EP size, and the limits every EP run is held to before any work.

``with_num_ranks(topology, num_ranks, kind, source)``: the topology with the workload's
``num_ranks`` (0 = the topology's own count), so one topology file serves every size.
``topology_for(topology, params, kind, source, max_pairs)``: that, with the EP family's
checks: experts in equal blocks per rank, at most ``MAX_TOKENS`` routed tokens, at most
``max_pairs`` communicating pairs, the routing arguments. ``check_pairs`` is the pairs
limit alone (the transport kind's).
"""

from __future__ import annotations

import dataclasses

from simnode.config.supernode import check_shape
from simnode.ep.fields import check_routing
from simnode.errors import ConfigError

#: the most tokens one EP run may route (all ranks): 8x the published EP128 case
#: (16384 x 128), ~1.3 GB of routing and plan arrays
MAX_TOKENS = 2 ** 24
#: the most (sender, receiver) pairs with traffic one run may simulate, unless its kernels
#: set their own: EP1024's all-to-all (1024 x 1023): every pair is a flow with its route, so
#: memory grows with the pairs
MAX_PAIRS = 1024 * 1023


def with_num_ranks(topology, num_ranks: int, kind: str, source: str = "workload"):
    """The topology at a workload's ``num_ranks`` (0 = the topology's own count); ``kind``
    and ``source`` (the workload file) name the workload in errors."""
    if topology.supernode is None:
        raise ConfigError(topology.source, "supernode", "<missing>",
                          f"a supernode section: workload kind '{kind}' runs on a supernode")
    if num_ranks and num_ranks != topology.supernode.num_ranks:
        spec = dataclasses.replace(topology.supernode, num_ranks=num_ranks)
        if num_ranks < 2:
            raise ConfigError(source, "num_ranks", num_ranks, "at least 2 ranks")
        try:
            check_shape(spec)
        except ConfigError as exc:
            if exc.key_path != "supernode.num_ranks":
                raise
            # the count came from the workload: name it, and the topology whose shape limits it
            raise ConfigError(source, "num_ranks", num_ranks,
                              f"{exc.expected} (the shape of {topology.source})", exc.hint) from None
        topology = dataclasses.replace(topology, supernode=spec)
    return topology


def check_pairs(pairs: int, num_ranks: int, source: str, key: str = "num_ranks",
                limit: int | None = None) -> None:
    """Refuse a run with more communicating pairs than ``limit`` (default ``MAX_PAIRS``),
    before any work."""
    limit = MAX_PAIRS if limit is None else limit
    if pairs > limit:
        raise ConfigError(source, key, num_ranks,
                          f"at most {limit:,} communicating (sender, receiver) pairs ({pairs:,} at "
                          f"{num_ranks} ranks): each is a flow with its route, held in memory")


def topology_for(topology, params: dict, kind: str, source: str = "workload",
                 max_pairs: int | None = None):
    """The topology at the EP size of ``params`` (the family's fields), checked for an EP run
    of every rank to every rank: errors name ``source`` (or the topology file where the count
    comes from it) and ``kind``."""
    n = params["num_ranks"]
    topology = with_num_ranks(topology, n, kind, source)
    ranks = topology.supernode.num_ranks
    # num_ranks = 0 in the workload leaves the count to the topology file
    where, key = (source, "num_ranks") if n else (topology.source, "supernode.num_ranks")
    if params["num_experts"] % ranks:
        raise ConfigError(where, key, ranks,
                          f"a divisor of num_experts ({params['num_experts']}): experts are "
                          f"placed on ranks in equal contiguous blocks")
    if params["tokens_per_rank"] * ranks > MAX_TOKENS:
        raise ConfigError(source, "tokens_per_rank", params["tokens_per_rank"],
                          f"at most {MAX_TOKENS:,} tokens over all {ranks} ranks (tokens_per_rank x "
                          f"num_ranks): the routing and plan arrays of one run live in memory")
    check_pairs(ranks * (ranks - 1), ranks, where, key, max_pairs)
    check_routing(params, ranks, source)
    return topology
