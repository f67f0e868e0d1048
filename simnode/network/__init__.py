"""Supernode network: Clos or full-mesh topology, max-min fair flows, routing policies.

- ``spec``: ``SupernodeSpec``, ``supernode_from_mapping(data, source)``, ``check_shape``.
- ``clos``: ``build_clos(spec) -> networkx.DiGraph``, ``link_table``, ``candidate_paths``,
  ``ecmp_choice``.
- ``mesh``: ``build_full_mesh(spec)``: one direct link per pair of ranks (netlayer 0).
- ``urma``: ``RankEndpoints``: the ranks' URMA engines and HBM on the flow network.
- ``solver``: ``max_min_rates`` (vectorized water-filling), ``max_min_rates_exact``.
- ``share``: ``BatchedShare`` (the FluidShare interface, batched), ``Transfer``.
- ``flows``: ``FlowNetwork(env, spec_or_graph, batch_window_ns=...)`` with ``send``.
- ``bound``: ``analytical_bound_ns(traffic_matrix_bytes, spec)``, ``port_loads``.
"""

from simnode.network.bound import analytical_bound_ns, busiest_port, port_loads
from simnode.network.clos import build_clos, candidate_paths, ecmp_choice, link_table
from simnode.network.flows import FlowNetwork
from simnode.network.share import BatchedShare, Transfer
from simnode.network.solver import max_min_rates, max_min_rates_exact
from simnode.network.spec import SupernodeSpec, check_shape, supernode_from_mapping

__all__ = [
    "SupernodeSpec", "supernode_from_mapping", "check_shape",
    "build_clos", "candidate_paths", "ecmp_choice", "link_table",
    "max_min_rates", "max_min_rates_exact",
    "BatchedShare", "Transfer", "FlowNetwork",
    "analytical_bound_ns", "busiest_port", "port_loads",
]
