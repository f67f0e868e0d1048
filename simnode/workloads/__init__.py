"""Workloads: YAML files naming a kind and its parameters.

``registry`` maps kind names to ``WorkloadKind`` plug-ins (fields with defaults, a
runner); ``loader.load_workload`` reads a file, applies ``--set`` overrides and
validates it. Kinds register themselves on import of ``simnode.workloads.kinds``.
"""
