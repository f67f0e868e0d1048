"""Supernode network: Clos or full-mesh topology, routes, max-min fair flows.

- the spec it reads, ``SupernodeSpec``, is the supernode's schema in ``simnode.config.supernode``.
- ``routes``: ``Routes.from_spec`` / ``from_graph``: the ports and every pair's path,
  computed for many pairs at once; ``ecmp_choice`` (its hash: ``simnode.engine.mix``).
- ``clos`` / ``mesh``: the same networks as networkx graphs (``build_clos``,
  ``build_full_mesh``, ``link_table``, ``candidate_paths``), for inspection and for
  topologies edited by hand (e.g. a link removed).
- ``flows``: ``FlowNetwork(env, spec_or_graph, batch_window_ns=...)`` with ``send`` and
  ``send_many``, on the one sharing engine (``simnode.engine.share``).
- ``urma``: ``RankEndpoints``: the ranks' URMA engines and HBM on the flow network.
- ``bound``: ``analytical_bound_ns(traffic_matrix_bytes, spec_or_routes)``, ``port_loads``.

Submodules are imported where they are used (networkx only with the graph forms).
"""
