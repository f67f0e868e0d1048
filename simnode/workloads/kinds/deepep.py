"""Workload kind ``deepep``: DeepEP-Ascend dispatch and combine across a supernode (facts 4).

Fields: the EP family's (``simnode.ep.fields``: the published configuration of facts 2.4 by
default), the send order, and the DeepEP software costs (``simnode.ep.deepep.DeepEPCosts``,
facts 1.2, S6); ``num_ranks`` overrides the topology's ``supernode.num_ranks`` so one
topology file serves every EP size. The result reports, per kernel, DeepEP's bandwidth
convention -- tokens received x logical bytes per token / kernel time, averaged over ranks
(min and max too); like DeepEP's ``num_recv_tokens`` this counts the rank's own tokens,
which never cross the network (``{kernel}_network_GBps`` leaves them out). Facts 5.6 leaves
open whether the Ascend benchmark counts them; upstream DeepEP V2's ``tests/ep/test_ep.py``
(deepseek-ai/DeepEP, whose API DeepEP-Ascend keeps) does unless ``--ignore-local-traffic``
is given, and its default is off -- with the wire bytes, the analytical bound, the
simulated/bound ratio, the per-phase times and the hottest links: a kernel record each
(``simnode.report.result``), and as series every network link's busy fraction over time and
each rank's HBM and URMA ceiling (``link_series``).
"""

from __future__ import annotations

import numpy as np

from simnode.config.params import params_of
from simnode.ep import fields
from simnode.ep.deepep import (DISPATCH_DTYPES, MAX_PAIRS, SEND_ORDERS, DeepEPCosts, DeepEPSim)
from simnode.ep.deepep_plan import DeepEPParams, build_plan
from simnode.ep.size import topology_for
from simnode.errors import ConfigError
from simnode.report.result import fig
from simnode.workloads.registry import Field, Reference, WorkloadKind
from simnode.workloads.supernode import ep_result, run_kernels, two_processes

FIELDS = (
    *fields.SHAPE, fields.DISPATCH_DTYPE, fields.COMBINE_DTYPE, fields.PHASE, *fields.ROUTING,
    fields.BATCH_WINDOW_NS,
    Field("send_order", "str", "rank_peer", "sends as one train per (rank, peer), or as each "
          "Jetty's messages in order", SEND_ORDERS),
    Field("jetty_jitter_ns", "number", 0.0, "jetty_fifo: each Jetty starts after a seeded random "
          "delay below this", min_value=0),
    *params_of(DeepEPCosts),
)


def check(topology, params, source: str = "workload"):
    """The topology at the workload's num_ranks, with the EP family's checks and the
    kernels' own: their dtypes, and jitter only for in-order Jetties."""
    topology = topology_for(topology, params, "deepep", source,
                            # in-order Jetties: ~100x the flows, the family's default limit
                            MAX_PAIRS if params["send_order"] == "rank_peer" else None)
    fields.check_dtype(params, DISPATCH_DTYPES, source, "the 950's kernels move FP8 or BF16 "
                       "rows; INT8 is the A3's, kind deepep_hccs")
    if params["jetty_jitter_ns"] > 0 and params["send_order"] != "jetty_fifo":
        raise ConfigError(source, "jetty_jitter_ns", params["jetty_jitter_ns"],
                          "0 unless send_order is jetty_fifo: only in-order Jetties have start "
                          "times of their own")
    return topology


def cost(topology, params: dict) -> float:
    """Seconds of one core, whole process: ~0.8 s (imports, numba's cache), plus the routed
    tokens, plus the flows, one per (rank, peer), whose solves cost more than in proportion
    (~flows^1.4; 10x as many for in-order Jetties). Fitted to measured runs (benchmarks/:
    EP8 1.1 s, EP128 5.5 s, EP1024 94 s, EP2048 389 s), within 13% of each from EP8 to
    EP2048: an estimate for the long-run note, not a model value."""
    ranks = params["num_ranks"] or topology.supernode.num_ranks
    flows = ranks * (ranks - 1) * (10 if params["send_order"] == "jetty_fifo" else 1)
    return (0.8 + 2.0e-6 * params["tokens_per_rank"] * ranks
            + PHASE_SHARE[params["phase"]] * 2.3e-7 * flows ** 1.4)


