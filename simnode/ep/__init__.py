"""The expert-parallel (EP) kernel family: what every dispatch / combine kernel shares, and
its members, each of which adds only its mechanism.

Layer: above kernels and tile (it may import config, engine, instr, hardware, network,
kernels, tile), below moe (the MoE layer runs its kernels) and the workload kinds.

Shared, one module each:

- ``routing``: which top-k experts each token picks (uniform, zipf, hot, a routing file);
- ``fields``: the family's parameters declared once (EP shape, routing, dtypes, phase,
  solver window; ``EPCosts``, the costs every member has; ``AivWindowCosts``, the remote
  access constants of the path of the members whose AIVs access other dies' windows),
  ``routes(params, R)``;
- ``size``: the topology at the run's EP size (``topology_for``) and the limits every run
  is held to (``MAX_TOKENS``, ``MAX_PAIRS``);
- ``phase``: ``TrafficPlan`` (the traffic matrix and received counts from a plan's
  [src, dst] rows), ``RankTimes``, ``PhaseRun`` (one kernel's result on every rank);
- ``kernel``: ``EPKernel``, the run frame: one process per rank, barriers, the public
  ``kernel_start`` / ``kernel_end`` hooks, local work, the conservation check, the result;
- ``aiv``: ``AivCopies``, for members whose AIVs move the rows themselves (memory
  semantics): per-AIV resources and pools, copy flows, in-order chains of them;
- ``trace``: ``EPTracer``, the Chrome trace of kernel runs.

Members:

- ``deepep`` (+ ``deepep_plan``): DeepEP-Ascend's normal kernels on the 950 supernode,
  message trains of URMA work requests over the Clos (kind ``deepep``; ``moe.layer`` runs
  their parts on a shared ``Fabric``);
- ``deepep_hccs``: the normal kernels on Atlas A3 dies, AIV copies over HCCS (kind
  ``deepep_hccs``);
- ``lowlatency`` (+ ``lowlatency_plan``, ``lowlatency_limits``, ``lowlatency_costs``, ``lowlatency_chains``,
  ``lowlatency_links``, ``lowlatency_send``): the low-latency (decode) kernels, every AIV
  writing quantized rows into the peers' window slots, a status per (source, expert),
  polling, the window copy and combine's weighted sum; on the 950 over UB memory semantics
  (or, a what-if, URMA work requests) and on A3 over HCCS (kinds ``deepep_ll`` and
  ``deepep_ll_hccs``); ``LowLatencySim`` posts on a MoE layer's ``Fabric`` as ``deepep``'s
  kernels do. Its plan's double-buffered window is plan state (``call``, ``next_call()``).

A member is one module that gives:

1. its plan: a frozen dataclass deriving ``phase.TrafficPlan``, built from each rank's
   [tokens, top_k] expert ids (``fields.routes``) by a pure function (no SimPy). It gives
   ``pair`` ([src, dst] rows, the diagonal a rank's own), ``wire_row_bytes(kind)`` and
   ``counted_row_bytes(kind)`` (its benchmark's byte convention), and whatever its
   mechanism needs (per AIV, per expert, per window slot); with ``AivCopies``, ``num_aiv``;
2. its costs: a frozen dataclass deriving ``fields.EPCosts`` whose fields are declared with
   ``param()``, so the kind composes ``params_of(Costs)`` and builds it with
   ``fields.costs_from``;
3. its kernels: a class deriving ``kernel.EPKernel`` (and ``aiv.AivCopies`` if its AIVs
   copy) that gives ``build()`` (``kernel.new_network``, its resources, ``attach``),
   ``prepare(kind)`` (per-kind resources and per-row times), ``dispatch_rank(r, t)`` and
   ``combine_rank(r, t)`` (SimPy generators that start with ``kernel_start`` and end with
   ``kernel_end``, and call ``barrier``, ``arrive``, ``local_work``, ``post``), ``chip_groups()`` (the
   chip resources its result reports), ``entry`` / ``exit`` if its kernels fence, and
   ``DISPATCH_DTYPES`` (the dtypes it moves, checked by ``fields.check_dtype``). Every
   payload byte it puts on the network is added to ``payload_sent``: the frame checks it
   against ``plan.traffic(kind)``.

Its workload kind (simnode/workloads/) is then fields (``fields.SHAPE``, ``fields.ROUTING``,
... and its costs), a size check (``size.topology_for`` + its own), and a run that builds
the plan and calls ``workloads.supernode.run_kernels`` and ``ep_result``.
"""
