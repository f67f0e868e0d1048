"""Workload kind ``deepep_ll_hccs``: the low-latency (decode) dispatch and combine on
Atlas A3 (910C) dies over HCCS memory semantics (``simnode.ep.lowlatency``; facts v4-decode
3: sgl-kernel-npu's MoeDistributeDispatchV2 / CombineV2).

The AIVs' own stores write into the peers' windows (``transport: memory``); the A3 has no
URMA work requests (topologies/atlas900-a3-superpod.yaml). The remote-access constants are
the A3 path's, declared once for the family (``simnode.ep.fields.AivWindowCosts``) and
calibrated on the normal kernels (topologies/calibrated/a3-aligned-reads.yaml), so the
published low-latency figures are checks (validation/published.yaml, ``a3-ll-*``). Held to
the A3 operator's limits (at most 512 tokens per rank, top-16, 1024 experts, INT8 or BF16
rows). The frame is ``simnode.workloads.lowlatency``'s; workloads/deepep-ll-a3.yaml states
the published case (128 tokens per rank, hidden 7168, top-8 of 256, INT8 dispatch).
"""

from __future__ import annotations

from simnode.ep.lowlatency_limits import A3_OP_LIMITS
from simnode.workloads.lowlatency import ll_kind

KIND = ll_kind("deepep_ll_hccs", "DeepEP-Ascend low-latency dispatch + combine on A3 "
              "(910C) dies over HCCS memory semantics", A3_OP_LIMITS, ("memory",),
              "the A3's kernels write with the AIVs' own stores; it has no URMA work "
              "requests")
