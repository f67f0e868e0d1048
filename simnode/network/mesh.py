"""Full-mesh topology as a networkx graph: every pair of ranks joined directly.

``build_full_mesh(spec)`` returns a ``networkx.DiGraph`` like ``clos.build_clos``: nodes
``rank{i}`` (``kind`` "rank", ``index``) and one directed edge per ordered pair of ranks
(``kind`` "peer") with ``capacity_GBps`` = ``spec.peer_link_GBps``, ``latency_ns`` =
``spec.link_latency_ns`` and ``link_id`` in (src, dst) order. No switches, so no hop
latency; a message takes the one link from its sender to its receiver. This is the
8-card box's netlayer 0 (facts 1.5, S7: a 1D full mesh, 28 peer-to-peer links).
"""

from __future__ import annotations

import networkx as nx

from simnode.config.supernode import SupernodeSpec, check_shape


def build_full_mesh(spec: SupernodeSpec) -> nx.DiGraph:
    """The full mesh of ``spec`` (validated with ``check_shape``); see the module docstring."""
    check_shape(spec)
    g = nx.DiGraph(spec=spec)
    n = spec.num_ranks
    for i in range(n):
        g.add_node(f"rank{i}", kind="rank", index=i)
    link_id = 0
    for i in range(n):
        for j in range(n):
            if i != j:
                g.add_edge(f"rank{i}", f"rank{j}", capacity_GBps=spec.peer_link_GBps,
                           latency_ns=spec.link_latency_ns, kind="peer", link_id=link_id)
                link_id += 1
    return g


def mesh_link_id(src_rank: int, dst_rank: int, num_ranks: int) -> int:
    """The ``link_id`` of the link src -> dst in ``build_full_mesh``'s numbering."""
    return src_rank * (num_ranks - 1) + dst_rank - (dst_rank > src_rank)
