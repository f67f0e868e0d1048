"""Workload kind ``moe_layer``: one expert-parallel MoE layer on every rank, on one clock.

Dispatch, the expert GEMMs, SwiGLU, combine and the shared experts of every rank run on one
supernode clock (``simnode.moe.layer``): their messages and kernels share each rank's HBM,
so overlap, contention and stragglers are outcomes. ``overlap`` picks sequential, two
micro-batches or a fused kernel; ``comm_aivs`` how many AIVs communication takes while
compute runs. The EP shape, routing and solver window are the EP family's fields
(``simnode.ep.fields``), the DeepEP costs the 950 member's (``simnode.ep.deepep``).

``comm = low_latency`` runs the decode layer (DeepSeek-V4 on the 950, facts v4-decode 2):
the EP family's low-latency kernels (``simnode.moe.comm``, their costs the member's fields),
W4A8 or W8A8 experts at decode shapes, SwiGLU with ``swiglu_clamp``, and the shared experts
on a stream of their own with ``shared_aic`` AICs and ``shared_aiv`` AIVs (0: none). Its
result adds ``breakdown_us`` (the straggler's dispatch, expert GEMMs, SwiGLU, combine, shared
stream and exposed communication), headline ``layer_us``, ``expert_gemm_us`` and ``comm_us``
(a sweep over tokens per rank shows where the layer turns from latency- to bandwidth-bound),
and the low-latency kernels' step means (``dispatch_steps_us``, ``combine_steps_us``).

Result (``simnode.report.result``): the header carries ``layer_ns`` (the slowest rank's end,
also the makespan), ``compute_ns`` and ``comm_ns`` (the straggler's busy time on its compute
and communication streams), ``exposed_comm_ns`` (time its compute stream sat idle for its
own communication), ``imbalance_wait_ns`` (time its barriers waited for slower ranks),
``overlap_frac``, ``straggler_rank`` and ``straggler_reason``, ``load_imbalance`` (max / mean
routed rows per rank), ``grouped_gemm_tflops``, ``padding_frac``, ``phase_us`` (mean and max
over ranks of every phase) and ``per_rank`` (every rank's split). Kernel records: dispatch
and combine (DeepEP's GB/s convention, mean over ranks and instances: ``dispatch_GBps``),
gemm1, swiglu and gemm2 (the slowest rank's total); series: link and per-rank HBM / URMA
busy fractions over the layer.
"""

from __future__ import annotations

import numpy as np

from simnode import units
from simnode.config.params import params_of
from simnode.ep import fields
from simnode.ep.deepep import MAX_PAIRS, DeepEPCosts
from simnode.ep.size import topology_for
from simnode.errors import ConfigError
from simnode.moe import comm, profiles
from simnode.moe.layer import COMMS, OVERLAPS, LayerParams, MoELayerSim, union_ns
from simnode.report.result import KernelRecord, Result, fig
from simnode.workloads.registry import Field, WorkloadKind
from simnode.workloads.supernode import link_series, link_util

_COSTS = params_of(DeepEPCosts)
FIELDS = (
    *fields.SHAPE, *fields.ROUTING, fields.BATCH_WINDOW_NS, *_COSTS, *comm.ll_fields(_COSTS),
    Field("intermediate", "int", 2048, "expert FFN intermediate size", min_value=128,
          unit="elements"),
    Field("shared_experts", "int", 1, "shared experts (run on every rank's own tokens)",
          min_value=0, unit="experts"),
    Field("shared_intermediate", "int", 2048, "the shared experts' intermediate size",
          min_value=128, unit="elements"),
    Field("weight_dtype", "str", "fp8", "expert weights (fp4: MXFP4, decoded on the AIVs)",
          ("fp8", "fp4")),
    Field("overlap", "str", "sequential", "how communication and compute overlap", OVERLAPS),
    Field("comm_aivs", "int", 64, "AIVs per rank that run DeepEP (compute gets the rest "
          "while communication runs)", min_value=2, unit="AIVs"),
    Field("fused_chunks", "int", 4, "fused: chunks each dispatch train is sent in",
          min_value=1, unit="chunks"),
    Field("comm", "str", "normal", "dispatch and combine: DeepEP's normal kernels, or the "
          "low-latency (decode) ones", COMMS),
    Field("shared_weight_dtype", "str", "", "the shared experts' weights ('' = weight_dtype)",
          ("", "fp8", "fp4")),
    Field("shared_aic", "int", 0, "low_latency: AICs of the shared experts' own stream (0 = no "
          "stream of their own: they follow combine)", min_value=0, unit="AICs"),
    Field("shared_aiv", "int", 0, "low_latency: AIVs of the shared experts' own stream",
          min_value=0, unit="AIVs"),
    Field("swiglu_clamp", "number", 0.0, "low_latency: SwiGLU's clamp limit (0 = none; "
          "DeepSeek-V4: 10)", min_value=0, unit="1"),
)


