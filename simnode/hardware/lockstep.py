"""The lock-step reduced form of a chip run: one representative core runs for its group.

A schedule names groups of cores that run the same program on other GM regions
(``KernelSchedule.lockstep``, declared by the generator: a GEMM's cores with blocks of the same
shapes, a sparse MLA prefill's cores dealt into a few groups). With ``ChipSim(lockstep=True)``
(the default; a traced run is detailed) the first core of each group, its representative,
runs; the others, its shadows, do not. At each GM copy of the representative they make their
own L2 lookups of the same op, right after its own and in core order, so L2 holds what it would
hold and hits, misses and bytes are counted for every core; the representative's copy streams in
the share with the group's weight. A shadow's pipe statistics are its representative's.

How a group's copy streams (``issue_group``):

- a write, or a read of one region: the detailed form puts a group's copies of one instant in
  at most two classes, the hits (L2) and the misses and writes (L2 and HBM), one member per
  core at the path's cap, and a class solves with its members' weights summed. The
  representative starts one transfer per class it uses, weighted by its cores in it, so the
  share solves the same classes with the same weights; it waits for both, so a group whose
  misses are slower than its hits (HBM the limit) moves at their pace. A GEMM's cores run in
  exact step, and its times are the detailed form's (tests/hardware/test_lockstep.py);
- a read of several regions (a KV gather): split by the representative's own hits, as
  ``ChipSim._gm_regions`` splits a detailed core's, with its group's miss bytes on its miss
  part; and a run of reads that all hit the representative's L2 streams as one burst
  (``simnode.hardware.bursts``, ``burst``) with its shadows' misses on HBM. Its phase
  follows its own misses.

Why a prefill needs several groups: its detailed cores do not stay in step. Their first KV
gathers miss by different amounts and, while HBM is saturated, a core with more misses falls
behind; lock step is unstable from there (each item's Q reads and O/LSE writes of all cores are
HBM-bound when they coincide, 32 x 165 and 64 x 95 B/ns against 3500, so an offset core meets
less contention and offsets of a few ns grow to a few hundred). One group puts every core's
copies at one instant and overstates the contention (+0.4% at n_q 512, +1.3% at 4096). Eight
groups, each representative with its own phase, come within 0.1% from n_q 128 to 4096 (+0.05 to
+0.09%: the shadows share their representative's phase and contention; +0.2% at kv_len 32768,
whose cold phase is longer); the L2's hits may also differ by a few regions (shadows look up
after their representative rather than between the other pipes' copies of the same instant).
"""

from __future__ import annotations

import itertools
import math
from operator import attrgetter

from simnode.hardware.bursts import burst_hits
from simnode.instr.isa import Copy as _Copy

_chain = itertools.chain.from_iterable
_regions = attrgetter("regions")
_gm_key = attrgetter("gm_key")


def issue_group(sim, p, ins, path, size: float, i: int) -> None:
    """``ChipSim._issue`` for a representative ``p`` (not as a burst, ``burst``): the GM copy
    ``ins`` at its op ``i`` with its shadows' at the same op."""
    l2, share, g, done = sim.l2, sim.share, p.weight, sim.copy_done
    allocate = ins.l2_hint == "normal"
    p.copy_end = -math.inf
    if path.write:
        l2.write(ins.gm_key, size, allocate)
        for q in p.shadows:
            l2.write(q[i].gm_key, size, allocate)
        p.copy_parts = 1
        share.start_cb(size, sim.res_miss, (g, g), path.bw, done, p)
        return
    if type(ins) is _Copy and ins.regions:
        _regions_copy(sim, p, ins, path, size, i, allocate)
        return
    hits = l2.read(ins.gm_key, size, allocate)
    for q in p.shadows:
        hits += l2.read(q[i].gm_key, size, allocate)
    misses = g - hits
    p.copy_parts = (hits > 0) + (misses > 0)
    if hits:                                # the hit class: one member per core that hit
        share.start_cb(size, sim.res_hit, (float(hits),), path.bw, done, p)
    if misses:                              # the miss class: one per core that missed
        share.start_cb(size, sim.res_miss, (misses, misses), path.bw, done, p)


def _regions_copy(sim, p, ins, path, size, i, allocate) -> None:
    """A multi-region copy (a gather): split by the representative's own hits, as
    ``ChipSim._gm_regions`` splits a detailed core's (its phase follows its own misses); the
    miss part carries the group's miss bytes to HBM (on the hit part if the representative
    hit every region)."""
    l2, g, share, done = sim.l2, p.weight, sim.share, sim.copy_done
    n = len(ins.regions)
    part = size / n
    hits = l2.read_many(ins.regions, part, allocate)
    miss = n - hits
    for q in p.shadows:
        miss += n - l2.read_many(q[i].regions, part, allocate)
    if hits == n:
        _all_hit(sim, p, size, path.bw, miss / n)
        return
    p.copy_parts = (hits > 0) + 1
    if hits:
        share.start_cb(part * hits, sim.res_hit, (g,), path.bw * hits / n, done, p)
    share.start_cb(part * (n - hits), sim.res_miss, (g, miss / (n - hits)),
                   path.bw * (n - hits) / n, done, p)


def burst(sim, p, ops, i, m, path, size) -> int:
    """``bursts.burst_start`` for a group: the representative's ``m`` reads as one transfer
    if every region they read is in L2 (``bursts.burst_hits``; returns ``m``; the shadows
    look theirs up, their misses go on HBM), else what ``burst_hits`` returned."""
    part = burst_hits(sim.l2, ops, i, m, size)
    if part < 0:
        return part
    nreg = len(ops[i][1].regions)
    l2 = sim.l2
    # the shadows' reads of the same ops, in one pass when all are present (the usual case)
    seg = _chain(q[i:i + m] for q in p.shadows)
    shadow = list(_chain(map(_regions, seg))) if nreg else list(map(_gm_key, seg))
    miss = len(shadow) - l2.read_all(shadow, part, ops[i][1].l2_hint == "normal")
    p.copy_end = -math.inf
    _all_hit(sim, p, size * m, path.bw, miss / (nreg or 1) / m)
    return m


def _all_hit(sim, p, size: float, cap: float, misses: float) -> None:
    """One transfer for a group whose representative hit every region: on L2 with the
    group's weight, and on HBM with its shadows' ``misses`` (copies' worth) if any."""
    p.copy_parts = 1
    if misses:
        sim.share.start_cb(size, sim.res_miss, (p.weight, misses), cap, sim.copy_done, p)
    else:
        sim.share.start_cb(size, sim.res_hit, (p.weight,), cap, sim.copy_done, p)
