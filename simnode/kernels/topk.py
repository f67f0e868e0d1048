"""Per-row top-k selection on the AIVs, after DeepSelect (facts S9), and a sort baseline.

``topk_schedule(chip, TopkParams)`` deals the rows of a ``rows x n`` fp32 score matrix
to the vector cores (a pure vector kernel: the AIC is idle) and builds each AIV's
MTE2 / V / MTE3 program. Pure function: no SimPy.

- ``algorithm: deepselect``: radix select. Pass 1 builds a 256-bin histogram of the
  top 8 bits of each score's order-preserving bit pattern (shift, mask, histogram
  update); a scan over the bins finds the bin that holds the k-th largest; pass 2
  compares every score with that bin and compacts the candidates (those above it
  plus the bin's own); a bitonic sort of the candidates gives the ordered top-k.
- ``algorithm: sort``: the baseline sorts the whole row (bitonic, keys with their
  indices) and keeps the first k.

A row that fits twice in UB stays resident (ping-pong rows, the next row loads while
this one is processed); a longer row (the sampler's ~128K vocabulary) is streamed in
tiles through ``stages`` UB slots; DeepSelect streams it twice (both passes, the
second from L2) and the sort baseline sorts tiles then merges them through GM.

Assumptions: uniform scores, so the selected bin holds n / 256 of the row; every
compare-exchange of a bitonic network costs 4 element-ops (min and max of the keys,
two selects of the indices) and reads and writes keys and indices (8 B per element).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from simnode.config.params import param
from simnode.errors import ScheduleError
from simnode.instr import isa
from simnode.instr.schedule import BufferUse, CoreProgram, KernelSchedule

SCORE_BYTES = 4               # fp32 scores
OUT_BYTES_PER_ELEM = 8        # fp32 value + int32 index per selected element
UB_BUDGET_BYTES = 248 * 1024  # facts 1.3, S9: DeepSelect caps its UB use at 248 KB
MAX_STAGES = 8                # facts 3.2, S9: num_stages <= 8 event ids
TILE_ELEMS = 4096             # 16 KB streaming tile (assumption: a 256 B-aligned UB slot)
RADIX_BINS = 256              # 8-bit digit of the fp32 bit pattern
HIST_OPS_PER_ELEM = 3         # shift, mask, histogram increment (vector histogram, facts 4.2)
COMPACT_OPS_PER_ELEM = 3      # compare with the bin, select, compact store
CE_OPS = 4                    # compare-exchange on (key, index): min, max, 2 selects
MERGE_OPS_PER_ELEM = 4        # one merge step per element: compare, 2 selects, advance


@dataclass(frozen=True)
class TopkParams:
    """The ``topk`` workload's fields: each declared once here (``simnode.config.params``)."""
    rows: int = param(doc="score rows (queries, or sampled sequences)", unit="rows", min=1)
    n: int = param(doc="scores per row: the score matrix's columns (KV length, or vocabulary size)",
                   unit="columns", min=1)
    k: int = param(doc="selected elements per row", unit="elements", min=1)
    algorithm: str = param("deepselect", "radix select (DeepSelect) or the sort baseline",
                           choices=("deepselect", "sort"))
    stages: int = param(4, "UB score-tile buffers per AIV streaming the rows that do not stay "
                        "resident", unit="buffers", min=1)
    num_aivs: int = param(0, "vector cores used (0 = every AIV of the chip)", unit="AIVs", min=0)


def _pow2(x: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, x))))