def check(topology, params: dict, source: str = "workload"):
    """The topology at the layer's EP size; routing and sizes checked before any work."""
    topology = topology_for(topology, params, "moe_layer", source, MAX_PAIRS)
    chip = topology.chip
    aivs = chip.num_ai_cores * chip.aiv_per_core
    if params["comm_aivs"] > aivs or params["comm_aivs"] % chip.aiv_per_core:
        raise ConfigError(source, "comm_aivs", params["comm_aivs"],
                          f"a multiple of {chip.aiv_per_core} up to the chip's {aivs} AIVs "
                          f"(whole AI cores' AIVs go to communication)")
    if params["overlap"] == "two_micro_batch" and params["tokens_per_rank"] < 2:
        raise ConfigError(source, "tokens_per_rank", params["tokens_per_rank"],
                          "at least 2 tokens to split into two micro-batches")
    if params["intermediate"] % 128 or params["shared_intermediate"] % 128:
        raise ConfigError(source, "intermediate", params["intermediate"],
                          "a multiple of 128 (SwiGLU's per-128 FP8 scales)")
    _check_streams(chip, params, source)
    if params["comm"] == "normal":
        _check_widths(chip, params, source)
    if params["comm"] == "low_latency":
        if params["overlap"] != "sequential":
            raise ConfigError(source, "overlap", params["overlap"],
                              "sequential with comm = low_latency (DeepSeek-V4 decodes without "
                              "micro-batches, facts v4-decode 2; the shared experts' stream is "
                              "its overlap)")
        comm.check_limits(topology, params, _main_aivs(chip, params), source)
    return topology


def _check_widths(chip, params: dict, source: str) -> None:
    """The normal layer's grouped GEMMs (gate + up: n = 2 x intermediate, k = hidden; down:
    n = hidden) must be narrow enough to profile (``profiles.width_limit``) on the cores they
    may get: all, or those communication leaves an FP4 kernel (``MoELayerSim._cores``)."""
    free = (chip.num_ai_cores * chip.aiv_per_core - params["comm_aivs"]) // chip.aiv_per_core
    for inter, wdt in ((params["intermediate"], params["weight_dtype"]),
                       (params["shared_intermediate"], params["shared_weight_dtype"] or params["weight_dtype"])):
        cores = {0, free} if wdt == "fp4" and free > 0 else {0}
        for key, n, k in (("intermediate", 2 * inter, params["hidden"]), ("hidden", params["hidden"], inter)):
            for c in sorted(cores):
                expected = profiles.width_limit(chip, n, k, "fp8", wdt, c)
                if expected:
                    raise ConfigError(source, key, params[key], expected)


def _main_aivs(chip, params: dict) -> int:
    aivs = chip.num_ai_cores * chip.aiv_per_core
    return aivs - params["shared_aiv"] if params["shared_aic"] else params["comm_aivs"]


