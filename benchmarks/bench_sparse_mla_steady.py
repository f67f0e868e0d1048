"""Is the sparse MLA prefill linear in its items per core? Evidence for (or against) a reduced form.

    python benchmarks/bench_sparse_mla_steady.py [--set KEY=VALUE ...] [--pairs A:B ...]

Runs the workload (default: workloads/sparse-mla-prefill.yaml) exactly once and logs, for
core 0, the time each item's first O fragment leaves for GM (one per item, in order). It prints
the per-item durations, the item from which they repeat exactly (to 1 ns) and with what period,
then the two-point extrapolation a reduced form would make: simulate ``a`` and ``b`` items per
core (``n_q`` = a x cores and b x cores, a prefix of the same call: the token selection is
sequential, so the first queries select the same tokens) and extrapolate the makespan linearly
to the full count. Each pair is run for real (two more simulations) and compared with the exact
makespan. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simnode.hardware.chip import ChipSim  # noqa: E402
from simnode.kernels.sparse_mla import SparseMlaParams, num_queries, sparse_mla_schedule  # noqa: E402
from simnode.workloads.loader import load_inputs  # noqa: E402


class _LoggingChip(ChipSim):
    """ChipSim that logs, per core, the start of each item's first O -> GM copy (AIV 0)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.item_out: dict = {}

    def _gm_start(self, ins, path, size, p):
        key = getattr(ins, "gm_key", None)
        if ins.label == "O -> GM" and p.unit == "aiv0" and key[3] == 0:
            self.item_out.setdefault(p.core, []).append(self.env.now)
        return super()._gm_start(ins, path, size, p)


def _steady(d: list, tol: float = 1.0) -> tuple[int, int]:
    """(first index, period) from which ``d`` (leaving out its last entry, the final wave's
    drain) repeats to ``tol`` ns for at least three periods: of the periods that do, the one
    that starts earliest (then the shortest); (len, 0) if none does."""
    body = d[:-1]
    best = (len(body), 0)
    for period in range(1, len(body) // 3 + 1):
        k = len(body) - period
        while k > 0 and abs(body[k - 1] - body[k - 1 + period]) <= tol:
            k -= 1
        if len(body) - k >= 3 * period and k < best[0]:
            best = (k, period)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default=str(ROOT / "workloads" / "sparse-mla-prefill.yaml"))
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--pairs", nargs="*", default=["4:8", "8:16", "8:28", "16:36"],
                    help="items per core a:b of the two reduced runs")
    args = ap.parse_args()
    spec = load_inputs(ROOT / "topologies" / "ascend950dt.yaml", args.workload, args.sets)
    chip = spec.topology.chip
    p = SparseMlaParams(**spec.params)
    cores = p.num_cores or chip.num_ai_cores
    items = num_queries(p) * (p.heads // p.heads_per_core)
    if p.mode != "prefill" or p.heads != p.heads_per_core or items % cores:
        sys.exit("this analysis takes a prefill with one head block and items a multiple of the cores")
    n = items // cores
    t0 = time.process_time()
    sim = _LoggingChip(chip)
    full = sim.run(sparse_mla_schedule(chip, p)).makespan_ns
    cpu = time.process_time() - t0
    ts = sim.item_out[0]
    d = [b - a for a, b in zip(ts, ts[1:])]
    start, period = _steady(d)
    print(f"exact: {items} items, {n} per core, makespan {full:.1f} ns ({cpu:.1f} s CPU)")
    print("core 0, ns between consecutive items' first O -> GM copy:")
    for k in range(0, len(d), 20):
        print(f"  {k:4d}: " + " ".join(f"{x:5.0f}" for x in d[k:k + 20]))
    if period:
        steady = sum(d[start:start + period]) / period
        mean = (ts[-1] - ts[0]) / (len(ts) - 1)
        print(f"repeats exactly (1 ns) with period {period} items from item {start + 1} on; "
              f"steady per-item time {steady:.1f} ns, mean over the run {mean:.1f} ns "
              f"({100 * (mean / steady - 1):+.2f}%)")
    else:
        print("no exact period before the last wave")
    print("two-point extrapolation (a, b items per core, run for real):")
    for pair in args.pairs:
        a, b = (int(x) for x in pair.split(":"))
        if not 0 < a < b < n:
            continue
        t0 = time.process_time()
        m = {}
        for k in (a, b):
            q = SparseMlaParams(**{**spec.params, "n_q": k * cores})
            m[k] = ChipSim(chip).run(sparse_mla_schedule(chip, q)).makespan_ns
        est = m[a] + (m[b] - m[a]) * (n - a) / (b - a)
        print(f"  a={a:3d} b={b:3d}: {est:10.1f} ns, {100 * (est / full - 1):+.3f}% "
              f"({time.process_time() - t0:.1f} s CPU, {100 * (a + b) / n:.0f}% of the items)")


if __name__ == "__main__":
    main()
