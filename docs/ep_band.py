"""Draw the EP-scale picture of docs/calibration.md (docs/ep-band.png) from `simnode sweep
--band --out` folders: dispatch and combine GB/s against num_ranks, one line per calibration
overlay, the band between them shaded, and the published figures of
validation/published.yaml as stars.

    simnode sweep topologies/atlas950-supernode.yaml workloads/deepep-normal.yaml \
        --param num_ranks=8,16,32,64,128,256 \
        --band topologies/calibrated/deepep-peer-cost.yaml,topologies/calibrated/deepep-peer-cache.yaml \
        --out /tmp/ep-band
    simnode sweep ... --param num_ranks=512 --set num_experts=512 ... --out /tmp/ep-band-512
    simnode sweep ... --param num_ranks=1024 --set num_experts=1024 ... --out /tmp/ep-band-1024
    python docs/ep_band.py /tmp/ep-band /tmp/ep-band-512 /tmp/ep-band-1024 docs/ep-band.png

Several folders draw as one sweep: the published 256 experts do not split over 512 or 1024
ranks, so those sizes are their own sweeps (one expert per rank, as at EP256;
docs/calibration.md, "The band between two calibrations"); each folder must be a band sweep
over num_ranks with the same overlays.
It is the report's own plot (``simnode.report.plots.sweep_png``, which ``simnode report``
embeds for one folder), narrowed to the two figures the published points measure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from simnode.commands.report import published_records
from simnode.report import plots
from simnode.report.folder import load_folder

FIGURES = ("dispatch_GBps", "combine_GBps")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    points, field, overlays = [], None, None
    for path in argv[:-1]:
        folder = load_folder(path)
        if not folder.band_field:
            print(f"{path}: not a band sweep (sweep.json has no band; run sweep with --band)",
                  file=sys.stderr)
            return 2
        band = json.loads((Path(path) / "sweep.json").read_text())["band"]["overlays"]
        if overlays is not None and (band != overlays or folder.band_field != field):
            print(f"{path}: its band's overlays ({', '.join(band.values())}) are not those of "
                  f"{argv[0]} ({', '.join(overlays.values())}): one picture draws one band",
                  file=sys.stderr)
            return 2
        if "num_ranks" not in folder.params:
            print(f"{path}: a sweep over num_ranks (--param num_ranks=...) is needed", file=sys.stderr)
            return 2
        field, overlays = folder.band_field, band
        points.extend(folder.points)
    png = plots.sweep_png(points, "num_ranks", published_records(),
                          "DeepEP normal on the Atlas 950 supernode: the band between two calibrations",
                          band_field=field, only=FIGURES)
    Path(argv[-1]).write_bytes(png)
    print(f"wrote {argv[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
