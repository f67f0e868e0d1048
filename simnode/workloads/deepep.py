"""Workload kind ``deepep``: DeepEP-Ascend dispatch and combine across a supernode (facts 4).

Fields name the published configuration (facts 2.4) and the DeepEP software costs
(facts 1.2, S6); ``num_ranks`` overrides the topology's ``supernode.num_ranks`` so
one topology file serves every EP size. The result reports, per kernel, DeepEP's
bandwidth convention -- tokens received x logical bytes per token / kernel time,
averaged over ranks (min and max too); like DeepEP's ``num_recv_tokens`` this counts
the rank's own tokens, which never cross the network (``{kernel}_network_GBps`` leaves
them out). Facts 5.6 leaves open whether the Ascend benchmark counts them; upstream
DeepEP V2's ``tests/ep/test_ep.py`` (deepseek-ai/DeepEP, whose API DeepEP-Ascend
keeps) does unless ``--ignore-local-traffic`` is given, and its default is off -- with
the wire bytes, the analytical
bound, the simulated/bound ratio, the per-phase times and the hottest links: a kernel
record each (``simnode.report.result``), and as series every network link's busy
fraction over time and each rank's HBM and URMA ceiling (``link_series``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from simnode.config.params import params_of
from simnode.errors import ConfigError
from simnode.moe.deepep import COMPILED_FROM_RANKS, SEND_ORDERS, DeepEPCosts, DeepEPSim
from simnode.moe.deepep_plan import DeepEPParams, build_plan
from simnode.moe.routing import iter_route_supernode, load_routing_file
from simnode.forked import can_fork, in_child
from simnode.progress import Progress
from simnode.report.result import KernelRecord, Result, fig
from simnode.workloads.registry import ALWAYS, Field, Reference, WorkloadKind, register
from simnode.workloads.supernode import (MAX_BATCH_WINDOW_NS, check_pairs, kernel_bottleneck, link_series,
                                        link_util, network_figures, rate_figures, with_num_ranks)

#: from this size on, ``simnode run`` simulates combine in a forked process beside dispatch
#: (RunOptions.jobs >= 2). Below it the fork, the child's own load of numba's code and the
#: result's pickling cost what they save (measured, whole process, 2 cores: EP32 1.32-1.37 s
#: with against 1.17-1.34 s without; EP64 even; EP128 2.50 s against 2.9 s)
PARALLEL_FROM_RANKS = 64
#: ... and up to this size: each process holds a network of its own (EP1024: 882 MiB peak for
#: dispatch's, 1131 for combine's, measured), and at EP2048 one alone peaks at 3.66 GiB (3749
#: MiB, benchmarks/README.md end of round 5), so two would pass the 4 GiB one run may use
PARALLEL_UP_TO_RANKS = 1024


def two_processes(ranks: int, phase: str) -> bool:
    """Whether a run of this size and phase may simulate combine beside dispatch."""
    return phase == "both" and PARALLEL_FROM_RANKS <= ranks <= PARALLEL_UP_TO_RANKS


def warm_compiled() -> None:
    """Import numba and make the engine's compiled dispatchers in this process (~0.2 s at
    EP128), so that a forked child inherits them; each process still loads the cached machine
    code of the signatures it calls at its first call."""
    import simpy
    from simnode.engine.share import Share
    Share(simpy.Environment()).compile_now()


FIELDS = (
    Field("num_ranks", "int", 0, "EP ranks (0 = the topology's supernode.num_ranks)", min_value=0,
          unit="ranks"),
    *params_of(DeepEPParams),         # tokens_per_rank, hidden, top_k, num_experts, dtypes
    Field("phase", "str", "both", "which kernels to run", ("both", "dispatch", "combine")),
    Field("routing", "str", "uniform", "routing policy", ("uniform", "zipf", "hot", "file")),
    Field("zipf_exponent", "number", 1.0, "zipf routing exponent", min_value=0, unit="1"),
    Field("hot_experts", "int", 4, "hot routing: experts 0..N-1 are hot", min_value=1, unit="experts"),
    Field("hot_share", "number", 0.25, "hot routing: share of all picks to hot experts", min_value=0,
          max_value=1, unit="fraction"),
    Field("routing_file", "str", "", "routing trace (.npy or .npz) when routing = file"),
    Field("seed", "int", 0, "routing seed (and jetty_fifo's jitter)", min_value=0, unit="1"),
    Field("batch_window_ns", "number", 2000.0, "flow solver batching window: completions this close "
          "are solved together (0 = exact)", min_value=0, max_value=MAX_BATCH_WINDOW_NS),
    Field("send_order", "str", "rank_peer", "sends as one train per (rank, peer), or as each "
          "Jetty's messages in order", SEND_ORDERS),
    Field("jetty_jitter_ns", "number", 0.0, "jetty_fifo: each Jetty starts after a seeded random "
          "delay below this", min_value=0),
    Field("kernel_launch_ns", "number", doc="kernel launch + InitSocState", min_value=0, origin=""),
    Field("vf_launch_ns", "number", doc="one SIMT VF launch", min_value=0, origin=""),
    Field("histogram_ns_per_token", "number", doc="routing VF per token of an AIV's range", min_value=0,
          origin=""),
    Field("slot_assign_ns_per_token", "number", doc="slot assignment per token of an AIV's range",
          min_value=0, origin=""),
    Field("remote_store_ns", "number", doc="one round of SIMT remote stores or atomics", min_value=0,
          origin=""),
    Field("barrier_ns", "number", doc="a cross-rank barrier's own work, before waiting for peers",
          min_value=0, origin=""),
    Field("reduce_ops_per_element", "number", doc="vector ops per reduced BF16 element", min_value=0,
          unit="ops/element", origin=""),
)

_COST_FIELDS = [f.name for f in dataclasses.fields(DeepEPCosts)]


#: the most (sender, receiver) pairs one DeepEP run may simulate: EP2048's (2048 x 2047), whose
#: dispatch + combine (8192 tokens per rank) peaked at 3.55 GiB measured (3.85 GiB before this
#: round's memory changes), under the 4 GiB a run may use (benchmarks/README.md, "Network runs,
#: this round"): ~0.9 KiB per pair at the peak.
#: For one train per (rank, peer); in-order Jetties keep the supernode kinds' default
MAX_PAIRS = 2048 * 2047

#: the most tokens one DeepEP run may route (all ranks): 8x the published EP128 case
#: (16384 x 128), ~1.3 GB of routing and plan arrays
MAX_TOKENS = 2 ** 24


def _topology_for(topology, params, source: str = "workload"):
    """The topology at the workload's num_ranks; ``source`` names the workload in errors."""
    n = params["num_ranks"]
    topology = with_num_ranks(topology, n, "deepep", source)
    ranks = topology.supernode.num_ranks
    if params["num_experts"] % ranks:
        # num_ranks = 0 in the workload leaves the count to the topology file
        where = (source, "num_ranks") if n else (topology.source, "supernode.num_ranks")
        raise ConfigError(*where, ranks,
                          f"a divisor of num_experts ({params['num_experts']}): experts are "
                          f"placed on ranks in equal contiguous blocks")
    if params["tokens_per_rank"] * ranks > MAX_TOKENS:
        raise ConfigError(source, "tokens_per_rank", params["tokens_per_rank"],
                          f"at most {MAX_TOKENS:,} tokens over all {ranks} ranks (tokens_per_rank x "
                          f"num_ranks): the routing and plan arrays of one run live in memory")
    check_pairs(ranks * (ranks - 1), ranks, source if n else topology.source,
                "num_ranks" if n else "supernode.num_ranks",
                # in-order Jetties: ~100x the flows, the supernode default (not measured at EP2048)
                MAX_PAIRS if params["send_order"] == "rank_peer" else None)
    _check_routing(params, ranks, source)
    if params["jetty_jitter_ns"] > 0 and params["send_order"] != "jetty_fifo":
        raise ConfigError(source, "jetty_jitter_ns", params["jetty_jitter_ns"],
                          "0 unless send_order is jetty_fifo: only in-order Jetties have start "
                          "times of their own")
    return topology


