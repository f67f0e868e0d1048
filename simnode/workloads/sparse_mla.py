"""Workload kind ``sparse_mla``: FlashMLA-style sparse attention on one chip (facts 2.2, 3.4).

``mode: prefill`` runs ``n_q`` queries over one KV of ``kv_len`` tokens; ``mode: decode``
runs ``batch x s_q`` queries over a main and an extra cache. Every field can be set
with ``--set``. The result reports tflops with the facts 2.2 FLOP convention, the
bottleneck, the roofline bounds and the L2 hit fraction of the KV gathers.
"""

from __future__ import annotations

from simnode.config.params import params_of
from simnode.kernels.sparse_mla import SparseMlaParams, sparse_mla_roofline, sparse_mla_schedule
from simnode.workloads.chiprun import chip_kind_result
from simnode.workloads.registry import WorkloadKind, register

FIELDS = params_of(SparseMlaParams)


def build(topology, params: dict):
    p = SparseMlaParams(**params)
    return p, sparse_mla_schedule(topology.chip, p)


def run(topology, params: dict, options=None, name: str = "sparse_mla"):
    p, sched = build(topology, params)
    extra = {"peak_tflops": topology.chip.peak_tflops("bf16")}
    return chip_kind_result(name, "sparse_mla", topology, sched, options,
                            sparse_mla_roofline(topology.chip, p), extra)[0]


KIND = register(WorkloadKind("sparse_mla", FIELDS, run,
                             "FlashMLA-style sparse MLA attention (prefill / decode) on one chip",
                             build=build))
