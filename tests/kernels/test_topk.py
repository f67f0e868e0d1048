"""TopK schedules (DeepSelect radix select vs the sort baseline): structure, errors, runs."""

from __future__ import annotations

import pytest

from simnode.config.topology import load_topology_raw, topology_from_mapping
from simnode.errors import ScheduleError
from simnode.kernels.topk import TopkParams, bitonic_ops, candidates, resident, topk_schedule
from simnode.workloads.kinds.topk import KIND as TOPK


@pytest.fixture(scope="module")
def topo(topology_path):
    return topology_from_mapping(load_topology_raw(topology_path), str(topology_path))


def test_bitonic_cost_closed_form():
    ops, ub = bitonic_ops(8)        # 3 * 4 / 2 = 6 stages of 4 compare-exchanges
    assert ops == 4 * 4 * 6 and ub == 2 * 8 * 8 * 6


def test_indexer_rows_stay_resident_sampler_rows_stream():
    assert resident(TopkParams(4096, 8192, 512))
    assert not resident(TopkParams(256, 129280, 64))
    assert candidates(TopkParams(1, 8192, 512)) == 512 + 32


@pytest.mark.parametrize("kw", [dict(rows=128, n=8192, k=512), dict(rows=64, n=129280, k=64)])
@pytest.mark.parametrize("alg", ["deepselect", "sort"])
def test_schedules_fit_the_950dt_buffers(chip, kw, alg):
    topk_schedule(chip, TopkParams(**kw, algorithm=alg)).check(chip)


@pytest.mark.parametrize("kw, msg", [
    (dict(rows=4, n=100, k=200), "0 < k <= n"),
    (dict(rows=4, n=100, k=10, stages=9), "stages = 9: expected 2..8"),
    (dict(rows=4, n=100, k=10, algorithm="heap"), "algorithm 'heap': expected deepselect or sort"),
])
def test_bad_parameters_get_a_clear_message(chip, kw, msg):
    with pytest.raises(ScheduleError, match=msg):
        topk_schedule(chip, TopkParams(**kw))


@pytest.mark.parametrize("shape", [dict(rows=256, n=8192, k=512), dict(rows=64, n=129280, k=64)])
def test_deepselect_beats_the_sort_baseline_and_names_a_bottleneck(topo, shape):
    ds = TOPK.run(topo, {**shape, "algorithm": "deepselect", "stages": 4, "num_aivs": 0})
    srt = TOPK.run(topo, {**shape, "algorithm": "sort", "stages": 4, "num_aivs": 0})
    assert ds.makespan_ns < 0.5 * srt.makespan_ns
    assert ds.bottleneck and srt.bottleneck == "vector (aiv.v)"
