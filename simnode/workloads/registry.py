"""Workload kinds: one small registry (duplicate names are an error, unknown ones list
the valid names).

A ``WorkloadKind`` declares its fields (``Field``: name, type, default or required,
allowed values, doc) and a ``run(topology, params, options) -> Result`` function.
Fields are flat so ``--set name=value`` reaches any of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from simnode.config.fields import Reader, did_you_mean
from simnode.errors import ConfigError

REQUIRED = object()


@dataclass(frozen=True)
class Field:
    name: str
    type: str                    #: "int", "number", "bool", "str", "ints" (a list of int)
    default: Any = REQUIRED
    doc: str = ""
    choices: tuple = ()
    min_value: float | None = None

    def read(self, r: Reader):
        kw = {} if self.default is REQUIRED else {"default": self.default}
        if self.type == "int":
            return r.integer(self.name, min_value=self.min_value, **kw)
        if self.type == "number":
            return r.number(self.name, min_value=self.min_value, **kw)
        if self.type == "bool":
            return r.boolean(self.name, **kw)
        if self.type == "ints":
            return r.integer_list(self.name, min_value=self.min_value, **kw)
        return r.string(self.name, choices=self.choices or None, **kw)


@dataclass(frozen=True)
class WorkloadKind:
    name: str
    fields: tuple                                  #: Field records
    run: Callable                                  #: run(topology, params: dict, options) -> Result
    doc: str = ""
    needs_supernode: bool = False
    build: Callable | None = None                  #: build(topology, params) -> (params, KernelSchedule)
    check: Callable | None = None                  #: check(topology, params, source): raise ConfigError early
    #: more fields that depend on the workload's own values (a tile program's parameters):
    #: more_fields(data: dict, source: str) -> tuple of Field
    more_fields: Callable | None = None
    #: fields holding file paths: relative ones given in a workload file resolve against
    #: that file's folder (those given with --set, against the current folder)
    path_fields: tuple = ()

    def all_fields(self, data: dict | None = None, source: str = "workload") -> tuple:
        if self.more_fields is None or data is None:
            return self.fields
        return self.fields + tuple(self.more_fields(data, source))

    def optional_keys(self, data: dict | None = None, source: str = "workload") -> tuple[str, ...]:
        return tuple(f.name for f in self.all_fields(data, source) if f.default is not REQUIRED)

    def read_params(self, r: Reader) -> dict:
        return {f.name: f.read(r) for f in self.all_fields(r.data, r.source)}


@dataclass
class RunOptions:
    """How to run (tracing); not part of the workload's identity."""
    trace_path: str | None = None
    trace_scopes: list = field(default_factory=list)
    progress: bool = False      #: a progress line on stderr for long runs (drawn on a terminal only)


_KINDS: dict[str, WorkloadKind] = {}


def register(kind: WorkloadKind) -> WorkloadKind:
    if kind.name in _KINDS:
        raise ValueError(f"workload kind '{kind.name}' registered twice")
    _KINDS[kind.name] = kind
    return kind


def get_kind(name, source: str = "workload") -> WorkloadKind:
    from simnode.workloads.kinds import BUILTIN
    if isinstance(name, str) and name not in _KINDS and name in BUILTIN:
        importlib.import_module(BUILTIN[name])          # registers itself
    if not isinstance(name, str) or name not in _KINDS:
        valid = sorted(set(_KINDS) | set(BUILTIN))
        raise ConfigError(source, "kind", "<missing>" if name is None else name,
                          "one of " + ", ".join(valid), did_you_mean(str(name), valid))
    return _KINDS[name]


def all_kinds() -> dict[str, WorkloadKind]:
    from simnode.workloads.kinds import BUILTIN
    for module in BUILTIN.values():
        importlib.import_module(module)
    return dict(_KINDS)
