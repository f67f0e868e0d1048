"""The built-in workload kinds: name -> the module that registers it (imported on first
use, so a run imports only what its kind needs)."""

BUILTIN = {
    "gemm": "simnode.workloads.gemm",
    "sparse_mla": "simnode.workloads.sparse_mla",
    "topk": "simnode.workloads.topk",
    "deepep": "simnode.workloads.deepep",
    "deepep_hccs": "simnode.workloads.deepep_hccs",
    "deepep_ll": "simnode.workloads.deepep_ll",
    "deepep_ll_hccs": "simnode.workloads.deepep_ll_hccs",
    "transport": "simnode.workloads.transport",
    "tile": "simnode.workloads.tile",
    "grouped_gemm": "simnode.workloads.grouped_gemm",
    "swiglu": "simnode.workloads.swiglu",
    "moe_layer": "simnode.workloads.moe_layer",
}
