"""The EP family's fields are declared once (simnode.ep.fields) and every kind that runs EP
kernels composes the same declarations, so the same bad value is refused the same way by
each; a member refuses the family's dtypes its kernels do not move."""

from __future__ import annotations

import pytest

from simnode.config.params import params_of
from simnode.ep import fields
from simnode.ep.deepep import DeepEPCosts
from simnode.ep.deepep_hccs import HccsCosts
from simnode.ep.lowlatency_costs import LowLatencyCosts
from simnode.workloads.registry import get_kind

#: (kind, topology, workload) of every kind that runs the family's kernels
EP_KINDS = [("deepep", "atlas950-supernode.yaml", "deepep-normal.yaml"),
            ("deepep_hccs", "atlas900-a3-superpod.yaml", "deepep-a3-normal.yaml"),
            ("moe_layer", "atlas950-supernode.yaml", "moe-layer.yaml"),
            ("deepep_ll", "atlas950-supernode.yaml", "deepep-ll.yaml"),
            ("deepep_ll_hccs", "atlas900-a3-superpod.yaml", "deepep-ll-a3.yaml")]
SHARED = (*fields.SHAPE, *fields.ROUTING, fields.BATCH_WINDOW_NS)


@pytest.mark.parametrize("kind", [k for k, _, _ in EP_KINDS] + ["transport"])
def test_every_ep_kind_composes_the_family_declarations(kind):
    declared = {f.name: f for f in get_kind(kind).fields}
    for p in SHARED if kind != "transport" else (fields.NUM_RANKS, fields.BATCH_WINDOW_NS):
        assert declared[p.name] is p, f"{kind} declares {p.name} itself"


def test_the_members_costs_share_the_family_costs():
    shared = {p.name for p in params_of(fields.EPCosts)}
    assert shared == {"kernel_launch_ns", "remote_store_ns", "reduce_ops_per_element"}
    for cls in (DeepEPCosts, HccsCosts, LowLatencyCosts):
        mine = {p.name: p for p in params_of(cls)}
        for p in params_of(fields.EPCosts):
            assert mine[p.name] == p
    # the A3 path's constants: one declaration for the normal and the low-latency kernels
    for cls in (HccsCosts, LowLatencyCosts):
        mine = {p.name: p for p in params_of(cls)}
        for p in params_of(fields.AivWindowCosts):
            assert mine[p.name] == p


@pytest.mark.parametrize("kind, topology, workload", EP_KINDS)
@pytest.mark.parametrize("setting, expected", [
    ("batch_window_ns=1e12", "batch_window_ns = 1000000000000.0: expected a number <= 100000.0"),
    ("hot_share=1.5", "hot_share = 1.5: expected a number <= 1"),
])
def test_a_bad_value_is_refused_the_same_way_by_every_kind(cli, user_error, repo_root, kind,
                                                           topology, workload, setting, expected):
    res = cli("run", repo_root / "topologies" / topology, repo_root / "workloads" / workload,
              "--set", setting, "--json")
    user_error(res, workload, expected, nothing_ran=True)


@pytest.mark.parametrize("topology, workload, dtype, expected", [
    ("atlas950-supernode.yaml", "deepep-normal.yaml", "int8", "expected one of fp8, bf16"),
    ("atlas900-a3-superpod.yaml", "deepep-a3-normal.yaml", "fp8", "expected one of int8, bf16"),
])
def test_a_member_refuses_a_dtype_its_kernels_do_not_move(cli, user_error, repo_root, topology,
                                                          workload, dtype, expected):
    res = cli("run", repo_root / "topologies" / topology, repo_root / "workloads" / workload,
              "--set", f"dispatch_dtype={dtype}", "--json")
    user_error(res, workload, f"dispatch_dtype = '{dtype}'", expected, nothing_ran=True)
