"""``simnode export TOPOLOGY WORKLOAD [--set KEY=VALUE ...] --chakra DIR``: run a supernode
workload and write its schedule as Chakra execution traces, one ``<workload>.<rank>.et``
per rank (``simnode.chakra.export``; docs/chakra.md), for ASTRA-sim and the other tools
that read them. Kinds: ``moe_layer`` (every overlap mode, both comm kernels), ``deepep``
(dispatch, then combine) and ``decode_step`` (every stream of every rank). The kind
``chakra`` runs such a folder back on a supernode.
"""

from __future__ import annotations

from simnode.commands.options import add_inputs, overlays_of

ORDER = 15
#: the kinds whose runs can be written
KINDS = ("moe_layer", "deepep", "decode_step")


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="run a supernode workload and write it as Chakra "
                              "execution traces (one file per rank)")
    add_inputs(p)
    p.add_argument("--chakra", metavar="DIR", required=True,
                   help="folder for the .et files, <workload>.<rank>.et (made if missing; "
                   "it may hold this workload's earlier export, which is replaced, and no other)")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    from simnode import units
    from simnode.chakra.etfile import ET_VERSION
    from simnode.chakra.export import check_dir, write_dir
    from simnode.errors import ConfigError
    from simnode.workloads.loader import load_inputs
    inputs = load_inputs(args.topology, args.workload, args.sets, overlays=overlays_of(args))
    if inputs.kind_name not in KINDS:
        raise ConfigError(inputs.workload_source, "kind", inputs.kind_name,
                          f"a kind simnode can write as Chakra traces: {', '.join(KINDS)}")
    if not str(args.chakra).strip():
        raise ConfigError("--chakra", "chakra", args.chakra, "a folder path (it is empty)")
    check_dir(args.chakra, inputs.name)
    graphs, time_ns, attrs = _graphs(inputs)
    paths = write_dir(args.chakra, inputs.name, graphs, {
        "writer": "simnode", "schema": f"mlc-chakra et_def {ET_VERSION}", "kind": inputs.kind_name,
        "workload": inputs.workload_path, "time_ns": repr(time_ns), **attrs})
    print(f"wrote {len(paths)} Chakra ET files to {args.chakra} ({inputs.name}.<rank>.et): "
          f"{inputs.kind_name} {units.ns_to_us(time_ns):.3f} us on {len(paths)} ranks")
    return 0


def _graphs(inputs) -> tuple:
    """(graphs, the run's time in ns, metadata attributes) of the run ``inputs`` names."""
    from simnode.chakra.export import ep_graphs, layer_graphs, step_graphs
    if inputs.kind_name == "decode_step":
        from simnode.workloads.kinds.decode_step import simulate as step
        _, out = step(inputs.topology, inputs.params)
        return step_graphs(out.run), out.run.step_ns, {"moe_model": inputs.params["moe_model"]}
    if inputs.kind_name == "deepep":
        from simnode.workloads.kinds.deepep import simulate
        _, plan, runs, _ = simulate(inputs.topology, inputs.params)
        # the slowest rank of each kernel, as the kind's makespan
        time_ns = sum(float(pr.kernel_ns.max()) for pr in runs.values())
        return ep_graphs(plan, runs), time_ns, {"phase": inputs.params["phase"]}
    from simnode.workloads.kinds.moe_layer import simulate
    lr = simulate(inputs.topology, inputs.params)
    return layer_graphs(lr), lr.layer_ns, {"overlap": lr.params.overlap, "comm": lr.params.comm}