def bitonic_ops(m: int) -> tuple[float, float]:
    """(element-ops, UB bytes) of a bitonic sort of m (key, index) pairs."""
    m2 = _pow2(m)
    lg = int(math.log2(m2))
    stages = lg * (lg + 1) // 2
    return CE_OPS * (m2 // 2) * stages, 2 * OUT_BYTES_PER_ELEM * m2 * stages


def candidates(p: TopkParams) -> int:
    """Expected candidates after the radix pass: the k largest plus the rest of their bin."""
    return min(p.n, p.k + math.ceil(p.n / RADIX_BINS))


def validate(p: TopkParams, chip) -> None:
    if p.rows <= 0 or p.n <= 0 or not 0 < p.k <= p.n:
        raise ScheduleError(f"topk: rows = {p.rows}, n = {p.n}, k = {p.k}: expected positive "
                            f"sizes and 0 < k <= n.")
    if p.algorithm not in ("deepselect", "sort"):
        raise ScheduleError(f"topk: algorithm '{p.algorithm}': expected deepselect or sort.")
    if not 2 <= p.stages <= MAX_STAGES:
        raise ScheduleError(f"topk: stages = {p.stages}: expected 2..{MAX_STAGES} (one event "
                            f"id per stage, facts 3.2).")


def resident(p: TopkParams) -> bool:
    work = OUT_BYTES_PER_ELEM * _pow2(p.n) if p.algorithm == "sort" else 0
    return 2 * p.n * SCORE_BYTES + work <= UB_BUDGET_BYTES - _extra_ub(p)


def _extra_ub(p: TopkParams) -> int:
    cand = candidates(p) if p.algorithm == "deepselect" else TILE_ELEMS
    return RADIX_BINS * 4 + 2 * OUT_BYTES_PER_ELEM * _pow2(cand)


def topk_schedule(chip, p: TopkParams) -> KernelSchedule:
    validate(p, chip)
    naiv = p.num_aivs or chip.num_ai_cores * chip.aiv_per_core
    units = [(c, f"aiv{v}") for c in range(chip.num_ai_cores) for v in range(chip.aiv_per_core)]
    units = units[:naiv]
    progs = {}
    uses = defaultdict(int)                        # streaming slot uses per AIV
    res = resident(p)
    for r in range(p.rows):
        c, unit = units[r % len(units)]
        prog = progs.get(c)
        if prog is None:
            prog = progs[c] = CoreProgram(c)
        _row(prog, unit, r, r // len(units), p, res, uses)
    for prog in progs.values():
        prog.buffers = _buffers(p, res, sorted({u for (u, _) in prog.pipes}))
    meta = {"kind": "topk", "algorithm": p.algorithm, "rows": p.rows, "n": p.n, "k": p.k,
            "resident_rows": res, "aivs": len(units), "candidates": candidates(p)}
    return KernelSchedule(f"topk_{p.algorithm}_{p.rows}x{p.n}_k{p.k}", list(progs.values()), 0.0,
                          meta)


def _buffers(p: TopkParams, res: bool, units) -> list[BufferUse]:
    out = []
    for u in units:
        if res:
            out.append(BufferUse(u, "ub", "score rows x 2", 2 * p.n * SCORE_BYTES))
            if p.algorithm == "sort":
                out.append(BufferUse(u, "ub", "sort keys+indices", OUT_BYTES_PER_ELEM * _pow2(p.n)))
        else:
            out.append(BufferUse(u, "ub", f"score tiles x {p.stages}",
                                 p.stages * TILE_ELEMS * SCORE_BYTES))
        out.append(BufferUse(u, "ub", "histogram + candidates / merge work", _extra_ub(p)))
    return out


def _row(prog, unit, row, nth, p: TopkParams, res: bool, uses) -> None:
    mte2, vec, mte3 = prog.pipe(unit, "mte2"), prog.pipe(unit, "v"), prog.pipe(unit, "mte3")
    n = p.n
    tiles = math.ceil(n / TILE_ELEMS)
    if nth >= 1:                                   # the previous row's output left UB
        vec.append(isa.WaitFlag("mte3", "v", 0))
    if res:
        if nth >= 2:
            mte2.append(isa.WaitFlag("v", "mte2", 0))     # row buffer (nth % 2) free
        for t in range(tiles):
            size = min(TILE_ELEMS, n - t * TILE_ELEMS) * SCORE_BYTES
            mte2.append(isa.Copy("gm_to_ub", size, ("scores", row, t), label="scores"))
        mte2.append(isa.SetFlag("mte2", "v", 0))
        vec.append(isa.WaitFlag("mte2", "v", 0))
        if p.algorithm == "deepselect":
            _select(vec, p)
        else:
            ops, ub = bitonic_ops(n)
            vec.append(isa.VecOp(ops, "simple", int(ub), "bitonic sort row"))
        vec.append(isa.SetFlag("v", "mte2", 0))
    else:
        passes = 2 if p.algorithm == "deepselect" else 1
        for ps in range(passes):
            for t in range(tiles):
                e = min(TILE_ELEMS, n - t * TILE_ELEMS)
                if uses[(prog.core, unit)] >= p.stages:
                    mte2.append(isa.WaitFlag("v", "mte2", 1))
                uses[(prog.core, unit)] += 1
                mte2.append(isa.Copy("gm_to_ub", e * SCORE_BYTES, ("scores", row, t), label="scores"))
                mte2.append(isa.SetFlag("mte2", "v", 1))
                vec.append(isa.WaitFlag("mte2", "v", 1))
                if p.algorithm == "deepselect":
                    opc = HIST_OPS_PER_ELEM if ps == 0 else COMPACT_OPS_PER_ELEM
                    vec.append(isa.VecOp(opc * e, "simple", e * SCORE_BYTES,
                                         "histogram" if ps == 0 else "compare + compact"))
                else:
                    ops, ub = bitonic_ops(e)
                    vec.append(isa.VecOp(ops, "simple", int(ub), "bitonic sort tile"))
                    vec.append(isa.SetFlag("v", "mte3", 1))
                    mte3.append(isa.WaitFlag("v", "mte3", 1))
                    mte3.append(isa.Copy("ub_to_gm", e * OUT_BYTES_PER_ELEM, ("run", row, 0, t),
                                         label="sorted run"))
                vec.append(isa.SetFlag("v", "mte2", 1))
            if p.algorithm == "deepselect" and ps == 0:
                vec.append(isa.VecOp(RADIX_BINS * 2, "simple", RADIX_BINS * 8, "bin scan"))
        if p.algorithm == "deepselect":
            ops, ub = bitonic_ops(candidates(p))
            vec.append(isa.VecOp(ops, "simple", int(ub), "sort candidates"))
        else:
            _merges(mte2, vec, mte3, row, n, tiles)
    vec.append(isa.SetFlag("v", "mte3", 0))
    mte3.append(isa.WaitFlag("v", "mte3", 0))
    mte3.append(isa.Copy("ub_to_gm", p.k * OUT_BYTES_PER_ELEM, ("topk", row), label="top-k out"))
    mte3.append(isa.SetFlag("mte3", "v", 0))


def _select(vec, p: TopkParams) -> None:
    n = p.n
    vec.append(isa.VecOp(HIST_OPS_PER_ELEM * n, "simple", n * SCORE_BYTES, "histogram"))
    vec.append(isa.VecOp(RADIX_BINS * 2, "simple", RADIX_BINS * 8, "bin scan"))
    vec.append(isa.VecOp(COMPACT_OPS_PER_ELEM * n, "simple", n * SCORE_BYTES, "compare + compact"))
    ops, ub = bitonic_ops(candidates(p))
    vec.append(isa.VecOp(ops, "simple", int(ub), "sort candidates"))


def _merges(mte2, vec, mte3, row, n, tiles) -> None:
    """Pairwise merge passes of the sorted runs through GM (L2): each pass streams the row's
    keys and indices in and out once (one record per direction stands for the tiles
    streamed through the UB slots); a pass starts when the previous one is in GM."""
    passes = math.ceil(math.log2(tiles)) if tiles > 1 else 0
    for ps in range(passes):
        mte3.append(isa.SetFlag("mte3", "mte2", 0))      # fires when the runs are in GM
        mte2.append(isa.WaitFlag("mte3", "mte2", 0))
        size = n * OUT_BYTES_PER_ELEM
        mte2.append(isa.Copy("gm_to_ub", size, ("run", row, ps, "all"), label="merge in"))
        mte2.append(isa.SetFlag("mte2", "v", 2))
        vec.append(isa.WaitFlag("mte2", "v", 2))
        vec.append(isa.VecOp(MERGE_OPS_PER_ELEM * n, "simple", 2 * size, "merge pass"))
        vec.append(isa.SetFlag("v", "mte3", 2))
        mte3.append(isa.WaitFlag("v", "mte3", 2))
        mte3.append(isa.Copy("ub_to_gm", size, ("run", row, ps + 1, "all"), label="merge out"))
