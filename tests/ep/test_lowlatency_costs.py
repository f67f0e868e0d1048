"""Low-latency step costs: each constant declared with its origin, and the closed forms of
each step on the A3 die (topologies/ascend910c.yaml) and the 950DT."""

import dataclasses
from pathlib import Path

import pytest

from simnode.config.chip import load_chip
from simnode.config.params import ORIGINS, declared
from simnode.ep.fields import AivWindowCosts
from simnode.ep.lowlatency_costs import AivRates, LowLatencyCosts, StepTimes
from simnode.ep.lowlatency_plan import LLShape

ROOT = Path(__file__).resolve().parents[2]
A3 = LLShape(8, 128, 128, 7168, 8, 256, 48, "int8")
#: the family's costs as workloads/deepep-ll-a3.yaml states them, remote_write_ns the A3 overlay's
COSTS = LowLatencyCosts(kernel_launch_ns=1900, remote_store_ns=110, reduce_ops_per_element=3,
                        quant_ops_per_element=7, remote_read_ns=0, remote_write_ns=3275.1)


@pytest.fixture(scope="module")
def a3():
    return StepTimes(COSTS, AivRates.from_chip(load_chip(ROOT / "topologies/ascend910c.yaml")), A3)


def test_every_constant_is_declared_with_its_origin_and_source():
    family = {p.name for p in declared(AivWindowCosts)}
    for p in declared(LowLatencyCosts):
        assert p.doc and p.unit, p.name
        if p.name in family:        # the family's: their origin is the workload file's comment
            continue
        assert p.origin in ORIGINS and p.origin != "setting", p.name
        assert p.cite, p.name


def test_rates_come_from_the_chip(a3):
    r = a3.rates
    assert r.mte2_GBps == pytest.approx(55 * 1.85) and r.mte2_base_ns == pytest.approx(90 / 1.85)
    assert r.mte3_GBps == pytest.approx(32 * 1.85) and r.mte3_base_ns == pytest.approx(180 / 1.85)
    assert r.vector_ops_per_ns == pytest.approx(51 * 1.85)


def test_copy_and_vector_closed_forms(a3):
    assert a3.mte2_ns(14336) == pytest.approx(90 / 1.85 + 14336 / (55 * 1.85))
    assert a3.mte3_ns(7212) == pytest.approx(180 / 1.85 + 7212 / (32 * 1.85))
    c = a3.costs
    assert a3.quant_ns() == pytest.approx(c.int8_quant_calls * 35 / 1.85 + 7 * 7168 / (51 * 1.85))
    assert a3.slot_count_ns(0) == 0.0                  # the first token's pairs skip the count
    assert a3.slot_count_ns(100) == pytest.approx(5 * 35 / 1.85 + 500 / (51 * 1.85))
    assert a3.stage_ns(0) == pytest.approx(a3.mte2_ns(14336) + a3.quant_ns())


def test_a_remote_write_waits_for_its_round_trip_and_the_remote_cost(a3):
    stream, wait = a3.write_ns(7212, 350.0, remote=True)
    assert stream == pytest.approx(a3.mte3_ns(7212))
    assert wait == pytest.approx(3275.1 + 700.0)
    # a status block is a small remote store (the normal kernels' flags)
    assert a3.status_land_ns(350.0, True) == pytest.approx(110 + 350.0)
    assert a3.status_wait_ns(350.0, True) == pytest.approx(110 + 700.0)
    assert a3.write_ns(7212, 0.0, remote=False) == (pytest.approx(a3.mte3_ns(7212)), 0.0)


def test_bf16_records_skip_quantization_and_mx_is_cheaper_than_int8():
    chip = load_chip(ROOT / "topologies/ascend950dt.yaml")
    rates, costs = AivRates.from_chip(chip), COSTS
    t = {dt: StepTimes(costs, rates, dataclasses.replace(A3, dispatch_dtype=dt)).quant_ns()
         for dt in ("bf16", "mxfp8", "int8")}
    assert t["bf16"] == 0.0 and 0 < t["mxfp8"] < t["int8"]


def test_reduce_and_copy_steps(a3):
    assert a3.reduce_token_ns(8) > a3.reduce_token_ns(4) > 0
    assert a3.copy_row_ns() == pytest.approx(max(a3.mte2_ns(7212),
                                                 a3.mte3_ns(7168) + a3.mte3_ns(12) + a3.mte3_ns(4)))
    assert a3.update_counts_ns() == pytest.approx(3 * 32 * a3.costs.scalar_gm_ns)
    assert a3.poll_ns(6) > a3.poll_ns(1)
