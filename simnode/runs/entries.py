"""What a validation cases file and a regression scenario file share: a list of entries,
each with an id, a topology, a workload and its own ``set:`` overrides.

``read_yaml(path)`` reads either file (a file that is not UTF-8 is a ``ConfigError`` naming
it); ``check_set_keys(sets, reader)`` checks an entry's ``set:`` mapping; ``select(entries,
patterns)`` keeps the entries whose id matches a glob of ``--only``; ``in_entry(exc, ...)``
tells an input error of one entry's run as an error of its file, at the ``set:`` key it is
about (``set_key`` finds that key).
"""

from __future__ import annotations

import fnmatch

from simnode.config.fields import Reader, load_yaml
from simnode.errors import ConfigError


def read_yaml(path) -> dict:
    """``load_yaml``, and a file that is not UTF-8 is a ConfigError naming it too (also
    where ``load_yaml`` lets the UnicodeDecodeError through)."""
    try:
        return load_yaml(path)
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), "", f"<byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}>",
                          "a UTF-8 text file of YAML") from None


def check_set_keys(sets, r: Reader, key: str = "set") -> dict:
    """A ``set:`` mapping of field name -> value (names are strings without '=')."""
    if not isinstance(sets, dict):
        raise r.error(key, sets, "a mapping of field: value")
    for name in sets:
        if not isinstance(name, str) or not name.strip() or "=" in name:
            raise r.error(f"{key}.{name}", sets[name], "a field name (a non-empty string without '=')")
    return sets


def select(entries: list, patterns: list[str]) -> list:
    """Entries (scenarios or validation cases: anything with an ``id``) whose id matches any
    glob pattern (all if none); a pattern matching none is an error naming ``--only``."""
    if not patterns:
        return list(entries)
    for p in patterns:
        if not any(fnmatch.fnmatchcase(s.id, p) for s in entries):
            raise ConfigError("--only", "only", p, "an id or glob pattern matching one of: "
                              + ", ".join(s.id for s in entries))
    return [s for s in entries if any(fnmatch.fnmatchcase(s.id, p) for p in patterns)]


def set_key(key_path: str, keys) -> str | None:
    """The override among ``keys`` (``--set`` keys) that an error at ``key_path`` is about,
    or None. Topology errors name their key without the ``topology.`` prefix, and an error
    about a bad prefix names only its first parts, so both directions of nesting match."""
    if not key_path:
        return None
    for cand in (key_path, "topology." + key_path):
        for k in keys:
            if cand == k or cand.startswith(k + ".") or k.startswith(cand + "."):
                return k
    return None


def in_entry(exc: ConfigError, where: str, set_path: str, own_sets, cli_sets=()) -> ConfigError:
    """An input error of one case or scenario, told as an error of its file: about one of
    its own ``set:`` entries (``own_sets``, as ``KEY=VALUE`` text) at ``set_path.KEY``, unless
    a ``--set`` of the command line (``cli_sets``) sets that key too; else with the file and
    entry (``where``) in front."""
    own = [s.partition("=")[0] for s in own_sets]
    cli = [s.partition("=")[0].strip() for s in cli_sets]
    key = set_key(exc.key_path, own)
    if key is not None and set_key(exc.key_path, cli) is None:
        return ConfigError(where, f"{set_path}.{key}", exc.value, exc.expected, exc.hint)
    return ConfigError(f"{where}: {exc.source}", exc.key_path, exc.value, exc.expected, exc.hint)