#: each kernel's share of the flows' cost in ``cost`` (routing and the plan are paid whatever
#: the phase): EP2048 combine alone took 231 s of user time against 317 s for both, and at
#: EP1024 the two-process wall time, which is combine's, is ~0.7 of the one-process run's;
#: an estimate for the note
PHASE_SHARE = {"both": 1.0, "dispatch": 0.3, "combine": 0.7}


REFERENCE = Reference("DeepEP at EP8 (16384 tokens per rank)", 1.1)


def wall_share(topology, params: dict) -> float:
    """The share of ``cost`` left on the wall clock when combine runs beside dispatch (EP64 to
    EP1024, ``simnode run --jobs``): measured 61.9 s of 88.5 at EP1024 and 2.20 of 2.9 s at
    EP128, so 0.7; an estimate for the note."""
    ranks = params["num_ranks"] or topology.supernode.num_ranks
    return 0.7 if two_processes(ranks, params["phase"]) else 1.0


def simulate(topology, params: dict, options=None):
    """(topology at the run's size, the traffic plan, {kind: PhaseRun}, {kind: link_util}):
    the kernels' runs, before their result."""
    topology = check(topology, params)
    R = topology.supernode.num_ranks
    chip = topology.chip
    dp = DeepEPParams(R, params["tokens_per_rank"], params["hidden"], params["top_k"],
                      params["num_experts"], params["dispatch_dtype"], params["combine_dtype"],
                      num_aiv=chip.num_ai_cores * chip.aiv_per_core,
                      wqebb_bytes=topology.supernode.wqebb_bytes)
    # per-AIV counts only for in-order Jetties (256 MB at EP1024)
    plan = build_plan(fields.routes(params, R), dp, keep_aiv=params["send_order"] == "jetty_fifo")
    costs = fields.costs_from(DeepEPCosts, params)

    def make(tracer, on_progress):
        return DeepEPSim(topology, plan, costs, batch_window_ns=params["batch_window_ns"],
                         tracer=tracer, send_order=params["send_order"],
                         jetty_jitter_ns=params["jetty_jitter_ns"], seed=params["seed"],
                         on_progress=on_progress)
    runs, util = run_kernels(make, params["phase"], R, options)
    return topology, plan, runs, util


def run(topology, params: dict, options=None, name: str = "deepep"):
    topology, plan, runs, util = simulate(topology, params, options)
    R = topology.supernode.num_ranks
    spec = topology.supernode
    header = [
        fig("num_ranks", R, "ranks", "EP ranks"),
        fig("routing_dest_ranks_per_token", float(plan.pair_tokens.sum() / plan.pair_tokens.shape[0]
                                                   / plan.params.tokens_per_rank), "ranks/token",
            "distinct destination ranks of a token (its top-k experts' ranks)"),
        fig("byte_convention", "received tokens (self-rank included, as DeepEP's num_recv_tokens) "
                               "x logical bytes / kernel time", "", "how the kernels' GBps count bytes")]

    def record(kind, pr):
        miss, stall = _what_if_stalls(spec, plan, kind)
        return (fig("logical_bytes_per_token", pr.logical_bytes_per_token, "B/token",
                    "logical bytes of one record"),
                fig("recv_tokens_mean", float(pr.recv_tokens.mean()), "tokens", "records a rank "
                    "receives, its own included"),
                fig("recv_remote_tokens_mean", float(pr.recv_remote_tokens.mean()), "tokens",
                    "records a rank receives from other ranks")), (
            fig("urma_context_miss_frac", miss, doc="what-if: WQE share missing the peer-context cache"),
            fig("urma_wqe_stall_ns", stall, doc="what-if: engine stall per WQE"))
    return ep_result(name, "deepep", runs, util, header,
                     "received tokens x logical bytes / kernel time, mean over ranks "
                     "(byte_convention)",
                     "GBps without the rank's own tokens (they never cross the network)", record)


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


KIND = WorkloadKind("deepep", FIELDS, run, "DeepEP dispatch + combine on a supernode",
                             needs_supernode=True, check=check, records=(DeepEPCosts,),
                             cost=cost, reference=REFERENCE, wall_share=wall_share)
