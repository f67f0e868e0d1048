"""Repeated runs of records (``CoreProgram.repeats``): a generator notes where it placed a
memoized run of records again, and the check and the compile skip such runs (the check's
distinct records, the compile's op list by copying the earlier run's ops). The notes are hints:
``repeat_runs`` keeps only those that hold, so the results must be those of a schedule
without notes."""

from __future__ import annotations

import copy
import dataclasses

from simnode.hardware.chip import ChipSim
from simnode.hardware.pipes import Path
from simnode.instr import isa
from simnode.instr.schedule import CoreProgram, KernelSchedule, repeat_runs
from simnode.kernels.gemm import GemmParams, gemm_schedule


def _strip(sched: KernelSchedule) -> KernelSchedule:
    """The same schedule (the same record objects) with no repeat notes."""
    bare = copy.copy(sched)
    bare.cores = [dataclasses.replace(prog, repeats={}) for prog in sched.cores]
    return bare


def _compiled_ops(chip, sched):
    """Every pipe's compiled ops after launching ``sched`` (flags and paths are the sim's own
    objects: compared by what names them); every core's, lock-step groups run in full."""
    sim = ChipSim(chip, lockstep=False)
    sim.launch(sched)
    return [[tuple(getattr(x, "key", x) if not isinstance(x, Path) else (x.bw, x.base, x.ii)
                   for x in op) for op in p.ops] for p in sim._pipes if p.ops]


def _figures(run):
    return (run.makespan_ns, run.l2_bytes, run.hbm_bytes, run.l2_hits, run.l2_misses,
            sorted((k, dataclasses.astuple(v)) for k, v in run.pipe_stats.items()))


def test_a_gemm_notes_its_repeated_blocks_and_compiles_to_the_same_ops(chip):
    sched = gemm_schedule(chip, GemmParams(2048, 4096, 1024, "bf16"))    # 4 blocks a core
    notes = sched.cores[0].repeats
    assert notes.get(("aic", "mte1")) and notes.get(("aic", "m"))    # the cube's blocks repeat
    ops = {s is sched: _compiled_ops(chip, s) for s in (sched, _strip(sched))}
    assert len(ops[True]) == 4 * 32 and ops[True] == ops[False]    # every pipe of every core
    assert _figures(ChipSim(chip).run(sched)) == _figures(ChipSim(chip).run(_strip(sched)))


def test_notes_that_do_not_hold_are_ignored(chip):
    a, b, c = (isa.Mmad(128, 128, 1024 * (i + 1), "bf16") for i in range(3))
    instrs = [a, b, a, b, c, a, b]
    # holds; overlaps the first; names other records; runs past the end; starts before its source
    notes = [(2, 2, 0), (3, 2, 0), (4, 2, 0), (6, 2, 0), (0, 2, 5)]
    assert repeat_runs(instrs, notes) == [(2, 2, 0)]
    assert repeat_runs(instrs, [(5, 2, 2)]) == [(5, 2, 2)]   # a repeat of a repeat

    # a note made stale by editing the list afterwards: the check and compile see every record
    prog = CoreProgram(0)
    prog.place("aic", "m", [a, b], {}, "blk")
    placed = {"blk": 0}
    prog.place("aic", "m", [a, b], placed, "blk")
    assert prog.repeats[("aic", "m")] == [(2, 2, 0)]
    prog.pipes[("aic", "m")][3] = c
    sched = KernelSchedule("stale", [prog])
    distinct, runs = {}, {}
    sched.check(chip, distinct, runs)
    key = id(prog.pipes[("aic", "m")])
    assert runs[key] == [] and distinct[key] == [a, b, c]
    # ... and the run is that of the edited list without notes, not of a, b, a, b (the note)
    def busy(s):
        return ChipSim(chip).run(s).pipe_stats[(0, "aic", "m")].busy_ns
    assert _figures(ChipSim(chip).run(sched)) == _figures(ChipSim(chip).run(_strip(sched)))
    assert busy(sched) != busy(KernelSchedule("abab", [CoreProgram(0, {("aic", "m"): [a, b, a, b]})]))


def test_a_placer_notes_what_place_notes(chip):
    a, b, c = (isa.Mmad(128, 128, 1024 * (i + 1), "bf16") for i in range(3))
    runs = [([a, b], "ab"), ([c], "c"), ([a, b], "ab"), ([], "e"), ([], "e"), ([c], "c")]
    by_place, by_placer = CoreProgram(0), CoreProgram(0)
    placed, place = {}, by_placer.placer("aic", "m")
    for seq, key in runs:
        by_place.place("aic", "m", seq, placed, key)
        place(seq, key)
    assert by_placer.pipes == by_place.pipes and by_placer.repeats == by_place.repeats
    assert by_placer.repeats[("aic", "m")] == [(3, 2, 0), (5, 1, 2)]


def test_sparse_mla_notes_its_repeated_steps_and_compiles_to_the_same_ops(chip):
    from simnode.kernels.sparse_mla import SparseMlaParams, sparse_mla_schedule
    sched = sparse_mla_schedule(chip, SparseMlaParams(n_q=32, kv_len=2048, num_cores=4))
    notes = sched.cores[0].repeats
    for pipe in (("aic", "mte1"), ("aic", "m"), ("aic", "fix"), ("aiv0", "v"), ("aiv1", "mte3")):
        instrs = sched.cores[0].pipes[pipe]
        # every note holds (after the launch records put before each pipe's) and they cover most
        assert notes.get(pipe) and repeat_runs(instrs, notes[pipe]) == sorted(notes[pipe])
        assert sum(length for _, length, _ in notes[pipe]) > len(instrs) / 2
    ops = {s is sched: _compiled_ops(chip, s) for s in (sched, _strip(sched))}
    assert ops[True] == ops[False]
    assert _figures(ChipSim(chip).run(sched)) == _figures(ChipSim(chip).run(_strip(sched)))
