"""Schedules are data: generators are pure, records round-trip (in memory and through
JSON) to a schedule that simulates identically, and a core's program prints."""

from __future__ import annotations

import json

import pytest

from simnode.errors import ScheduleError
from simnode.hardware.chip import ChipSim
from simnode.instr import isa
from simnode.kernels.gemm import GemmParams, gemm_schedule
from simnode.instr.schedule import (BufferUse, CoreProgram, KernelSchedule, format_core,
                                      from_records, to_records)

SMALL = GemmParams(256, 512, 1024, "fp8")       # scales too: every GEMM record kind appears


def _makespan(chip, sched):
    return ChipSim(chip).run(sched).makespan_ns


def test_gemm_schedule_is_pure(chip):
    a = gemm_schedule(chip, SMALL)
    b = gemm_schedule(chip, SMALL)
    assert to_records(a) == to_records(b)
    assert a.meta == b.meta and a.flops == b.flops == 2.0 * 256 * 512 * 1024
    assert _makespan(chip, a) == _makespan(chip, b)
    assert to_records(a) == to_records(gemm_schedule(chip, SMALL))   # running did not mutate it


def test_records_round_trip_in_memory(chip):
    sched = gemm_schedule(chip, SMALL)
    back = from_records(to_records(sched))
    assert to_records(back) == to_records(sched)
    assert back.num_instructions() == sched.num_instructions() > 0
    assert _makespan(chip, back) == _makespan(chip, sched)


def test_records_round_trip_through_json(chip):
    sched = gemm_schedule(chip, GemmParams(512, 512, 2048, "bf16"))
    text = json.dumps(to_records(sched))
    back = from_records(json.loads(text))
    # gm_keys come back from JSON lists as the original tuples, so L2 hits are unchanged
    assert to_records(back) == to_records(sched)
    a, b = ChipSim(chip).run(sched), ChipSim(chip).run(back)
    assert (b.makespan_ns, b.l2_hits, b.l2_misses, b.hbm_bytes) == \
        (a.makespan_ns, a.l2_hits, a.l2_misses, a.hbm_bytes)
    assert a.l2_hits > 0


def test_every_instruction_type_round_trips():
    prog = CoreProgram(0)
    prog.pipe("aic", "mte2").extend([isa.Copy("gm_to_l1", 64, ("A", 0, 1), "notalloc", "x"),
                                     isa.SetFlag("mte2", "mte1", 7)])
    prog.pipe("aic", "mte1").extend([isa.WaitFlag("mte2", "mte1", 7), isa.Barrier("b")])
    prog.pipe("aic", "m").extend([isa.Mmad(16, 32, 64, "fp4", "mm"), isa.CrossSet("aiv1", 15)])
    prog.pipe("aic", "fix").append(isa.Fixpipe(16, 32, "fp32", "ub_dual", None, "normal", "f"))
    prog.pipe("aiv1", "v").extend([isa.CrossWait("aic", 15), isa.VecOp(10.5, "div", 128, "v")])
    prog.pipe("aiv1", "s").extend([isa.Scalar(3), isa.Delay(12.5, "launch")])
    prog.buffers = [BufferUse("aic", "l1", "A", 64), BufferUse("aiv1", "ub", "tmp", 128)]
    sched = KernelSchedule("all", [prog], 123.0, {"note": "hand-built"})
    data = json.loads(json.dumps(to_records(sched)))
    back = from_records(data)
    assert back.cores[0].pipes == prog.pipes
    assert back.cores[0].buffers == prog.buffers
    assert (back.name, back.flops, back.meta) == ("all", 123.0, {"note": "hand-built"})
    assert {r["op"] for recs in data["cores"][0]["pipes"].values() for r in recs} == \
        {t.__name__ for t in isa.INSTRUCTION_TYPES}


def test_unknown_record_is_rejected():
    data = {"name": "x", "cores": [{"core": 0, "buffers": [],
                                    "pipes": {"aic.m": [{"op": "Mmadd", "m": 1}]}}]}
    with pytest.raises(ScheduleError, match="unknown instruction record .*expected op one of Copy"):
        from_records(data)


def test_unknown_buffer_is_rejected(chip):
    prog = CoreProgram(0, {("aic", "s"): [isa.Scalar(1)]}, [BufferUse("aic", "l3", "x", 1)])
    with pytest.raises(ScheduleError, match="unknown buffer 'l3'"):
        KernelSchedule("x", [prog]).check(chip)


def test_buffer_overflow_names_buffer_capacity_and_demand(chip):
    prog = CoreProgram(0, {("aiv0", "v"): [isa.VecOp(1)]},
                       [BufferUse("aiv0", "ub", "input x 2", 200 * 1024),
                        BufferUse("aiv0", "ub", "output", 100 * 1024)])
    with pytest.raises(ScheduleError) as info:
        KernelSchedule("ub-heavy", [prog]).check(chip)
    assert str(info.value) == (
        "schedule 'ub-heavy' core 0: UB of aiv0 overflows: demand 307200 B (input x 2 204800 B; "
        "output 102400 B) exceeds the capacity 262144 B (256 KiB) of 'ascend950dt'. "
        "Use smaller tiles or fewer stages.")


def test_format_core_prints_pipes_and_buffers(chip):
    sched = gemm_schedule(chip, SMALL)
    text = format_core(sched, 0, max_per_pipe=2)
    lines = text.splitlines()
    assert lines[0] == f"# {sched.name}: core 0"
    assert "#   aic.l1: A+B+scales tiles x" in text and "#   aic.l0c: fp32 accumulator" in text
    prog = sched.cores[0]
    for (unit, pipe), instrs in prog.pipes.items():
        header = f"{unit}.{pipe} ({len(instrs)} records)"
        assert header in lines
        i = lines.index(header)
        assert lines[i + 1] == f"  {instrs[0]}"
        if len(instrs) > 2:
            assert lines[i + 3] == f"  ... {len(instrs) - 2} more"
    assert "  Copy(path='gm_to_l1'" in text and "  WaitFlag(src='m', dst='fix'" in text


def test_format_core_other_core(chip):
    sched = gemm_schedule(chip, SMALL)
    assert format_core(sched, 3).splitlines()[0] == f"# {sched.name}: core 3"
