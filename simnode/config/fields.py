"""Typed reading of raw YAML mappings with precise errors.

``Reader(data, source, path)`` reads one mapping. Each getter names the key, its
type and range; ``finish()`` rejects keys nobody read, with a "did you mean".
The loader functions of every spec are written with it, never ``Spec(**yaml)``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import yaml

from simnode.errors import ConfigError

_MISSING = object()


#: the smallest value a positive field takes: 1e-12 GB/s, GHz or MiB is already absurd, and
#: below ~1e-300 a transfer's time is infinite, which would read as a deadlock at t = inf
MIN_POSITIVE = 1e-12


class _DuplicateKey(Exception):
    def __init__(self, key, line: int):
        self.key, self.line = key, line


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's safe loader (libyaml's parser when installed: ~10x faster on the commented
    topology files), except that a key given twice in one mapping is an error (the plain
    loader keeps the last one silently, so an edit can be undone by a forgotten line)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:          # the mapping's own keys, before `<<:` merges
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue                        # merged keys may be overridden; a list key is PyYAML's error
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise _DuplicateKey(key, key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


#: the checkout's root (the folder holding topologies/): where the relative paths that
#: shipped files write start
REPO_ROOT = Path(__file__).resolve().parents[2]


def resolve_path(written: str, near: str) -> Path:
    """A path written in the file ``near``: next to that file if it is there (a user's own
    files side by side), else from the repository root (as shipped files write them)."""
    p = Path(written).expanduser()
    if p.is_absolute():
        return p
    if near and (Path(near).parent / p).is_file():
        return Path(near).parent / p
    return REPO_ROOT / p


def load_yaml(path: str | Path) -> dict:
    """Read a YAML file that must hold a mapping; errors name the file."""
    if not str(path).strip():
        raise ConfigError("(command line)", "", str(path), "a YAML file path (it is empty)")
    p = Path(path)
    if p.is_dir():
        raise ConfigError(str(p), "", str(p), "a YAML file (this is a folder)")
    if not p.is_file():
        raise ConfigError(str(p), "", str(p), "an existing YAML file")
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_StrictLoader)  # noqa: S506 (safe)
    except UnicodeDecodeError as exc:
        raise ConfigError(str(p), "", f"<byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}>",
                          "a UTF-8 text file of YAML") from None
    except OSError as exc:
        raise ConfigError(str(p), "", str(p), f"a readable YAML file ({exc.strerror})") from None
    except _DuplicateKey as exc:
        raise ConfigError(str(p), str(exc.key), f"<given twice, again on line {exc.line}>",
                          "each key once in a mapping") from None
    except ValueError as exc:                   # a constructor's own check, e.g. a date 2024-13-45
        raise ConfigError(str(p), "", "<unreadable value>", f"valid YAML values ({exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown place"
        raise ConfigError(str(p), "", f"<unparsable at {where}>",
                          f"valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise ConfigError(str(p), "", data, "a mapping of keys to values at the top level")
    return data


def _shown(bound) -> str:
    """A bound as an error prints it: 2,147,483,647, 1e+06, 100000.0, 0.5."""
    if isinstance(bound, int):
        return f"{bound:,}" if abs(bound) >= 10 ** 6 else str(bound)
    return f"{bound:g}" if bound and not 1e-3 <= abs(bound) < 1e6 else str(bound)


def did_you_mean(name: str, valid: Iterable[str]) -> str:
    import difflib                      # (only when a name is wrong: not on every run's import)
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f"Did you mean '{close[0]}'?" if close else ""


class Reader:
    """Reads keys of one mapping; every error names source, key path and value."""

    def __init__(self, data: Any, source: str, path: str = ""):
        if not isinstance(data, dict):
            raise ConfigError(source, path, data, "a mapping of keys to values")
        self.data = data
        self.source = source
        self.path = path
        self._read: set[str] = set()

    def key_path(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, value, expected: str, hint: str = "") -> ConfigError:
        return ConfigError(self.source, self.key_path(key), value, expected, hint)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default=_MISSING):
        self._read.add(key)
        if key not in self.data:
            if default is _MISSING:
                given = ", ".join(map(str, self.data)) or "none"
                raise ConfigError(self.source, self.key_path(key), "<missing>",
                                  "this key to be present", f"Keys given here: {given}.")
            return default
        return self.data[key]

    def section(self, key: str, default=_MISSING) -> "Reader":
        value = self.raw(key, default)
        return Reader(value, self.source, self.key_path(key))

    def number(self, key: str, *, min_value: float | None = None, positive: bool = False,
               max_value: float | None = None, default=_MISSING) -> float:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, value, "a number")
        if isinstance(value, int) and abs(value) > 1e308 or not math.isfinite(value):  # .nan, .inf
            raise self.error(key, value, "a finite number")
        if positive and not value > 0:
            raise self.error(key, value, "a number greater than 0")
        if positive and value < MIN_POSITIVE:   # a rate so small that times overflow to inf
            raise self.error(key, value, f"a number of at least {MIN_POSITIVE:g} (smaller rates "
                                         f"and sizes overflow the simulated clock)")
        self._bounded(key, value, min_value, max_value, "a number")
        return float(value)

    def integer(self, key: str, *, min_value: int | None = None, max_value: int | None = None,
                default=_MISSING) -> int:
        given = value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and math.isfinite(value) and value.is_integer():
                value = int(value)
            else:
                raise self.error(key, value, "an integer")
        self._bounded(key, value, min_value, max_value, "an integer", given)
        return int(value)

    def _bounded(self, key: str, value, min_value, max_value, noun: str, given=None) -> None:
        """Refuse ``value`` outside the bounds; the error shows it as given (1e+30, not the
        31 digits of the integer it reads as)."""
        shown = value if given is None else given
        if min_value is not None and value < min_value:
            raise self.error(key, shown, f"{noun} >= {_shown(min_value)}")
        if max_value is not None and value > max_value:
            raise self.error(key, shown, f"{noun} <= {_shown(max_value)}")

    def integer_list(self, key: str, *, min_value: int | None = None,
                     max_value: int | None = None, default=_MISSING) -> tuple:
        """A list of integers (YAML ``[1, 2, 3]``), as a tuple."""
        value = self.raw(key, default)
        if not isinstance(value, (list, tuple)) or any(
                isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise self.error(key, value, "a list of integers, e.g. [3072, 2990, 3105]")
        if min_value is not None and any(v < min_value for v in value):
            raise self.error(key, value, f"a list of integers >= {min_value}")
        if max_value is not None and any(v > max_value for v in value):
            raise self.error(key, value, f"a list of integers <= {max_value}")
        return tuple(int(v) for v in value)

    def boolean(self, key: str, default=_MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, value, "true or false")
        return value

    def string(self, key: str, *, choices: Iterable[str] | None = None, default=_MISSING) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str):
            raise self.error(key, value, "a string")
        if choices is not None:
            choices = list(choices)
            if value not in choices:
                raise self.error(key, value, "one of " + ", ".join(repr(c) for c in choices),
                                 did_you_mean(value, choices))
        return value

    def mapping_keys(self) -> list[str]:
        return list(self.data.keys())

    def finish(self) -> None:
        """Reject keys that no getter read."""
        for key in self.data:
            if key not in self._read:
                valid = sorted(self._read)
                raise ConfigError(self.source, self.key_path(str(key)), self.data[key],
                                  "no such key; valid keys here: " + ", ".join(valid),
                                  did_you_mean(str(key), valid))