def cost(topology, params: dict) -> float:
    """Seconds of one core, whole process: ~0.8 s (imports, numba's cache), plus the routed
    tokens, plus the flows, one per (rank, peer), whose solves cost more than in proportion
    (~flows^1.4; 10x as many for in-order Jetties). Fitted to this round's measured runs
    (benchmarks/README.md, "Network runs, this round": EP8 1.1 s, EP128 5.5 s, EP1024 94 s,
    EP2048 389 s), within 13% of each from EP8 to EP2048: an estimate for the long-run
    note, not a model value."""
    ranks = params["num_ranks"] or topology.supernode.num_ranks
    flows = ranks * (ranks - 1) * (10 if params["send_order"] == "jetty_fifo" else 1)
    return (0.8 + 2.0e-6 * params["tokens_per_rank"] * ranks
            + PHASE_SHARE[params["phase"]] * 2.3e-7 * flows ** 1.4)


#: each kernel's share of the flows' cost in ``cost`` (routing and the plan are paid whatever
#: the phase): EP2048 combine alone took 231 s of user time against 317 s for both
#: (benchmarks/README.md, end of round 4), and at EP1024 the two-process wall time, which is
#: combine's, is ~0.7 of the one-process run's; an estimate for the note
PHASE_SHARE = {"both": 1.0, "dispatch": 0.3, "combine": 0.7}


