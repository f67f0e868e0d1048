"""The workload kinds that ship with simnode, one module each.

A module here is a kind: its name is the kind's name (``kind: gemm`` in a workload file is
``gemm.py``) and it defines a module-level ``KIND = WorkloadKind(...)``: the kind's fields,
its size check, its run and its cost estimate. ``simnode.workloads.registry`` finds a kind
by its name here and imports that module alone, so a run imports only its own kind; adding
a kind is adding a module (one whose name starts with ``_`` is not a kind). The chip kinds
build their ``WorkloadKind`` with ``simnode.workloads.chiprun.chip_kind``.
"""
