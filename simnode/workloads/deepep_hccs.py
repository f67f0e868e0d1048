"""Workload kind ``deepep_hccs``: DeepEP-Ascend's normal kernels on Atlas A3 (910C) dies,
over HCCS memory semantics (``simnode.moe.deepep_hccs``; facts 1.6, S12, docs/sources.md X7).

Fields name the published A3 configuration (S12: 4096 tokens per rank, hidden 7168, top-8
of 256 experts, INT8 dispatch, BF16 combine) and the kernels' costs; ``num_ranks``
overrides the topology's ``supernode.num_ranks``. The result reports, per kernel, the
benchmark's bandwidth (received expanded rows x hidden x 2 / call time; X7's
test_intranode.py), averaged over ranks (min and max too), the per-phase times of rank 0,
the busiest resource and the analytical bound of its links.
"""

from __future__ import annotations

import numpy as np

from simnode.errors import ConfigError
from simnode.moe.deepep_hccs import HccsCosts, HccsSim, build_hccs_plan
from simnode.report.result import KernelRecord, Result, fig
from simnode.workloads.deepep import _check_routing, build_routes
from simnode.workloads.registry import Field, WorkloadKind, register
from simnode.workloads.supernode import (kernel_bottleneck, link_series, link_util, network_figures,
                                        rate_figures, with_num_ranks)

_COSTS = (
    Field("kernel_launch_ns", "number", doc="one kernel launch", min_value=0, origin=""),
    Field("host_ns", "number", doc="host work inside one dispatch call, between its kernels",
          min_value=0, origin=""),
    Field("remote_store_ns", "number", doc="one round of small remote stores (flags, counts)",
          min_value=0, origin=""),
    Field("quant_ops_per_element", "number", doc="vector ops per element to quantize a row to INT8",
          min_value=0, unit="ops/element", origin=""),
    Field("reduce_ops_per_element", "number", doc="vector ops per element and top-k row of "
          "combine's weighted sum", min_value=0, unit="ops/element", origin=""),
    Field("remote_read_ns", "number", doc="a remote MTE2 read's cost beyond the path's round trip "
          "and its bytes", min_value=0, origin=""),
    Field("remote_write_ns", "number", doc="a remote MTE3 write's cost (with its PIPE_ALL wait) "
          "beyond the round trip and its bytes", min_value=0, origin=""),
    Field("remote_read_GBps", "number", 0.0, "what one die serves of other dies' reads of its "
          "memory, all readers together (0 = no limit beyond its links)", min_value=0, unit="GB/s"),
    Field("peer_cache_entries", "int", 0, "what-if: peer contexts at hand", min_value=0,
          unit="entries"),
    Field("read_miss_ns", "number", 0.0, "what-if: extra per remote read whose peer is not cached",
          min_value=0),
    Field("write_miss_ns", "number", 0.0, "what-if: extra per remote write whose peer is not cached",
          min_value=0),
    Field("read_ns_per_peer", "number", 0.0, "what-if: extra per remote read per peer accessed",
          min_value=0, unit="ns/peer"),
    Field("write_ns_per_peer", "number", 0.0, "what-if: extra per remote write per peer accessed",
          min_value=0, unit="ns/peer"),
)

FIELDS = (
    Field("num_ranks", "int", 0, "EP ranks, one per die (0 = the topology's supernode.num_ranks)",
          min_value=0, unit="ranks"),
    Field("tokens_per_rank", "int", 4096, "tokens each rank dispatches", min_value=1, unit="tokens"),
    Field("hidden", "int", 7168, "hidden size", min_value=128, unit="elements"),
    Field("top_k", "int", 8, "experts per token", min_value=1, unit="experts"),
    Field("num_experts", "int", 256, "routed experts", min_value=1, unit="experts"),
    Field("dispatch_dtype", "str", "int8", "dispatch records: INT8 rows with a scale, or BF16 rows",
          ("int8", "bf16")),
    Field("phase", "str", "both", "which kernels to run", ("both", "dispatch", "combine")),
    Field("routing", "str", "uniform", "routing policy", ("uniform", "zipf", "hot", "file")),
    Field("zipf_exponent", "number", 1.0, "zipf routing exponent", min_value=0, unit="1"),
    Field("hot_experts", "int", 4, "hot routing: experts 0..N-1 are hot", min_value=1, unit="experts"),
    Field("hot_share", "number", 0.25, "hot routing: share of all picks to hot experts", min_value=0,
          unit="fraction"),
    Field("routing_file", "str", "", "routing trace (.npy or .npz) when routing = file"),
    Field("seed", "int", 0, "routing seed", min_value=0, unit="1"),
    Field("batch_window_ns", "number", 2000.0, "flow solver batching window (0 = exact)", min_value=0),
) + _COSTS