REFERENCE = Reference("DeepEP at EP8 (16384 tokens per rank)", 1.1)


def wall_share(topology, params: dict) -> float:
    """The share of ``cost`` left on the wall clock when combine runs beside dispatch (EP64 to
    EP1024, ``simnode run --jobs``): measured 61.9 s of 88.5 at EP1024 and 2.20 of 2.9 s at
    EP128 (benchmarks/README.md, end of round 3), so 0.7; an estimate for the note."""
    ranks = params["num_ranks"] or topology.supernode.num_ranks
    return 0.7 if two_processes(ranks, params["phase"]) else 1.0


def _check_routing(params, num_ranks: int, source: str) -> None:
    """The routing arguments, checked before any work with the workload named in errors:
    the routing functions name no file, so their errors are re-raised under ``source``."""
    policy, k, e = params["routing"], params["top_k"], params["num_experts"]
    if params["routing_file"] and policy != "file":
        raise ConfigError(source, "routing_file", params["routing_file"],
                          f"'' unless routing = file (routing is '{policy}', so the file would "
                          f"be ignored): add --set routing=file")
    if policy == "file":
        if not params["routing_file"]:
            raise ConfigError(source, "routing_file", "", "a .npy/.npz path when routing = file")
        return
    if policy == "hot" and params["hot_experts"] > e - k:
        raise ConfigError(source, "hot_experts", params["hot_experts"],
                          f"at most num_experts - top_k = {e - k} hot experts, so that a token can "
                          f"pick {k} experts that are not hot")
    try:                                        # a few tokens run every argument check
        list(build_routes({**params, "tokens_per_rank": min(4, params["tokens_per_rank"])}, num_ranks))
    except ConfigError as exc:
        if exc.source != "routing":
            raise
        raise ConfigError(source, exc.key_path, exc.value, exc.expected, exc.hint) from None


def build_routes(params, num_ranks: int):
    """Each rank's [tokens, top_k] expert ids, in rank order: the routing file's arrays, or
    generated one rank at a time (an iterator, consumed once by ``build_plan``)."""
    args = (params["tokens_per_rank"], params["num_experts"], params["top_k"], num_ranks)
    policy = params["routing"]
    if policy == "file":
        if not params["routing_file"]:
            raise ConfigError("workload", "routing_file", "", "a .npy/.npz path when routing = file")
        return iter(load_routing_file(params["routing_file"], *args))
    extra = {}
    if policy == "zipf":
        extra = {"zipf_exponent": params["zipf_exponent"]}
    elif policy == "hot":
        extra = {"hot_experts": list(range(params["hot_experts"])), "hot_share": params["hot_share"]}
    return iter_route_supernode(*args, policy=policy, seed=params["seed"], **extra)


def run(topology, params: dict, options=None, name: str = "deepep"):
    topology = _topology_for(topology, params)
    R = topology.supernode.num_ranks
    chip = topology.chip
    dp = DeepEPParams(R, params["tokens_per_rank"], params["hidden"], params["top_k"],
                      params["num_experts"], params["dispatch_dtype"], params["combine_dtype"],
                      num_aiv=chip.num_ai_cores * chip.aiv_per_core,
                      wqebb_bytes=topology.supernode.wqebb_bytes)
    # per-AIV counts only for in-order Jetties (256 MB at EP1024)
    plan = build_plan(build_routes(params, R), dp, keep_aiv=params["send_order"] == "jetty_fifo")
    costs = DeepEPCosts(**{k: params[k] for k in _COST_FIELDS})
    phases = ("dispatch", "combine") if params["phase"] == "both" else (params["phase"],)
    from simnode.moe.deepep_trace import DeepEPTracer
    tracer = DeepEPTracer.open(options)
    show = options is not None and getattr(options, "progress", False)
    jobs = getattr(options, "jobs", 1) if options is not None else 1

    def phase(kind: str, progress: bool = True):
        clock = _SimClock(f"EP{R} {kind}", show == ALWAYS) if show and progress else None
        sim = DeepEPSim(topology, plan, costs, batch_window_ns=params["batch_window_ns"],
                        tracer=tracer, send_order=params["send_order"],
                        jetty_jitter_ns=params["jetty_jitter_ns"], seed=params["seed"],
                        on_progress=clock)
        try:
            out = sim.run(kind)
        finally:
            if clock is not None:
                clock.close()
        return out, link_util(sim.net)

    results = {}
    try:
        if jobs >= 2 and tracer is None and two_processes(R, params["phase"]) and can_fork():
            # dispatch and combine are two separate simulations of the same plan (each its own
            # clock and network): combine runs in a forked process beside dispatch, and the
            # result is the one the sequential loop gives (test_deepep_parallel). numba is
            # imported once, before the fork; only combine draws a progress line.
            if R >= COMPILED_FROM_RANKS:
                warm_compiled()
            combine = in_child(lambda: phase("combine"))
            try:
                results["dispatch"] = phase("dispatch", progress=False)
            except BaseException:
                combine.kill()
                raise
            results["combine"] = combine.wait()
        else:
            for kind in phases:
                results[kind] = phase(kind)
    finally:
        if tracer is not None:
            tracer.close()
    runs = {k: results[k][0] for k in phases}
    util = {k: results[k][1] for k in phases}
    return _result(name, topology, plan, runs, util)


