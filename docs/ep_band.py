"""Draw the README's EP-scale picture (docs/ep-band.png) from a `simnode sweep --band --out`
folder: dispatch and combine GB/s against num_ranks, one line per calibration overlay, the
band between them shaded, and the published figures of validation/published.yaml as stars.

    simnode sweep topologies/atlas950-supernode.yaml workloads/deepep-normal.yaml \
        --param num_ranks=8,16,32,64,128,256 \
        --band topologies/calibrated/deepep-peer-cost.yaml,topologies/calibrated/deepep-peer-cache.yaml \
        --out /tmp/ep-band
    python docs/ep_band.py /tmp/ep-band docs/ep-band.png

It is the report's own plot (``simnode.report.plots.sweep_png``, which ``simnode report``
embeds for the same folder), narrowed to the two figures the published points measure.
"""

from __future__ import annotations

import sys
from pathlib import Path

from simnode.commands.report import published_records
from simnode.report import plots
from simnode.report.folder import load_folder

FIGURES = ("dispatch_GBps", "combine_GBps")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = load_folder(argv[0])
    if not folder.band_field:
        print(f"{argv[0]}: not a band sweep (sweep.json has no band; run sweep with --band)",
              file=sys.stderr)
        return 2
    png = plots.sweep_png(folder.points, "num_ranks", published_records(),
                          "DeepEP normal on the Atlas 950 supernode: the band between two calibrations",
                          band_field=folder.band_field, only=FIGURES)
    Path(argv[1]).write_bytes(png)
    print(f"wrote {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
