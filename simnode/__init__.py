"""simnode: a cycle-approximate discrete-event simulator of an Ascend 950-class supernode.

Layers, bottom up (design document; ``tests/test_layers.py`` keeps every import
downward): ``config`` (parameters declared once, the chip's and supernode's schemas),
``engine`` (bandwidth sharing, tracing) and ``instr`` (instruction records, schedules),
``hardware`` (AI-core pipes, L2/HBM) and ``network`` (Clos and mesh, flows), ``kernels``,
``tile`` and ``moe`` (schedule generators, the tile language, routing, dispatch and
combine), ``report`` (the result shape, tables, plots), ``workloads`` (workload kinds, a
run parsed once), ``runs`` (the executor, validation cases, regression baselines),
``calibrate`` (values fitted on measured cases) and ``commands`` with ``cli``.
"""

__version__ = "0.1.0"