#: the most tokens one run may route (all ranks)
MAX_TOKENS = 2 ** 24


def _topology_for(topology, params, source: str = "workload"):
    topology = with_num_ranks(topology, params["num_ranks"], "deepep_hccs", source)
    ranks = topology.supernode.num_ranks
    if params["num_experts"] % ranks:
        where = (source, "num_ranks") if params["num_ranks"] else (topology.source, "supernode.num_ranks")
        raise ConfigError(*where, ranks, f"a divisor of num_experts ({params['num_experts']}): "
                          f"experts are placed on ranks in equal contiguous blocks")
    if params["tokens_per_rank"] * ranks > MAX_TOKENS:
        raise ConfigError(source, "tokens_per_rank", params["tokens_per_rank"],
                          f"at most {MAX_TOKENS:,} tokens over all {ranks} ranks")
    _check_routing(params, ranks, source)
    return topology


def run(topology, params: dict, options=None, name: str = "deepep_hccs"):
    topology = _topology_for(topology, params)
    R = topology.supernode.num_ranks
    chip = topology.chip
    plan = build_hccs_plan(build_routes(params, R), R, params["tokens_per_rank"], params["hidden"],
                           params["top_k"], params["num_experts"],
                           chip.num_ai_cores * chip.aiv_per_core, params["dispatch_dtype"] == "int8")
    costs = HccsCosts(**{f.name: params[f.name] for f in _COSTS})
    phases = ("dispatch", "combine") if params["phase"] == "both" else (params["phase"],)
    runs, util = {}, {}
    for kind in phases:
        sim = HccsSim(topology, plan, costs, batch_window_ns=params["batch_window_ns"])
        runs[kind] = sim.run(kind)
        util[kind] = link_util(sim.net)
    return _result(name, topology, plan, runs, util, costs)


def _result(name, topology, plan, runs, util, costs) -> Result:
    R = topology.supernode.num_ranks
    figures = [
        fig("num_ranks", R, "ranks", "EP ranks (dies)"),
        fig("byte_convention", "received expanded rows (own included) x hidden x 2 (BF16) / call "
            "time, as sgl-kernel-npu's test_intranode.py", "", "how the kernels' GBps count bytes"),
        fig("record_bytes", plan.record_bytes, "B", "one dispatch record as one copy moves it")]
    kernels, series = [], []
    hbm_util, bottleneck, worst = 0.0, "", -1.0
    for kind, pr in runs.items():
        k = pr.kernel_ns
        hbm_util = max(hbm_util, pr.resources["hbm"])
        k_util, k_label = kernel_bottleneck(pr)
        if round(k_util, 9) > round(worst, 9):
            worst, bottleneck = k_util, f"{k_label} ({kind})"
        kernels.append(KernelRecord(kind, float(k.mean()), pr.bound_ns, k_label, k_util, (
            *rate_figures(pr, "received rows x hidden x 2 / call time, mean over ranks "
                          "(byte_convention)", "GBps without the rank's own rows"),
            fig("recv_rows_mean", float(pr.recv_tokens.mean()), "rows", "rows a rank receives, its own "
                "included"),
            fig("recv_remote_rows_mean", float(pr.recv_remote_tokens.mean()), "rows",
                "rows a rank receives from other ranks"),
            *network_figures(
                pr, fig("access_stall_ns", costs.stall_ns(R - 1, kind == "combine"), "ns",
                    "what-if: extra per remote access (peer cache or per-peer cost)")))))
        series += link_series(kind, util[kind])
    figures.append(fig("hbm_util_frac", hbm_util, doc="the busiest rank's HBM busy share, either kernel"))
    return Result(name, "deepep_hccs", sum(k.time_ns for k in kernels), bottleneck, tuple(kernels),
                  tuple(figures), tuple(series), roofline_ns=sum(pr.bound_ns for pr in runs.values()))


KIND = register(WorkloadKind("deepep_hccs", FIELDS, run, "DeepEP-Ascend normal kernels on A3 "
                             "(910C) dies over HCCS memory semantics", needs_supernode=True,
                             check=_topology_for))
