"""Workload kind ``deepep_hccs``: DeepEP-Ascend's normal kernels on Atlas A3 (910C) dies,
over HCCS memory semantics (``simnode.ep.deepep_hccs``; facts 1.6, S12, docs/sources.md X7).

Fields: the EP family's (``simnode.ep.fields``; workloads/deepep-a3-normal.yaml states the
published A3 configuration of S12: 4096 tokens per rank, hidden 7168, top-8 of 256 experts,
INT8 dispatch, BF16 combine) and the kernels' costs (``HccsCosts``); ``num_ranks`` overrides
the topology's ``supernode.num_ranks``. The result reports, per kernel, the benchmark's
bandwidth (received expanded rows x hidden x 2 / call time; X7's test_intranode.py),
averaged over ranks (min and max too), the per-phase times of rank 0, the busiest resource
and the analytical bound of its links.
"""

from __future__ import annotations

from simnode.config.params import params_of
from simnode.ep import fields
from simnode.ep.deepep_hccs import DISPATCH_DTYPES, HccsCosts, HccsSim, build_hccs_plan
from simnode.ep.size import topology_for
from simnode.report.result import fig
from simnode.workloads.registry import WorkloadKind
from simnode.workloads.supernode import ep_result, run_kernels

FIELDS = (*fields.SHAPE, fields.DISPATCH_DTYPE, fields.PHASE, *fields.ROUTING,
          fields.BATCH_WINDOW_NS, *params_of(HccsCosts))


def check(topology, params, source: str = "workload"):
    """The topology at the workload's num_ranks, with the EP family's checks and the dtypes
    the kernels move."""
    topology = topology_for(topology, params, "deepep_hccs", source)
    fields.check_dtype(params, DISPATCH_DTYPES, source, "the A3 (910C) has no FP8: its "
                       "kernels quantize to INT8")
    return topology


def run(topology, params: dict, options=None, name: str = "deepep_hccs"):
    topology = check(topology, params)
    R = topology.supernode.num_ranks
    chip = topology.chip
    plan = build_hccs_plan(fields.routes(params, R), R, params["tokens_per_rank"], params["hidden"],
                           params["top_k"], params["num_experts"],
                           chip.num_ai_cores * chip.aiv_per_core, params["dispatch_dtype"] == "int8")
    costs = fields.costs_from(HccsCosts, params)

    def make(tracer, on_progress):
        return HccsSim(topology, plan, costs, batch_window_ns=params["batch_window_ns"],
                       tracer=tracer, on_progress=on_progress)
    runs, util = run_kernels(make, params["phase"], R, options)
    header = [
        fig("num_ranks", R, "ranks", "EP ranks (dies)"),
        fig("byte_convention", "received expanded rows (own included) x hidden x 2 (BF16) / call "
            "time, as sgl-kernel-npu's test_intranode.py", "", "how the kernels' GBps count bytes"),
        fig("record_bytes", plan.record_bytes, "B", "one dispatch record as one copy moves it")]

    def record(kind, pr):
        return (fig("recv_rows_mean", float(pr.recv_tokens.mean()), "rows", "rows a rank receives, "
                    "its own included"),
                fig("recv_remote_rows_mean", float(pr.recv_remote_tokens.mean()), "rows",
                    "rows a rank receives from other ranks")), (
            fig("access_stall_ns", costs.stall_ns(R - 1, kind == "combine"), "ns",
                "what-if: extra per remote access (peer cache or per-peer cost)"),)
    return ep_result(name, "deepep_hccs", runs, util, header,
                     "received rows x hidden x 2 / call time, mean over ranks (byte_convention)",
                     "GBps without the rank's own rows", record)


KIND = WorkloadKind("deepep_hccs", FIELDS, run, "DeepEP-Ascend normal kernels on A3 "
                             "(910C) dies over HCCS memory semantics", needs_supernode=True,
                             check=check, records=(HccsCosts,))
