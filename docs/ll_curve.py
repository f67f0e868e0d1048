"""Draw docs/low-latency.png and print docs/low-latency.md's table: the 950 supernode's
low-latency dispatch and combine time against EP size, a PREDICTION (no 950 figure is
published for these kernels), from two `simnode sweep --out` folders:

    # the published kernels (UB memory semantics) under the two readings of the per-write cost
    simnode sweep topologies/atlas950-supernode.yaml workloads/deepep-ll.yaml \
        --param num_ranks=8,16,32,64,128,256 --param remote_write_ns=0,3529.32 --out /tmp/ll-mem
    # the URMA what-if under the two calibrated 950 overlays
    simnode sweep topologies/atlas950-supernode.yaml workloads/deepep-ll.yaml --set transport=urma \
        --param num_ranks=8,16,32,64,128,256 \
        --band topologies/calibrated/deepep-peer-cost.yaml,topologies/calibrated/deepep-peer-cache.yaml \
        --out /tmp/ll-urma
    python docs/ll_curve.py /tmp/ll-mem /tmp/ll-urma docs/low-latency.png

Each band is shaded between its two readings (memory: remote_write_ns 0 and 3529.32 ns;
URMA: the per-peer and the peer-cache overlays), its ends drawn as lines; the A3's
published EP8 / EP32 points (validation/published.yaml, a3-ll-*) are drawn as stars for
scale only: they are another chip.
"""

from __future__ import annotations

import sys
from pathlib import Path

from matplotlib.figure import Figure

from simnode.calibrate.band import BAND_FIELD
from simnode.commands.validate import DEFAULT_CASES, load_cases
from simnode.report.folder import load_folder

KERNELS = ("dispatch", "combine")


def series(folder, field: str) -> dict:
    """{value of ``field``: {num_ranks: {kernel: us}}} of a sweep folder."""
    out: dict = {}
    for p in load_folder(folder).points:
        key = p.point[field]
        out.setdefault(key, {})[p.point["num_ranks"]] = {k: p.flat[f"{k}_us"] for k in KERNELS}
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    memory = series(argv[0], "remote_write_ns")
    urma = series(argv[1], BAND_FIELD)
    a3 = {(int(dict(x.split("=", 1) for x in c.sets)["num_ranks"]), c.metric.split("_")[0]):
          c.published for c in load_cases(DEFAULT_CASES) if c.id.startswith("a3-ll-")}
    fig = Figure(figsize=(10, 4.2))
    for ax, kernel in zip(fig.subplots(1, 2), KERNELS):
        for bands, colour, label in ((memory, "tab:blue", "memory (UB stores), remote_write_ns"),
                                     (urma, "tab:orange", "URMA what-if")):
            keys = sorted(bands, key=str)
            ranks = sorted(bands[keys[0]])
            ys = [[bands[k][r][kernel] for r in ranks] for k in keys]
            ax.fill_between(ranks, [min(v) for v in zip(*ys)], [max(v) for v in zip(*ys)],
                            color=colour, alpha=0.2)
            for k, y in zip(keys, ys):
                name = Path(str(k)).stem if bands is urma else f"{k:g} ns"
                ax.plot(ranks, y, "o-", color=colour, lw=1.2, ms=3, label=f"{label} {name}")
        stars = [(r, us) for (r, k), us in a3.items() if k == kernel]
        ax.plot([r for r, _ in stars], [us for _, us in stars], "*", color="k", ms=10,
                label="A3, published (another chip)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("EP size (ranks), 128 tokens per rank")
        ax.set_ylabel(f"{kernel} time, us")
        ax.set_title(f"{kernel}: prediction on the Atlas 950 supernode")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    fig.axes[0].legend(fontsize=6.5, loc="lower right")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    print(f"wrote {argv[2]}\n")
    print("| EP | dispatch memory (0 / 3529 ns) | dispatch URMA (peer-cost / peer-cache) "
          "| combine memory | combine URMA |")
    print("|---|---|---|---|---|")
    mk, uk = sorted(memory, key=float), sorted(urma, key=str)
    for r in sorted(memory[mk[0]]):
        cells = [" / ".join(f"{bands[k][r][kernel]:.1f}" for k in keys)
                 for kernel in KERNELS for bands, keys in ((memory, mk), (urma, uk))]
        print(f"| {r} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