def _check_streams(chip, params: dict, source: str) -> None:
    """The shared experts' stream and its core split (``MoELayerSim.stream_cores``)."""
    aic, aiv, per = params["shared_aic"], params["shared_aiv"], chip.aiv_per_core
    if not aic:
        if aiv:
            raise ConfigError(source, "shared_aiv", aiv, "0 unless shared_aic gives the shared "
                              "experts a stream of their own")
        return
    if params["comm"] != "low_latency":
        raise ConfigError(source, "shared_aic", aic, "0 unless comm = low_latency (the shared "
                          "experts' own stream is the decode layer's)")
    if not params["shared_experts"]:
        raise ConfigError(source, "shared_aic", aic, "0 without shared experts")
    if aic >= chip.num_ai_cores:
        raise ConfigError(source, "shared_aic", aic, f"1..{chip.num_ai_cores - 1} AICs (the "
                          f"main stream keeps at least one of the chip's {chip.num_ai_cores})")
    total = chip.num_ai_cores * per
    if aiv % per or not per <= aiv <= total - per:
        raise ConfigError(source, "shared_aiv", aiv, f"a multiple of {per} in {per}..{total - per} "
                          f"(each stream needs an AI core's AIVs)")


def routes_fn(params: dict, num_ranks: int):
    """``MoELayerSim``'s routes: each rank's expert ids restricted to a slice of its tokens."""
    def routes(sl: slice):
        for topk in fields.routes(params, num_ranks):
            yield topk[sl]
    return routes


def simulate(topology, params: dict):
    """The layer on every rank (``simnode.moe.layer.LayerRun``): the run, before its result."""
    topology = check(topology, params)
    R = topology.supernode.num_ranks
    lp = LayerParams(R, params["tokens_per_rank"], params["hidden"], params["intermediate"],
                     params["num_experts"], params["top_k"], params["shared_experts"],
                     params["shared_intermediate"], params["weight_dtype"], params["overlap"],
                     params["comm_aivs"], params["fused_chunks"], params["batch_window_ns"],
                     comm=params["comm"], shared_weight_dtype=params["shared_weight_dtype"],
                     shared_aic=params["shared_aic"], shared_aiv=params["shared_aiv"],
                     swiglu_clamp=params["swiglu_clamp"])
    costs = fields.costs_from(DeepEPCosts, params)
    ll = comm.ll_costs(params) if lp.comm == "low_latency" else None
    return MoELayerSim(topology, lp, costs, routes_fn(params, R), ll).run()


def run(topology, params: dict, options=None, name: str = "moe_layer"):
    lr = simulate(topology, params)
    if options is not None and getattr(options, "trace_path", None):
        from simnode.moe.layer_trace import write_trace
        write_trace(options, lr)
    return _result(name, lr, params)


