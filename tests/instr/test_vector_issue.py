"""The one VF issue model (config.vector.VectorSpec.cycles) on instruction mixes with
closed-form prices: per family its EXUs and interval, the issue stage, the ports."""

from __future__ import annotations

import dataclasses

import pytest

from simnode.config.vector import VF_FAMILIES
from simnode.instr import isa


def _mix(**n) -> tuple:
    return tuple(n.get(f, 0) for f in VF_FAMILIES)


def _cyc(v, **kw) -> float:
    mix = _mix(**{f: kw.pop(f) for f in VF_FAMILIES if f in kw})
    return v.cycles(isa.VecOp(sum(mix) * 64, "vf_alu", mix=mix, **kw))


@pytest.fixture
def dual(chip):
    """The 950DT's sourced rates with both issue ports (no calibrated issue rate)."""
    return dataclasses.replace(chip.vector, vf_issue_per_cycle=0)


def test_each_family_issues_at_its_measured_rate(dual):
    """register-simd.md (CANN 9.1 simulator): float ALU two per cycle, other converts a pair
    every 2 cycles, (de)interleaves one every 2 on EXU0, reductions one per cycle on EXU0,
    f32 exp a pair every 4 cycles: 64 instructions of each alone."""
    assert [_cyc(dual, **{f: 64}) for f in VF_FAMILIES] == [32, 64, 128, 64, 128]


def test_other_instructions_fill_a_slow_familys_gaps(dual):
    """Exps pair every 4 cycles; 64 adds beside 64 exps fit in their gaps (issue: 128 / 2 =
    64 < 128); EXU0 hosts interleaves and reductions together."""
    assert _cyc(dual, sfu=64, alu=64) == 128
    assert _cyc(dual, sfu=64, alu=256) == 160                  # issue bound: 320 / 2
    assert _cyc(dual, intlv=10, reduce=10) == 30               # EXU0: 10 x 2 + 10


def test_the_calibrated_issue_rate_caps_the_issue_stage_only(chip):
    """vf_issue_per_cycle = 1 (calibrated): 100 adds take 100 cycles; 64 exps still pair
    every 4 cycles (128), so 64 exps and 64 adds issue in 128."""
    v = chip.vector
    assert v.issue_rate() == 1
    assert _cyc(v, alu=100) == 100
    assert _cyc(v, sfu=64) == 128 and _cyc(v, sfu=64, alu=64) == 128
    assert _cyc(v, sfu=64, alu=100) == 164


def test_held_issue_and_shared_slots_are_what_ifs(dual):
    """vf_interval_blocks_issue: a slow family's interval holds the issue stage; with
    vf_ldst_issue_slots loads and stores take issue slots too. FlashMLA's FP8 dequant per
    token (12 fast, 8 half-rate converts, 2 interleaves; 6 loads, 4 stores): 11 cycles with
    gaps filled, 18 with held issue, 23 with loads and stores in the slots."""
    held = dataclasses.replace(dual, vf_interval_blocks_issue=True)
    shared = dataclasses.replace(held, vf_ldst_issue_slots=True)
    token = dict(alu=12, cvt=8, intlv=2, loads=6, stores=4)
    assert [_cyc(v, **token) for v in (dual, held, shared)] == [11, 18, 23]


def test_ports_chain_and_call_cost(dual):
    """Loads on 2 ports, stores on 1, 2 UB slots; a chain of dependent instructions by its
    latencies; 23 + 12 cycles per call."""
    assert _cyc(dual, loads=40) == 20 and _cyc(dual, stores=40) == 40
    assert _cyc(dual, loads=40, stores=20) == 30
    assert _cyc(dual, alu=2, chain=(1, 1, 1, 0, 0, 1, 1)) == 9 + 9 + 7 + 18 + 8
    assert _cyc(dual, alu=100, vf_calls=1) == 50 + 35


def test_a_record_without_a_mix_reads_its_element_ops(dual):
    """A VF given as element-ops (ops, of them exu0_ops EXU0-only, sfu_ops beside) is read
    as full-rate ALU, reduction and special-function instructions of 64 lanes."""
    ins = isa.VecOp(100 * 64, "vf_alu", exu0_ops=80 * 64, sfu_ops=10 * 64)
    assert dual.cycles(ins) == _cyc(dual, alu=20, reduce=80, sfu=10) == 80


def test_cli_rejects_a_family_on_three_exus_naming_the_key(cli, topology_path, repo_root,
                                                           user_error):
    res = cli("run", topology_path, repo_root / "workloads" / "tile-mha-fwd.yaml",
              "--set", "topology.chip.vector.vf_sfu_exus=3")
    user_error(res, "ascend950dt.yaml (with --set overrides)", "chip.vector.vf_sfu_exus = 3",
               "expected", nothing_ran=True)
