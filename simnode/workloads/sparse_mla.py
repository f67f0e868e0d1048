"""Workload kind ``sparse_mla``: FlashMLA-style sparse attention on one chip (facts 2.2, 3.4).

``mode: prefill`` runs ``n_q`` queries over one KV of ``kv_len`` tokens; ``mode: decode``
runs ``batch x s_q`` queries over a main and an extra cache. Every field can be set
with ``--set``. The result reports tflops with the facts 2.2 FLOP convention, the
bottleneck, the roofline bounds and the L2 hit fraction of the KV gathers.
"""

from __future__ import annotations

from simnode.kernels.sparse_mla import (COLD_START_NS, DEFAULT_RESCALE_SHARE,
                                        KERNEL_LAUNCH_NS, SparseMlaParams, sparse_mla_roofline,
                                        sparse_mla_schedule)
from simnode.workloads.chiprun import chip_kind_result
from simnode.workloads.registry import Field, WorkloadKind, register

KV_DTYPES = ("bf16", "fp8", "fp4")

FIELDS = (
    Field("mode", "str", "prefill", "prefill or decode", ("prefill", "decode")),
    Field("n_q", "int", 4096, "prefill queries", min_value=1),
    Field("kv_len", "int", 8192, "prefill KV length, tokens", min_value=1),
    Field("topk", "int", 640, "prefill selected tokens per query", min_value=1),
    Field("kv_dtype", "str", "bf16", "prefill KV cache dtype", KV_DTYPES),
    Field("batch", "int", 64, "decode sequences", min_value=1),
    Field("s_q", "int", 4, "decode queries per sequence", min_value=1),
    Field("topk_main", "int", 128, "decode main-cache top-k", min_value=1),
    Field("topk_extra", "int", 512, "decode extra-cache top-k", min_value=1),
    Field("main_len", "int", 256, "decode main-cache length, tokens", min_value=1),
    Field("extra_len", "int", 2048, "decode extra-cache length, tokens", min_value=1),
    Field("main_dtype", "str", "fp8", "decode main-cache dtype", KV_DTYPES),
    Field("extra_dtype", "str", "fp8", "decode extra-cache dtype", KV_DTYPES),
    Field("heads", "int", 64, "query heads H", min_value=1),
    Field("d_qk", "int", 512, "QK head dim (MLA latent)", min_value=1),
    Field("d_v", "int", 512, "V head dim (same latent)", min_value=1),
    Field("heads_per_core", "int", 64, "query heads per AI core per item", min_value=1),
    Field("b_topk", "int", 64, "selected tokens per pipeline step", min_value=1),
    Field("vector_cores_per_cube", "int", 2, "AIVs per cube: 2 = 1C2V, 1 = 1C1V", min_value=1),
    Field("gather2", "bool", True, "one MTE2 descriptor fetches two tokens"),
    Field("skip_scale_threshold", "number", 6.0, "skip-scale threshold, nats (0 = off)",
          min_value=0),
    Field("rescale_share", "number", DEFAULT_RESCALE_SHARE,
          "share of non-first blocks needing an O rescale with skip-scale on", min_value=0),
    Field("sinks", "bool", True, "attention sinks"),
    Field("seed", "int", 0, "seed of the uniform top-k token selection", min_value=0),
    Field("num_cores", "int", 0, "AI cores used (0 = all)", min_value=0),
    Field("kernel_launch_ns", "number", KERNEL_LAUNCH_NS, "kernel launch + InitSocState, ns",
          min_value=0),
    Field("cold_start_ns", "number", COLD_START_NS,
          "per-launch cold-start cost beyond the launch, ns (calibrated; 0 = warm caches)",
          min_value=0),
)


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