def _result(name: str, lr, params: dict) -> Result:
    p = lr.params
    recs = lr.ranks
    R = len(recs)
    layer = lr.layer_ns
    compute = np.array([r.busy_ns("compute") for r in recs])
    comm = np.array([r.busy_ns("comm") for r in recs])
    waits = np.array([r.barrier_wait_ns for r in recs])
    ends = np.array([r.end_ns for r in recs])
    idle = ends - compute
    exposed = np.maximum(idle - waits, 0.0)
    # the straggler: the rank the others wait for (least barrier wait, then most compute)
    order = sorted(range(R), key=lambda r: (round(waits[r], 3), -compute[r], r))
    s = order[0]
    tokens = lr.experts.sum(axis=1)                 # routed (token, expert) rows per rank
    hot = np.argsort(-lr.experts[s], kind="stable")[:3]
    epr = lr.experts.shape[1]
    reason = (f"rank {s}: {int(tokens[s])} routed rows ({tokens[s] / tokens.mean():.2f}x the "
              f"mean); its busiest experts " + ", ".join(
                  f"{s * epr + int(e)} ({int(lr.experts[s, e])})" for e in hot))
    flops = np.array([r.flops for r in recs])
    gemm_ns = np.array([r.gemm_ns for r in recs])
    computed = sum(r.computed_rows for r in recs)
    valid = sum(r.valid_rows for r in recs)
    phases: dict = {}
    for r in recs:
        per: dict = {}
        for sp in r.spans:
            per[sp.name] = per.get(sp.name, 0.0) + (sp.end_ns - sp.start_ns)
        for k, v in per.items():
            phases.setdefault(k, []).append(v)
    phase_us = {k: {"mean": round(units.ns_to_us(float(np.mean(v))), 3),
                    "max": round(units.ns_to_us(float(np.max(v))), 3)} for k, v in phases.items()}
    gbps = {"dispatch": [], "combine": []}
    kernel_ns = {"dispatch": [], "combine": []}
    low_latency = p.comm == "low_latency"
    for kname, (sim, times) in lr.kernels.items():
        kind = "dispatch" if kname.endswith("dispatch") else "combine" if kname.endswith(
            "combine") else None
        if kind is None:
            continue
        # from the kernel's start on every rank: a rank that comes early waits at the entry
        # barrier for the others (the layer's imbalance, not the kernel's: its own figure)
        k_ns = np.array([t.end_ns - t.start_ns for t in times]) - sim.entry_wait_ns
        kernel_ns[kind].append(k_ns)
        if not low_latency:            # the low-latency kernels' bandwidth is their kind's
            plan = sim.plan
            gbps[kind].append(plan.received() * plan.counted_row_bytes(kind) / k_ns)
    header = [
        fig("num_ranks", R, "ranks", "EP ranks"),
        fig("overlap", p.overlap, "", "how communication and compute overlap"),
        fig("comm_aivs", p.comm_aivs, "AIVs", "AIVs per rank DeepEP takes while compute runs"),
        fig("layer_ns", layer, doc="the slowest rank's end"),
        fig("compute_ns", float(compute[s]), doc="the straggler's busy time on its compute stream"),
        fig("comm_ns", float(comm[s]), doc="the straggler's busy time on its communication stream"),
        fig("exposed_comm_ns", float(exposed[s]),
            doc="time the straggler's compute stream sat idle for its own communication"),
        fig("imbalance_wait_ns", float(waits[s]), doc="time the straggler's barriers waited for slower ranks"),
        fig("overlap_frac", float(1.0 - exposed[s] / comm[s]) if comm[s] > 0 else 0.0, "fraction",
            "share of the straggler's communication hidden behind compute", headline=True),
        fig("straggler_rank", int(s), "rank", "the rank the others wait for", digits=0),
        fig("straggler_reason", reason, "", "why that rank straggles"),
        fig("load_imbalance", float(tokens.max() / tokens.mean()) if tokens.mean() > 0 else 1.0, "ratio",
            "max / mean routed (token, expert) rows per rank", headline=True),
        fig("flops", float(flops.sum()), "FLOP", "useful expert FLOPs, all ranks", digits=None),
        fig("tflops", units.tflops(float(flops.sum()), layer), "TFLOPS", "useful FLOPs / layer time, all ranks"),
        fig("grouped_gemm_tflops", float(np.mean([units.tflops(f, t) for f, t in zip(flops, gemm_ns)])),
            "TFLOPS", "useful FLOPs / grouped GEMM time, mean over ranks", headline=True),
        fig("padding_frac", 1.0 - valid / computed if computed else 0.0, "fraction",
            "share of the grouped GEMMs' rows that are block_m padding"),
        fig("phase_us", phase_us, "us", "mean and max over ranks of every phase"),
        # every rank's breakdown (the report's per-rank strip): the straggler among its peers
        fig("per_rank", [{"rank": r, "compute_ns": round(float(compute[r]), 1),
                          "exposed_comm_ns": round(float(exposed[r]), 1),
                          "imbalance_wait_ns": round(float(waits[r]), 1),
                          "end_ns": round(float(ends[r]), 1), "routed_rows": int(tokens[r])}
                         for r in range(R)], "", "every rank's compute, exposed communication and wait"),
    ]
    kernels = []
    for kind in ("dispatch", "combine"):
        if gbps[kind]:
            g, k_ns = np.concatenate(gbps[kind]), np.concatenate(kernel_ns[kind])
            kernels.append(KernelRecord(kind, float(np.mean(k_ns)), 0.0, "", None, (
                fig("GBps", float(np.mean(g)), "GB/s", "received tokens x logical bytes / kernel time, "
                    "mean over ranks and instances (DeepEP's convention)", headline=True),
                fig("GBps_min", float(np.min(g)), "GB/s", "the slowest rank's GBps"),
                fig("max_ns", float(np.max(k_ns)), doc="the slowest rank's kernel time"))))
        elif kernel_ns[kind]:
            k_ns = np.concatenate(kernel_ns[kind])
            kernels.append(KernelRecord(kind, float(np.mean(k_ns)), figures=(
                fig("max_ns", float(np.max(k_ns)), doc="the slowest rank's kernel time"),)))
    if low_latency:
        header += _decode_figures(lr, s)
    # the expert kernels: each rank's instances (micro-batches, fused chunks) summed; the
    # kernel's time is its slowest rank's (the mean over ranks a figure)
    for kname in ("gemm1", "swiglu", "gemm2"):
        per = np.array([sum(sp.end_ns - sp.start_ns for sp in r.spans if sp.stream == "compute"
                            and sp.name.split(".")[-1] == kname and not sp.name.startswith("shared"))
                        for r in recs])
        if per.any():
            kernels.append(KernelRecord(kname, float(per.max()), figures=(
                fig("mean_ns", float(per.mean()), doc="mean over ranks of the rank's total time"),)))
    hbm = lr.fabric.ends.hbm
    share = lr.fabric.net.share
    share.sync()
    hbm_util = float((share.bytes_by_resource[hbm] / (share.capacity[hbm] * layer)).max())
    header.append(fig("hbm_util_frac", hbm_util, "fraction", "the busiest rank's HBM busy share"))
    series = tuple(link_series("layer", link_util(lr.fabric.net)))
    return Result(name, "moe_layer", layer,
                  f"rank {s} ({'compute' if compute[s] >= comm[s] else 'communication'})",
                  tuple(kernels), tuple(header), series, seed=params["seed"])


