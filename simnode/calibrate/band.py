"""Bands: every point of a sweep run under each of several overlays (``simnode sweep --band``).

Overlays that fit the same cases equally well (two mechanisms, or the ends of a value's
profile interval) can still part away from those cases: the band is what they predict
between and beyond, per figure and point, their lowest and highest value and each one's.

``parse_band("A.yaml,B.yaml", params)`` -> {label: Overlay} (label: the file's stem; errors
name ``--band``); a band sweep's runs carry the overlay's label as the point field
``BAND_FIELD``. ``band_rows(points, figures, values, labels)``: ``values[(i, label)]`` is the
figure mapping of point i under the overlay ``label``; returns one ``BandRow`` per point with,
per figure, (lo, hi, {label: value}). ``band_of(rows, labels)`` groups a band sweep's runs
``[(point, spec, result)]`` by grid point; ``band_extra`` gives each run's ``<figure>_lo`` and
``<figure>_hi`` columns (``band_columns``); ``format_band`` (``format_band_rows``) prints the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from simnode.errors import ConfigError
from simnode.report.columns import align

#: the point field that names a band sweep's overlay
BAND_FIELD = "overlay"


@dataclass
class BandRow:
    point: dict
    figures: dict = field(default_factory=dict)   #: figure -> (lo, hi, {label: value})


def parse_band(text: str, params: dict) -> dict:
    """``--band A.yaml,B.yaml,...`` -> {label: Overlay}: two or more distinct overlay files,
    each loaded and checked (``simnode.config.overlay.load_overlay``)."""
    from simnode.config.overlay import load_overlay
    expected = ("a comma-separated list of two or more calibration overlay files "
                "(topologies/calibrated/A.yaml,topologies/calibrated/B.yaml)")
    items = [t.strip() for t in str(text).split(",")]
    if "" in items:
        raise ConfigError("--band", "band", text, f"{expected}, without empty items (item "
                          f"{items.index('') + 1} of {len(items)} is empty)")
    if len(items) < 2:
        raise ConfigError("--band", "band", text, f"{expected}: a band needs two ends (one "
                          "overlay alone is --topology-overlay)")
    if BAND_FIELD in params:
        raise ConfigError("--param", BAND_FIELD, params[BAND_FIELD], f"a field other than "
                          f"'{BAND_FIELD}' with --band (a band sweep names each run's overlay so)")
    out: dict = {}
    for item in items:
        if any(Path(item).resolve() == Path(o.path).resolve() for o in out.values()):
            raise ConfigError("--band", "band", text, f"{expected}, each file once ({item} is "
                              "given twice)")
        label = Path(item).stem
        if label in out:
            label = item
        out[label] = load_overlay(item, "--band")
    return out


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


def band_of(runs: list, labels: list) -> tuple[list, list]:
    """A band sweep's runs ``[(point, spec, result)]`` (each point once per overlay, in
    label order) -> (the ``BandRow`` per grid point, the figures banded: every headline)."""
    points, values, index = [], {}, {}
    figures = list(dict.fromkeys(n for _, _, r in runs for n, _ in r.headline_columns()))
    for point, _, result in runs:
        grid_point = {k: v for k, v in point.items() if k != BAND_FIELD}
        key = tuple(grid_point.items())
        if key not in index:
            index[key] = len(points)
            points.append(grid_point)
        values[(index[key], point[BAND_FIELD])] = result.to_dict()
    return band_rows(points, figures, values, labels), figures


def band_extra(runs: list, labels: list) -> list:
    """Per run, the band of its grid point: {``<figure>_lo``: lo, ``<figure>_hi``: hi}."""
    rows, _ = band_of(runs, labels)
    by_point = {tuple(r.point.items()): r for r in rows}
    out = []
    for point, _, _ in runs:
        row = by_point[tuple((k, v) for k, v in point.items() if k != BAND_FIELD)]
        extra = {}
        for fig, (lo, hi, _) in row.figures.items():
            lo_name, hi_name = band_columns(fig)
            extra[lo_name], extra[hi_name] = lo, hi
        out.append(extra)
    return out


def format_band(runs: list, labels: list) -> str:
    """A band sweep's table (``format_band_rows`` of ``band_of``)."""
    return format_band_rows(band_of(runs, labels)[0], labels)


def format_band_rows(rows: list, labels: list) -> str:
    """A table per grid point and figure: lo, hi and each overlay's value."""
    if not rows:
        return "(no points)"
    keys = list(rows[0].point)
    table = [keys + ["figure", "lo", "hi"] + labels]
    for row in rows:
        for fig, (lo, hi, nums) in row.figures.items():
            digits = 3 if fig.endswith("_over_bound") else 1
            table.append([str(row.point[k]) for k in keys] + [fig, f"{lo:.{digits}f}", f"{hi:.{digits}f}"]
                         + [f"{nums[lab]:.{digits}f}" for lab in labels])
    return align(table)
