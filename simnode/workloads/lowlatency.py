"""What the low-latency kinds share: their fields, size check, run and result.

The EP family's low-latency member (``simnode.ep.lowlatency``) runs on the 950 supernode
(kind ``deepep_ll``) and on Atlas A3 dies over HCCS (kind ``deepep_ll_hccs``); the kinds
differ only in the published limits they are held to and the transports and dtypes their
kernels have. ``ll_kind(name, doc, limits, transports, dtypes_why)`` builds one
``WorkloadKind`` from this frame:

- fields: the family's (``simnode.ep.fields``: shape, dispatch and combine dtype, phase,
  routing, solver window), the member's (``simnode.ep.lowlatency.FIELDS``: the window's
  tokens per source, the output layout, the transport, the form) and the kernels' costs
  (``LowLatencyCosts``: the family's, with the A3 path's constants, then their own);
- check: the family's (``simnode.ep.size.topology_for``), then the API's limits
  (``simnode.ep.lowlatency_plan.check_limits``: tokens per rank, top-k, experts, hidden, EP
  size, dtypes, and the window against the rank's HBM) and the kind's transports;
- run: dispatch and combine as the EP family runs them (``run_kernels``: combine forked
  beside dispatch from EP64 on, the compiled link loop loaded first);
- result: per kernel its time (``us``, the figure published for these kernels: mean over
  ranks; ``us_max``: the slowest rank's), its steps (``steps_us``: launch, quantize, write,
  status, wait, copy, reduce, mean over ranks; they add up to ``us``), the benchmark's
  bandwidth (``GBps``: received rows x the test's bytes per selection / time), received
  rows, and the family's network figures; the header says the output layout and what the
  grouped GEMM downstream gets, the window, and which half this call uses.
"""

from __future__ import annotations

import gc

import numpy as np

from simnode import units
from simnode.config.params import params_of
from simnode.ep import fields
from simnode.ep.lowlatency import FIELDS as LL_FIELDS
from simnode.ep.lowlatency import STEPS, LowLatencySim, steps_of
from simnode.ep.lowlatency_costs import LowLatencyCosts
from simnode.ep.lowlatency_limits import check_limits
from simnode.ep.lowlatency_links import warm
from simnode.ep.lowlatency_plan import LLShape, build_plan
from simnode.ep.size import topology_for
from simnode.errors import ConfigError
from simnode.report.result import fig
from simnode.workloads.registry import WorkloadKind
from simnode.workloads.supernode import ep_result, run_kernels, warm_compiled

FIELDS = (*fields.SHAPE, fields.DISPATCH_DTYPE, fields.COMBINE_DTYPE, fields.PHASE,
          *fields.ROUTING, fields.BATCH_WINDOW_NS, *LL_FIELDS, *params_of(LowLatencyCosts))


def shape_of(topology, params: dict) -> LLShape:
    """The call's shape on ``topology`` (already at the workload's EP size)."""
    chip = topology.chip
    T = params["tokens_per_rank"]
    return LLShape(topology.supernode.num_ranks, T, params["max_tokens_per_rank"] or T,
                   params["hidden"], params["top_k"], params["num_experts"],
                   chip.num_ai_cores * chip.aiv_per_core, params["dispatch_dtype"])


def check_for(name: str, limits, transports: tuple, why: str):
    """The size check of a low-latency kind held to ``limits`` whose kernels have
    ``transports`` (``why``: the reason the others are refused)."""
    def check(topology, params, source: str = "workload"):
        topology = topology_for(topology, params, name, source)
        check_limits(shape_of(topology, params), limits,
                     units.GB_to_bytes(topology.chip.memory.hbm_capacity_GB), source)
        if params["transport"] not in transports:
            raise ConfigError(source, "transport", params["transport"],
                              f"one of {', '.join(transports)} ({why})")
        return topology
    return check