KIND = WorkloadKind("moe_layer", FIELDS, run,
                             "one MoE layer: dispatch, expert GEMMs, SwiGLU, combine on one clock",
                             needs_supernode=True, check=check)


def _decode_figures(lr, s: int) -> list:
    """The decode layer's breakdown for the straggler ``s`` (module docstring): its main
    stream's kernels in order, its shared stream, and the communication no compute hid."""
    rec = lr.ranks[s]
    spans = rec.spans
    total = lambda name: sum(sp.end_ns - sp.start_ns for sp in spans if sp.name == name)
    comm_iv = [(sp.start_ns, sp.end_ns) for sp in spans if sp.stream == "comm"]
    work_iv = [(sp.start_ns, sp.end_ns) for sp in spans if sp.stream != "comm"]
    hidden = union_ns(comm_iv) + union_ns(work_iv) - union_ns(comm_iv + work_iv)
    exposed = union_ns(comm_iv) - hidden
    shared = (rec.busy_ns("shared") if lr.params.shared_aic else
              sum(total(n) for n in ("shared gemm1", "shared swiglu", "shared gemm2")))
    us = lambda ns: round(units.ns_to_us(ns), 3)
    parts = {"dispatch": total("dispatch"), "gemm1": total("gemm1"), "swiglu": total("swiglu"),
             "gemm2": total("gemm2"), "combine": total("combine"), "shared_stream": shared,
             "exposed_comm": exposed, "layer": lr.layer_ns}
    gemm = parts["gemm1"] + parts["gemm2"]
    times = {kind: t for kind, (_, t) in lr.kernels.items()}
    return [
        fig("comm", lr.params.comm, "", "dispatch and combine kernels"),
        fig("breakdown_us", {k: us(v) for k, v in parts.items()}, "us",
            "the straggler's dispatch, expert GEMMs, SwiGLU and combine on its main stream, its "
            "shared experts' stream (beside them, or after combine without a stream of their "
            "own), the communication no compute hid, and the layer"),
        fig("layer_us", units.ns_to_us(lr.layer_ns), "us", "the layer: its slowest rank's end",
            headline=True),
        fig("expert_gemm_us", units.ns_to_us(gemm), "us", "the straggler's routed grouped GEMMs",
            headline=True),
        fig("comm_us", units.ns_to_us(parts["dispatch"] + parts["combine"]), "us",
            "the straggler's dispatch + combine", headline=True),
        fig("dispatch_steps_us", comm.steps_us(times["dispatch"], "dispatch"), "us",
            "the low-latency dispatch's steps, mean over ranks"),
        fig("combine_steps_us", comm.steps_us(times["combine"], "combine"), "us",
            "the low-latency combine's steps, mean over ranks"),
    ]
