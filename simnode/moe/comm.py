"""The EP family's low-latency member as the MoE layer drives it, named in one place.

With ``comm = low_latency`` the layer's dispatch and combine are DeepEP-Ascend's decode
kernels (facts v4-decode 3): the EP family's low-latency member, whose plan
(``simnode.ep.lowlatency_plan``) and costs (``simnode.ep.lowlatency_costs``) this module
builds and whose kernels (``simnode.ep.lowlatency.LowLatencySim``, the same public surface
as ``simnode.ep.deepep.DeepEPSim`` on a shared ``Fabric``: ``prepare(kind)``,
``dispatch_rank(r, t)``, ``combine_rank(r, t)``, ``barrier_wait_ns``) it makes, one instance
per kind. Its dispatch quantizes each row to MXFP8 in UB (the 950 generation's format, facts
v4-decode 2: "Dispatch sends MXFP8 rows"), copies the received rows into the packed 2-D
output with per-expert counts (what ``layer_kernels``' packed grouped GEMM reads) and its
combine sums each token's rows at the source: the layer has no epilogues to add.

Main names: ``ll_plan``, ``ll_kernel``, ``ll_costs``, ``ll_fields``, ``check_limits``,
``local_counts``, ``steps_us``.
"""

from __future__ import annotations

import dataclasses

from simnode import units
from simnode.config.params import params_of
from simnode.ep import fields
from simnode.ep.lowlatency_costs import LowLatencyCosts
from simnode.ep.lowlatency_limits import API_LIMITS, check_limits as _limits
from simnode.ep.lowlatency_plan import LLShape, build_plan
from simnode.errors import ConfigError

#: the 950 generation's low-latency dispatch rows (facts v4-decode 2 and 3: MXFP8, "A5 only")
LL_DISPATCH_DTYPE = "mxfp8"
#: values of the member's costs a MoE layer file may leave out (a normal layer's has none of
#: them); a low-latency layer's preset states each
LL_UNSET = 0.0


def ll_fields(declared: tuple) -> tuple:
    """The member's cost fields a kind adds beside ``declared`` (those of the same name are
    one field: the family declares them once), each given a default if it has none."""
    names = {d.name for d in declared}
    out = []
    for prm in params_of(LowLatencyCosts):
        if prm.name in names:
            continue
        out.append(dataclasses.replace(prm, default=LL_UNSET) if prm.required else prm)
    return tuple(out)


def ll_costs(params: dict) -> LowLatencyCosts:
    """The member's costs from a kind's values."""
    return fields.costs_from(LowLatencyCosts, params)


def check_limits(topology, params: dict, num_aiv: int, source: str) -> None:
    """What the published low-latency API refuses (tokens per rank, top-k, experts, hidden,
    the window in the rank's HBM) is an error naming ``source`` and the field; so is a tree
    without the member."""
    try:
        from simnode.ep.lowlatency import LowLatencySim  # noqa: F401
    except ImportError:
        raise ConfigError(source, "comm", "low_latency", "normal: this tree has no low-latency "
                          "member (simnode.ep.lowlatency)") from None
    T = params["tokens_per_rank"]
    shape = LLShape(topology.supernode.num_ranks, T, T, params["hidden"], params["top_k"],
                    params["num_experts"], num_aiv, LL_DISPATCH_DTYPE)
    _limits(shape, API_LIMITS, units.GB_to_bytes(topology.chip.memory.hbm_capacity_GB), source)


def ll_plan(routes_by_rank, p, num_aiv: int):
    """One low-latency call's plan (every rank's [tokens, top_k] expert ids in rank order):
    a window of ``tokens_per_rank`` per source, ``num_aiv`` AIVs per rank."""
    shape = LLShape(p.num_ranks, p.tokens_per_rank, p.tokens_per_rank, p.hidden, p.top_k,
                    p.num_experts, num_aiv, LL_DISPATCH_DTYPE)
    return build_plan(routes_by_rank, shape)


def ll_kernel(topology, plan, costs, fabric, kind: str):
    """The member's ``kind`` kernel on every rank, posting on ``fabric``, prepared."""
    from simnode.ep.lowlatency import LowLatencySim
    sim = LowLatencySim(topology, plan, costs, fabric=fabric, name=kind)
    sim.prepare(kind)
    return sim


def local_counts(plan, r: int) -> list:
    """Rows rank ``r``'s local experts received (the packed output's per-expert counts)."""
    return [int(x) for x in plan.expert_token_nums()[r]]


def steps_us(times: list, kind: str) -> dict:
    """The member's breakdown of its ``kind`` kernel's time into its steps (launch, quantize,
    write, status, wait, copy, reduce: ``steps_of`` each rank's phases), mean over ranks, us."""
    from simnode.ep.lowlatency import STEPS, steps_of
    per = [steps_of(t.phases, kind) for t in times]
    return {name: round(units.ns_to_us(sum(d[name] for d in per) / len(per)), 3) for name in STEPS}