def run_for(kind_name: str, check):
    def run(topology, params: dict, options=None, name: str = kind_name):
        topology = check(topology, params)
        R = topology.supernode.num_ranks
        shape = shape_of(topology, params)
        plan = build_plan(fields.routes(params, R), shape)
        costs = fields.costs_from(LowLatencyCosts, params)

        def make(tracer, on_progress):
            return LowLatencySim(topology, plan, costs, transport=params["transport"],
                                 form=params["form"], batch_window_ns=params["batch_window_ns"],
                                 tracer=tracer, on_progress=on_progress)

        def warm_before_fork():
            """What combine, forked beside dispatch (``run_kernels``), inherits rather than
            loads again: the compiled link loop of the chains form over memory, the
            engine's compiled loops otherwise."""
            if params["transport"] == "memory" and params["form"] == "chains":
                warm()
            else:
                warm_compiled()

        # the run's arrays and SimPy events hold no cycles worth a collection: the cyclic
        # collector, left on, walks them again and again as they pile up (~5% of EP256)
        enabled = gc.isenabled()
        gc.disable()
        try:
            runs, util = run_kernels(make, params["phase"], R, options, warm_before_fork)
        finally:
            if enabled:
                gc.enable()
        out = plan.output(params["output_layout"])
        win = shape.window()
        header = [
            fig("num_ranks", R, "ranks", "EP ranks"),
            fig("byte_convention", "received rows (own included) x the published test's bytes per "
                "selection (hidden + hidden/128 x 4 + 16 for 8-bit rows, 2 x hidden for BF16) / "
                "kernel time", "", "how the kernels' GBps count bytes"),
            fig("record_bytes", shape.record_bytes, "B", "one dispatch write: row, scales, triple"),
            fig("window_bytes", win.total, "B", "each rank's window: two halves and the state"),
            fig("window_half", plan.half, "", "the window half this call uses (calls alternate)"),
            fig("output_layout", out.layout, "", "dispatch's output layout"),
            fig("output_shape", list(out.shape), "", "dispatch's output tensor per rank"),
            fig("output_rows_allocated", out.allocated_rows, "rows", "rows the output holds per rank"),
            fig("expert_rows_max", out.max_rows_per_expert, "rows",
                "the most rows one local expert received"),
            fig("gemm_input", out.gemm_input, "", "what the grouped GEMM downstream gets")]

        def record(kind, pr):
            steps = [steps_of(t.phases, kind) for t in pr.ranks]
            mean = {s: round(units.ns_to_us(float(np.mean([x[s] for x in steps]))), 3)
                    for s in STEPS}
            return (fig("us", units.ns_to_us(float(pr.kernel_ns.mean())), "us",
                        "kernel time, mean over ranks (the published figure)", headline=True),
                    fig("us_max", units.ns_to_us(float(pr.kernel_ns.max())), "us",
                        "the slowest rank's kernel time"),
                    fig("steps_us", mean, "us", "where the time goes, mean over ranks: launch, "
                        "quantize, write, status, wait, copy, reduce (they add up to us)"),
                    fig("recv_rows_mean", float(pr.recv_tokens.mean()), "rows",
                        "rows a rank receives, its own included"),
                    fig("recv_remote_rows_mean", float(pr.recv_remote_tokens.mean()), "rows",
                        "rows a rank receives from other ranks")), (
                fig("write_stall_ns", costs.stall_ns(R - 1, True), "ns",
                    "what-if: extra per remote write (peer cache or per-peer cost)"),)
        return ep_result(name, kind_name, runs, util, header,
                         "received rows x the test's bytes per selection / kernel time, mean over "
                         "ranks (byte_convention)", "GBps without the rank's own rows", record)
    return run


def ll_kind(name: str, doc: str, limits, transports: tuple, why: str) -> WorkloadKind:
    """A low-latency kind (see the module docstring)."""
    check = check_for(name, limits, transports, why)
    return WorkloadKind(name, FIELDS, run_for(name, check), doc, needs_supernode=True,
                        check=check, records=(LowLatencyCosts,))
