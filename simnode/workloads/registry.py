"""Workload kinds: one small registry (duplicate names are an error, unknown ones list
the valid names).

A ``WorkloadKind`` declares its fields (``simnode.config.params.Param``: name, type,
unit, range, default or required, doc, origin) and a ``run(topology, params, options) ->
Result`` function. A kind whose kernel takes a parameter dataclass uses that class's
declarations (``params_of(GemmParams)``), so each parameter is declared once; others list
``Field(...)`` records. Fields are flat so ``--set name=value`` reaches any of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from simnode.config.fields import Reader, did_you_mean
from simnode.config.params import REQUIRED, Param
from simnode.errors import ConfigError

#: a parameter of a flat list, for kinds whose parameters are not a dataclass:
#: ``Field(name, type, default, doc, choices, min_value, max_value=, unit=, origin=)``
Field = Param.flat


@dataclass(frozen=True)
class WorkloadKind:
    """A registered workload kind: its fields, how it runs, and what the loader checks first."""
    name: str
    fields: tuple                                  #: Param records
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
    #: plain records the kind fills from its parameters (DeepEP's costs): they hold no
    #: defaults of their own, so the declaration here stays the only one (a test checks)
    records: tuple = ()
    #: a run's estimated time in seconds of one core (a rough model of the kind's work):
    #: cost(topology, params) -> float; with ``reference`` (a shipped run and its seconds),
    #: a run far above the reference is announced before it starts (``cost_note``)
    cost: Callable | None = None
    reference: "Reference | None" = None
    #: wall_share(topology, params) -> the share of ``cost`` left on the wall clock when the run
    #: may use two processes (RunOptions.jobs >= 2; DeepEP's combine beside dispatch), or None
    wall_share: Callable | None = None

    def all_fields(self, data: dict | None = None, source: str = "workload") -> tuple:
        if self.more_fields is None or data is None:
            return self.fields
        return self.fields + tuple(self.more_fields(data, source))

    def optional_keys(self, data: dict | None = None, source: str = "workload") -> tuple[str, ...]:
        return tuple(f.name for f in self.all_fields(data, source) if not f.required)

    def read_params(self, r: Reader) -> dict:
        return {f.name: f.read(r) for f in self.all_fields(r.data, r.source)}


@dataclass(frozen=True)
class Reference:
    """A kind's reference run (a shipped workload) and its time on one core, measured."""
    label: str                   #: "the published 4096x7168x16384 BF16 GEMM"
    seconds: float


#: a run estimated at this many times its kind's reference run, and at least this long, is
#: announced on stderr before it starts (off a terminal it would otherwise look like a hang)
LONG_RUN_FACTOR = 10.0
LONG_RUN_S = 60.0


def cost_note(kind: WorkloadKind, topology, params: dict, jobs: int = 1) -> str | None:
    """One line announcing a run far above its kind's reference run, or None; ``jobs``: the
    processes the run may use (RunOptions.jobs)."""
    if kind.cost is None or kind.reference is None:
        return None
    seconds = kind.cost(topology, params)
    ratio = seconds / kind.reference.seconds
    if ratio < LONG_RUN_FACTOR or seconds < LONG_RUN_S:
        return None
    share = kind.wall_share(topology, params) if jobs >= 2 and kind.wall_share is not None else 1.0
    wall, how = seconds * share, (" in two processes" if share < 1 else "")
    return (f"this run is estimated at ~{ratio:,.0f}x the work of {kind.reference.label} "
            f"(~{kind.reference.seconds:g} s of one core): expect ~{_duration(wall)}{how}; "
            f"--progress draws its progress line even off a terminal")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.0f} hours"


#: ``RunOptions.progress``: draw the progress line even when stderr is not a terminal
ALWAYS = "always"


@dataclass
class RunOptions:
    """How to run (tracing); not part of the workload's identity."""
    trace_path: str | None = None
    trace_scopes: list = field(default_factory=list)
    #: a progress line on stderr for long runs: False = none, True = on a terminal only,
    #: "always" = also when stderr is not a terminal (``--progress``)
    progress: bool | str = False
    #: processes the run may use for its independent parts (DeepEP's dispatch and combine are
    #: two separate simulations); 1 = all in this process. ``simnode run`` passes its --jobs
    jobs: int = 1


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
