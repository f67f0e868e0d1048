"""Workload kind ``deepep_ll``: the low-latency (decode) dispatch and combine on the 950
supernode (``simnode.ep.lowlatency``; facts v4-decode 3: sgl-kernel-npu's *_a5.h kernels).

The published A5 kernels write with the AIVs' own stores into the peers' windows over UB
memory semantics (``transport: memory``, the default); ``transport: urma`` is a what-if in
which every (token, expert) write is one URMA work request with the URMA engine's costs of
the topology (its calibrated overlays give the band). No 950 latency is published for
these kernels: every figure of this kind is a prediction (docs/low-latency.md). Held to
the DeepEP-Ascend low-latency API's limits (at most 512 tokens per rank, top-16, 512
experts). The frame is ``simnode.workloads.lowlatency``'s; workloads/deepep-ll.yaml states
the published shape (128 tokens per rank, hidden 7168, top-8 of 256, MXFP8 rows).
"""

from __future__ import annotations

from simnode.ep.lowlatency import TRANSPORTS
from simnode.ep.lowlatency_limits import API_LIMITS
from simnode.workloads.lowlatency import ll_kind

KIND = ll_kind("deepep_ll", "DeepEP-Ascend low-latency dispatch + combine on the 950 "
              "supernode (UB memory semantics; URMA what-if)", API_LIMITS, TRANSPORTS,
              "the 950's kernels store over UB memory semantics or, as a what-if, post "
              "URMA work requests")