class _SimClock:
    """A kernel's progress line (on a terminal, or always with --progress): simulated us
    against the analytical bound, which the kernel cannot beat and typically passes by 5-25%."""

    def __init__(self, label: str, always: bool = False):
        self.label = label
        self.always = always
        self.bar = None

    def __call__(self, now_ns: float, bound_ns: float) -> None:
        if self.bar is None:
            self.bar = Progress(max(1, round(bound_ns / 1000)), f"{self.label}, simulated/bound us",
                                enabled=True if self.always else None)
        self.bar.update(int(now_ns / 1000))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _result(name, topology, plan, runs, util) -> Result:
    figures = [
        fig("num_ranks", topology.supernode.num_ranks, "ranks", "EP ranks"),
        fig("routing_dest_ranks_per_token", float(plan.pair_tokens.sum() / plan.pair_tokens.shape[0]
                                                   / plan.params.tokens_per_rank), "ranks/token",
            "distinct destination ranks of a token (its top-k experts' ranks)"),
        fig("byte_convention", "received tokens (self-rank included, as DeepEP's num_recv_tokens) "
                               "x logical bytes / kernel time", "", "how the kernels' GBps count bytes")]
    kernels, series = [], []
    hbm_util = 0.0
    bottleneck = ""
    worst = -1.0
    for kind, pr in runs.items():
        k = pr.kernel_ns
        miss, stall = _what_if_stalls(topology.supernode, plan, kind)
        k_util, k_label = kernel_bottleneck(pr)
        if round(k_util, 9) > round(worst, 9):
            worst, bottleneck = k_util, f"{k_label} ({kind})"
        hbm_util = max(hbm_util, pr.resources["hbm"])
        kernels.append(KernelRecord(kind, float(k.mean()), pr.bound_ns, k_label, k_util, (
            *rate_figures(pr, "received tokens x logical bytes / kernel time, mean over ranks "
                          "(byte_convention)",
                          "GBps without the rank's own tokens (they never cross the network)"),
            fig("logical_bytes_per_token", pr.logical_bytes_per_token, "B/token", "logical bytes of one record"),
            fig("recv_tokens_mean", float(pr.recv_tokens.mean()), "tokens", "records a rank receives, "
                "its own included"),
            fig("recv_remote_tokens_mean", float(pr.recv_remote_tokens.mean()), "tokens",
                "records a rank receives from other ranks"),
            *network_figures(
                pr, fig("urma_context_miss_frac", miss, doc="what-if: WQE share missing the peer-context cache"),
                fig("urma_wqe_stall_ns", stall, doc="what-if: engine stall per WQE")))))
        series += link_series(kind, util[kind])
    figures.append(fig("hbm_util_frac", hbm_util, doc="the busiest rank's HBM busy share, either kernel"))
    return Result(name, "deepep", sum(k.time_ns for k in kernels), bottleneck, tuple(kernels),
                  tuple(figures), tuple(series), roofline_ns=sum(pr.bound_ns for pr in runs.values()))


def _what_if_stalls(spec, plan, kind: str) -> tuple[float, float]:
    """Means over sending ranks of the WQE share that misses the what-if peer-context cache
    and of the what-if engine stall per WQE in ns (both 0 unless supernode.
    urma_context_miss_ns or urma_wqe_ns_per_peer is set): dispatch posts along
    pair_tokens, combine back along its transpose."""
    pairs = plan.pair_tokens if kind == "dispatch" else plan.pair_tokens.T
    remote = (pairs > 0) & ~np.eye(len(pairs), dtype=bool)
    peers = [int(n) for n in remote.sum(axis=1) if n]
    if not peers:
        return 0.0, 0.0
    return (float(np.mean([spec.context_miss_fraction(n) for n in peers])),
            float(np.mean([spec.wqe_stall_ns(n) for n in peers])))


KIND = register(WorkloadKind("deepep", FIELDS, run, "DeepEP dispatch + combine on a supernode",
                             needs_supernode=True, check=_topology_for, records=(DeepEPCosts,),
                             cost=cost, reference=REFERENCE,
                             wall_share=wall_share))
