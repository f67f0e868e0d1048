"""Workloads: YAML files naming a kind and its parameters.

A kind is a plug-in module (``kinds/<name>.py``, or out of tree through ``SIMNODE_KINDS``)
whose ``KIND`` declares its fields, its size check, its run and its cost estimate;
``registry`` finds kinds by name and lists them, ``chiprun`` is what the chip kinds share,
and ``loader.load_inputs`` parses a topology and a workload file with ``--set`` overrides
once into a ``RunSpec``.
"""
