"""Properties of the sparse MLA kind over random small shapes (style.md): the FLOPs follow
the facts 2.2 convention, the roofline bound holds, faster L2 and HBM never slow it down,
and a second run is identical."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simnode.config.topology import load_topology_raw, topology_from_mapping
from simnode.workloads.kinds.sparse_mla import FIELDS, KIND as SPARSE_MLA

DTYPES = st.sampled_from(["bf16", "fp8", "fp4"])


@pytest.fixture(scope="module")
def raw(topology_path):
    return load_topology_raw(topology_path)


def _topology(raw, source, **memory):
    data = copy.deepcopy(raw)
    data["chip"]["memory"].update(memory)
    return topology_from_mapping(data, source)


@st.composite
def shapes(draw):
    p = {f.name: f.default for f in FIELDS}
    p.update(mode=draw(st.sampled_from(["prefill", "decode"])),
             b_topk=draw(st.sampled_from([32, 48, 64])),
             vector_cores_per_cube=draw(st.sampled_from([1, 2])),
             gather2=draw(st.booleans()), sinks=draw(st.booleans()),
             skip_scale_threshold=draw(st.sampled_from([0.0, 6.0])),
             seed=draw(st.integers(0, 100)), num_cores=draw(st.sampled_from([0, 4])),
             heads=draw(st.sampled_from([64, 128])), heads_per_core=draw(st.sampled_from([32, 64])))
    if p["mode"] == "prefill":
        kv_len = draw(st.sampled_from([128, 1000, 4096]))
        p.update(n_q=draw(st.integers(1, 40)), kv_len=kv_len,
                 topk=draw(st.integers(1, min(kv_len, 700))), kv_dtype=draw(DTYPES))
    else:
        main_len, extra_len = draw(st.sampled_from([64, 256])), draw(st.sampled_from([200, 2048]))
        p.update(batch=draw(st.integers(1, 6)), s_q=draw(st.integers(1, 4)), main_len=main_len,
                 extra_len=extra_len, topk_main=draw(st.integers(1, main_len)),
                 topk_extra=draw(st.integers(1, min(extra_len, 600))),
                 main_dtype=draw(DTYPES), extra_dtype=draw(DTYPES))
    return p


@settings(max_examples=12, deadline=None)
@given(p=shapes())
def test_sparse_mla_properties(raw, topology_path, p):
    topo = _topology(raw, str(topology_path))
    r = SPARSE_MLA.run(topo, p)
    # FLOPs as facts 2.2 counts them: 2 x queries x H x topk x (d_qk + d_v)
    if p["mode"] == "prefill":
        queries, topk = p["n_q"], p["topk"]
    else:
        queries, topk = p["batch"] * p["s_q"], p["topk_main"] + p["topk_extra"]
    assert r.flops == 2 * queries * p["heads"] * topk * (p["d_qk"] + p["d_v"])
    # the roofline is a lower bound, and the achieved rate stays under the peak
    assert r.roofline_ns <= r.makespan_ns * (1 + 1e-9)
    assert r.tflops <= r.details["peak_tflops"] * (1 + 1e-9)
    # more memory bandwidth never makes it slower
    fast = _topology(raw, str(topology_path),
                     l2_bandwidth_GBps=2 * topo.chip.memory.l2_bandwidth_GBps,
                     hbm_bandwidth_GBps=2 * topo.chip.memory.hbm_bandwidth_GBps)
    assert SPARSE_MLA.run(fast, p).makespan_ns <= r.makespan_ns * (1 + 1e-9)
    # deterministic
    assert SPARSE_MLA.run(topo, p).to_dict() == r.to_dict()
