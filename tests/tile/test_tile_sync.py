"""Manual against automatic synchronization (the acceptance case): the same double-buffered
kernel runs with the language's flags and with correct manual flags; a missing wait is a
race and a wrong or missing set a deadlock, each reported with the program line, before
anything runs and through the CLI (exit 2, one line, no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simnode.errors import ScheduleError
from simnode.hardware.chip import ChipSim
from simnode.tile import verify

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
SHIPPED = HERE.parents[1] / "simnode" / "tile" / "programs"
SCALE = PROGRAMS / "scale.py"
MIX = PROGRAMS / "mix_manual.py"


def _makespan(chip, sched):
    return ChipSim(chip).run(sched).makespan_ns


def test_manual_flags_placed_right_run_like_the_automatic_ones(chip, build, lower):
    auto = lower(build(SCALE, sync="auto"))
    manual = lower(build(SCALE, sync="manual"))
    assert auto.meta["sync"] == "auto" and manual.meta["sync"] == "manual"
    assert auto.meta["flags_inserted"] > 0
    assert _makespan(chip, manual) == pytest.approx(_makespan(chip, auto), rel=0.05)


def test_a_missing_wait_is_a_race_named_with_both_lines(build, lower):
    with pytest.raises(ScheduleError) as info:
        lower(build(SCALE, sync="manual", bug="missing_wait"))
    msg = str(info.value)
    assert msg.startswith(f"{_rel(SCALE)}:35: race on core 0: aiv0.v reads 'xb' while aiv0.mte2 may "
                          f"still be writing it ({_rel(SCALE)}:29)"), msg


def test_a_wait_on_a_flag_nobody_sets_is_a_deadlock(build, lower):
    with pytest.raises(ScheduleError) as info:
        lower(build(SCALE, sync="manual", bug="wrong_event"))
    msg = str(info.value)
    assert msg.startswith(f"{_rel(SCALE)}:33: deadlock on core 0: aiv0.v waits at {_rel(SCALE)}:33 "
                          f"for flag mte2->v event 2, a flag never set"), msg


def test_a_missing_initial_set_is_a_deadlock_cycle(build, lower):
    with pytest.raises(ScheduleError) as info:
        lower(build(SCALE, sync="manual", bug="no_initial_set"))
    msg = str(info.value)
    assert "deadlock on core 0" in msg and "lies behind aiv0.mte3's own blocked wait" in msg
    assert f"aiv0.v waits at {_rel(SCALE)}:34 for flag mte3->v event 0" in msg


def test_manual_cross_core_flags_and_a_missing_cross_wait(chip, build, lower):
    assert _makespan(chip, lower(build(MIX, sync="manual"))) > 0
    assert _makespan(chip, lower(build(MIX, sync="auto"))) > 0
    with pytest.raises(ScheduleError, match=r"mix_manual\.py:\d+: race on core 0: aic\.fix overwrites "
                                            r"'half' while aiv0\.mte3 may still be reading it"):
        lower(build(MIX, sync="manual", bug="no_cross_wait"))


@pytest.mark.parametrize("path,params", [
    (SCALE, {}), (MIX, {"sync": "auto"}),
    (SHIPPED / "gemm.py", {"m": 300, "n": 520, "k": 700, "dtype": "fp8"}),
    (SHIPPED / "flash_attention.py", {"seq_q": 256, "seq_kv": 1024}),
    (SHIPPED / "tk_rope.py", {"seqlen": 256, "nheads": 8}),
])
def test_automatic_flags_are_free_of_deadlocks_and_races(build, path, params):
    verify.check(build(path, keep_meta=True, **params))


def test_a_manual_mistake_through_the_cli(cli, user_error, topology_path, write_yaml):
    work = write_yaml({"kind": "tile", "program": str(SCALE), "sync": "manual",
                       "bug": "missing_wait"}, "scale.yaml")
    user_error(cli("run", topology_path, work), "scale.py:35: race on core 0", nothing_ran=True)
    ok = cli("run", topology_path, work, "--set", "sync=auto", "--json")
    assert ok.code == 0, ok.err


def _rel(path):
    from simnode.tile.site import show
    return show(str(path))
