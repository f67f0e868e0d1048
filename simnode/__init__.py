"""simnode: a cycle-approximate discrete-event simulator of an Ascend 950-class supernode.

Layers (see the design document): ``config`` (YAML -> frozen specs), ``engine``
(SimPy environment helpers, bandwidth sharing, tracing), ``hardware`` (AI-core pipes,
L2/HBM), ``network`` (Clos topology, flow model), ``kernels`` (schedule generators),
``moe`` (routing, dispatch, combine), ``workloads`` (workload kinds), ``report``
(result records and printing) and ``cli``.
"""

__version__ = "0.1.0"
