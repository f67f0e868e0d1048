"""Tile programs: kernels written the way TileLang's Ascend backend writes them (facts
moe-layer 4), lowered to the instruction records the pipe engine runs (``simnode.instr.isa``).

A program is a Python file with one ``@T.program`` function (``import simnode.tile.lang as
T``); its parameters are the workload's fields. The package is pure (no SimPy):

- ``dtypes``: element types and their widths;
- ``regions``: GM tensors, on-chip buffers and their slices;
- ``builder``: the tracer that runs a program once per block and records tile ops;
- ``loops``: ``T.Kernel``, ``T.Vector``, ``T.Pipelined``, ``T.Persistent``, stages;
- ``ops``: copies (path and pipe from the two scopes), gemm, flags;
- ``vector``: vector ops on UB tiles and their cost at the chip's rates;
- ``sync``: automatic set/wait and cross-core flags from buffer producers and consumers;
- ``verify``: the deadlock and race check of a lowered program (manual flags);
- ``lower``: the ``KernelSchedule`` with its buffer plan;
- ``roofline``: lower bounds and the bottleneck they predict;
- ``program``: loading a program file and its declared parameters;
- ``lang``: the names a program calls (``T.copy``, ``T.gemm``, ...).
"""
