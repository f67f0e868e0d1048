"""``--set KEY=VALUE`` overrides applied to raw mappings before validation.

A key names a workload field (``m``, ``dtype``) or, under ``topology.``, a topology
field (``topology.hbm.bandwidth_GBps``). Values are parsed as YAML scalars, so
``m=128`` is an int and ``dtype=fp8`` a string. Unknown keys are rejected here, with
a "did you mean"; types and ranges are checked by the loaders as for the files.
"""

from __future__ import annotations

import copy
import re

import yaml

from simnode.config.fields import did_you_mean
from simnode.errors import ConfigError


#: a number in exponent form that YAML 1.1 reads as a string (``1e9``, ``1e-05``)
_EXPONENT_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def parse_value(raw: str):
    """A ``--set`` value as YAML reads it, except that ``1e9`` is a number (YAML 1.1, and
    so PyYAML, reads exponents without a dot as strings, which no user means)."""
    if not raw.strip():
        return raw
    if _EXPONENT_NUMBER.fullmatch(raw.strip()):
        return float(raw)
    try:
        value = yaml.safe_load(raw)
    except (yaml.YAMLError, ValueError):        # ValueError: e.g. an impossible date 2024-13-45
        return raw
    return value


def assignment_text(key: str, value) -> str:
    """``KEY=VALUE`` text that ``parse_assignment`` reads back as ``value``, whatever its
    type (``None``, ``1e-05``, lists): how sweeps, validation cases and regression
    scenarios hand typed values on as ``--set`` overrides."""
    if isinstance(value, str):
        if parse_value(value) == value:
            return f"{key}={value}"
        return f"{key}='" + value.replace("'", "''") + "'"
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30).strip()
    if text.endswith("\n..."):
        text = text[:-4].strip()
    elif text.endswith("..."):
        text = text[:-3].strip()
    return f"{key}={text}"


def parse_assignment(text: str, source: str = "--set") -> tuple[str, object]:
    """Split ``KEY=VALUE`` and parse VALUE as a YAML scalar (``parse_value``)."""
    if "=" not in text:
        raise ConfigError(source, text, text, "KEY=VALUE (for example m=128)")
    key, _, raw = text.partition("=")
    key = key.strip()
    if not key:
        raise ConfigError(source, text, text, "a non-empty KEY before '='")
    return key, parse_value(raw)


def apply_overrides(data: dict, assignments: dict[str, object], source: str,
                    extra_keys: tuple[str, ...] = ()) -> dict:
    """Return a copy of ``data`` with dotted-key ``assignments`` applied.

    Every key must already exist in ``data`` (or be listed in ``extra_keys``, for
    optional fields with defaults), so a typo cannot silently add a field.
    """
    out = copy.deepcopy(data)
    for dotted, value in assignments.items():
        parts = dotted.split(".")
        node = out
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            prefix = ".".join(parts[:depth + 1])
            if not isinstance(node, dict):
                raise ConfigError(source, dotted, value, f"'{'.'.join(parts[:depth])}' to be a mapping")
            if part not in node and not (last and dotted in extra_keys):
                valid = sorted({str(k) for k in node} |
                               ({k for k in extra_keys if "." not in k} if depth == 0 else set()))
                raise ConfigError(source, prefix, value,
                                  "an existing key; valid keys here: " + ", ".join(valid),
                                  did_you_mean(part, valid))
            if last:
                node[part] = value
            else:
                node = node[part]
    return out
