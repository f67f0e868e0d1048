"""Properties of the topk kind over random shapes (style.md): faster L2 and HBM never slow
it down, fewer rows never take longer, and a second run is identical."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simnode.config.topology import load_topology_raw, topology_from_mapping
from simnode.workloads.kinds.topk import KIND as TOPK


@pytest.fixture(scope="module")
def raw(topology_path):
    return load_topology_raw(topology_path)


def _topology(raw, source, scale=1.0):
    data = copy.deepcopy(raw)
    mem = data["chip"]["memory"]
    mem["l2_bandwidth_GBps"] *= scale
    mem["hbm_bandwidth_GBps"] *= scale
    return topology_from_mapping(data, source)


@st.composite
def shapes(draw):
    n = draw(st.sampled_from([100, 2048, 8192, 40000, 129280]))
    return dict(rows=draw(st.integers(2, 96)), n=n, k=draw(st.integers(1, min(n, 600))),
                algorithm=draw(st.sampled_from(["deepselect", "sort"])),
                stages=draw(st.integers(2, 8)), num_aivs=draw(st.sampled_from([0, 8])))


@settings(max_examples=10, deadline=None)
@given(p=shapes())
def test_topk_properties(raw, topology_path, p):
    topo = _topology(raw, str(topology_path))
    r = TOPK.run(topo, p)
    assert r.makespan_ns > 0 and r.details["rows_per_s"] > 0
    assert TOPK.run(_topology(raw, str(topology_path), 2.0), p).makespan_ns <= r.makespan_ns * (1 + 1e-9)
    assert TOPK.run(topo, {**p, "rows": p["rows"] // 2}).makespan_ns <= r.makespan_ns * (1 + 1e-9)
    assert TOPK.run(topo, p).to_dict() == r.to_dict()
