"""Where a fitted value is recorded, and whether a run uses it.

Two records say that a value was fitted rather than sourced:

- a validation case's ``fit:`` (``validation/published.yaml``): a constant of a shipped
  topology or workload set on that one case (``fit: {values: {KEY: VALUE}, why: TEXT}``);
- a calibration overlay (``simnode.config.overlay``): values fitted by ``simnode
  calibrate`` on the cases it lists.

``value_in_use(inputs, key)`` reads the value a loaded run has for a ``--set`` key
(``topology.chip.vector.ops_per_cycle.vf_alu``, or a workload field); ``same(a, b)``
compares a recorded value with it (numbers to 1e-9 relative); ``calibrated_by(key, value,
cases, overlays)`` says where a value in use was fitted (``simnode describe``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

_MISSING = object()


def value_in_use(inputs, key: str):
    """The value of ``key`` in a loaded run (``load_inputs``), or a sentinel if it has none."""
    if key.startswith("topology."):
        node = inputs.topology
        for part in key.split(".")[1:]:
            if isinstance(node, Mapping):
                node = node.get(part, _MISSING)
            else:
                node = getattr(node, part, _MISSING)
            if node is _MISSING:
                return _MISSING
        return node
    return inputs.params.get(key, _MISSING)


def same(recorded, used) -> bool:
    """A recorded value equals the one in use (numbers to 1e-9 relative)."""
    if used is _MISSING:
        return False
    if isinstance(recorded, bool) or isinstance(used, bool):
        return recorded is used
    if isinstance(recorded, (int, float)) and isinstance(used, (int, float)):
        return math.isclose(float(recorded), float(used), rel_tol=1e-9, abs_tol=0.0)
    return recorded == used


def calibrated_by(key: str, value, cases=(), overlays=()) -> str:
    """Where ``value`` of ``key`` (a --set key) was fitted, or "" if it is no recorded fit:
    an overlay in use that sets it, else the cases of a cases file whose ``fit:`` records
    this value (``simnode describe``)."""
    for o in overlays:
        if key in o.values and same(o.values[key], value):
            return o.describe()
    hits = [c for c in cases if key in c.fit_values and same(c.fit_values[key], value)]
    if not hits:
        return ""
    why = "; ".join(dict.fromkeys(c.fit_why for c in hits if c.fit_why))
    where = hits[0].file or "the cases file"
    return (f"calibrated on {', '.join(c.id for c in hits)} ({where}, fit:"
            + (f" {why})" if why else ")"))
