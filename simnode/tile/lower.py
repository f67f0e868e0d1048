"""From a traced program to a ``KernelSchedule`` the pipe engine runs.

``to_schedule(builder, name)`` gathers each core's pipe streams (sets placed after their
producers), its buffer plan (every physical buffer x its versions, checked by
``KernelSchedule.check`` like any schedule's) and the meta a result shows. A manually
synchronized program is checked first (``simnode.tile.verify``): a deadlock, a race or a
flag never set is an error naming the program line, before anything runs.
"""

from __future__ import annotations

from simnode.instr.schedule import BufferUse, CoreProgram, KernelSchedule
from simnode.tile import verify


def to_schedule(b, name: str) -> KernelSchedule:
    if b.kernel.sync == "manual":
        verify.check(b)
    cores = []
    flags = 0
    for core in sorted(b.cores):
        em = b.cores[core]
        prog = CoreProgram(core)
        prog.pipes = em.pipes()
        for unit in b.units:
            for ph in b.phys.get((core, unit), ()):
                if ph.scope == "l0s":
                    continue
                prog.buffers.append(BufferUse(unit, ph.scope, f"{ph.label} x {ph.versions}",
                                              ph.size_bytes * ph.versions))
        flags += em.flag_pairs
        cores.append(prog)
    k = b.kernel
    meta = {"kind": "tile", "program": name, "sync": k.sync,
            "kernel": "vector" if k.vector else "mixed", "blocks": k.blocks}
    if k.sync == "auto":
        meta["flags_inserted"] = flags
    meta.update(b.meta)
    return KernelSchedule(name, cores, b.flops, meta)
