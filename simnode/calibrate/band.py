"""Bands: every point of a sweep run under each of several overlays (``simnode sweep --band``).

Overlays that fit the same cases equally well (two mechanisms, or the ends of a value's
profile interval) can still part away from those cases: the band is what they predict
between and beyond, per figure and point, their lowest and highest value and each one's.

``band_rows(points, figures, values)``: ``values[(i, label)]`` is the figure mapping of
point i under the overlay ``label``; returns one ``BandRow`` per point with, per figure,
(lo, hi, {label: value}). ``band_columns(figure)`` names the results.csv columns of a band
(``<figure>_lo``, ``<figure>_hi``); ``format_band`` prints the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simnode.report.columns import align


@dataclass
class BandRow:
    point: dict
    figures: dict = field(default_factory=dict)   #: figure -> (lo, hi, {label: value})


def band_columns(figure: str) -> tuple[str, str]:
    return f"{figure}_lo", f"{figure}_hi"


def band_rows(points: list, figures: list, values: dict, labels: list) -> list:
    """See the module docstring; a figure a point lacks under some overlay is left out of
    that point's row (a fused MoE layer has no separate dispatch figure)."""
    rows = []
    for i, point in enumerate(points):
        row = BandRow(dict(point))
        for fig in figures:
            got = {lab: values[(i, lab)].get(fig) for lab in labels}
            nums = {lab: float(v) for lab, v in got.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)}
            if len(nums) == len(labels):
                row.figures[fig] = (min(nums.values()), max(nums.values()), nums)
        rows.append(row)
    return rows


def format_band(rows: list, labels: list) -> str:
    """A table per point and figure: lo .. hi and each overlay's value."""
    if not rows:
        return "(no points)"
    keys = list(rows[0].point)
    table = [keys + ["figure", "lo", "hi"] + labels]
    for row in rows:
        for fig, (lo, hi, nums) in row.figures.items():
            table.append([str(row.point[k]) for k in keys] + [fig, f"{lo:.1f}", f"{hi:.1f}"]
                         + [f"{nums[lab]:.1f}" for lab in labels])
    return align(table)
