"""Workloads: YAML files naming a kind and its parameters.

``registry`` maps kind names to ``WorkloadKind`` plug-ins (declared fields, a runner, a
size check, a cost estimate); ``loader.load_inputs`` parses a topology and a workload file
with ``--set`` overrides once into a ``RunSpec``. Kinds register themselves on first use
(``kinds.BUILTIN``).
"""
