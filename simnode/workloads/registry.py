"""Workload kinds: plug-ins found by name, as the commands are (``simnode.commands``).

A kind is one module that defines a module-level ``KIND = WorkloadKind(...)``: its fields
(``simnode.config.params.Param``: name, type, unit, range, default or required, doc,
origin), its size check, its ``run(topology, params, options) -> Result`` and its cost
estimate. A kind whose kernel takes a parameter dataclass uses that class's declarations
(``params_of(GemmParams)``), so each parameter is declared once; others list ``Field(...)``
records. Fields are flat so ``--set name=value`` reaches any of them.

A kind's name is its module's name, and the registry finds it without a table:

- in simnode: ``simnode/workloads/kinds/<name>.py`` (``importlib.util.find_spec`` finds
  that one module; ``names()`` lists the package without importing it; a module whose name
  starts with ``_`` is not a kind);
- out of tree: the environment variable ``SIMNODE_KINDS`` names more kind modules,
  comma-separated, each a dotted module name importable from ``sys.path`` or a path to a
  ``.py`` file (relative to the current folder)::

      SIMNODE_KINDS=mylab.kinds.ring,./toy_ring.py simnode run topo.yaml ring.yaml

  nothing in simnode is edited. The processes a run starts (sweep, validation and
  regression workers) inherit the variable; a Dask worker on another machine needs it set
  there, with the module importable.

A kind's module is imported when its kind is first asked for (``get_kind``), so a run
imports only its own kind; ``all_kinds()`` imports every one. Names are unique: a kind
named twice (a plug-in named like a kind of simnode, two plug-ins of one name, a second
``register`` of a name) is refused, and so is a module whose ``KIND`` is missing or names
another kind; an unknown name is an error that lists the valid ones, with a did-you-mean.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from simnode.config.fields import did_you_mean
from simnode.config.params import Param
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


#: the package whose modules are simnode's own kinds
KINDS_PACKAGE = "simnode.workloads.kinds"
#: the environment variable naming out-of-tree kind modules (module docstring)
PLUGINS_VARIABLE = "SIMNODE_KINDS"
PLUGINS_SOURCE = f"the {PLUGINS_VARIABLE} environment variable"

_KINDS: dict[str, WorkloadKind] = {}


def register(kind: WorkloadKind) -> WorkloadKind:
    """Add ``kind`` to the registry; a second kind of the same name is refused."""
    if kind.name in _KINDS:
        raise ValueError(f"workload kind '{kind.name}' registered twice")
    _KINDS[kind.name] = kind
    return kind


def get_kind(name, source: str = "workload") -> WorkloadKind:
    """The kind named ``name``, its module imported on first use; ``source`` names the
    file (or flag) that gave the name in the error for an unknown one."""
    module = _module_of(name) if isinstance(name, str) else None
    if module is not None:
        return _load(name, module)
    if isinstance(name, str) and name in _KINDS:          # registered by a call to ``register``
        return _KINDS[name]
    valid = names()
    raise ConfigError(source, "kind", "<missing>" if name is None else name,
                      "one of " + ", ".join(valid), did_you_mean(str(name), valid))


def all_kinds() -> dict[str, WorkloadKind]:
    """Every kind by name, sorted (each kind's module imported)."""
    for name in names():
        get_kind(name)
    return dict(sorted(_KINDS.items()))


def names() -> list[str]:
    """Every kind's name, sorted, without importing any kind."""
    import pkgutil
    package = importlib.import_module(KINDS_PACKAGE)
    own = {m.name: f"{KINDS_PACKAGE}.{m.name}" for m in pkgutil.iter_modules(package.__path__)
           if not m.name.startswith("_")}
    plugins = _plugins()
    both = sorted(set(own) & set(plugins))
    if both:
        raise _clash(both[0], own[both[0]], plugins[both[0]])
    return sorted(set(own) | set(plugins) | set(_KINDS))


def _plugins() -> dict[str, str]:
    """Kind name -> module (dotted name or .py path) of each kind ``SIMNODE_KINDS`` names."""
    out = {}
    for entry in os.environ.get(PLUGINS_VARIABLE, "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        name = Path(entry).stem if entry.endswith(".py") else entry.rpartition(".")[2]
        if name in out:
            raise ConfigError(PLUGINS_SOURCE, name, entry,
                              f"one module per kind name ({out[name]} is a kind '{name}' too)")
        out[name] = entry
    return out


def _module_of(name: str) -> str | None:
    """The module holding kind ``name`` (simnode's own, or a plug-in), or None."""
    own = None
    if name.isidentifier() and not name.startswith("_") \
            and importlib.util.find_spec(f"{KINDS_PACKAGE}.{name}") is not None:
        own = f"{KINDS_PACKAGE}.{name}"
    plugin = _plugins().get(name)
    if plugin is not None and own is not None:
        raise _clash(name, own, plugin)
    return plugin or own


def _clash(name: str, own: str, plugin: str) -> ConfigError:
    return ConfigError(PLUGINS_SOURCE, name, plugin, f"a kind name simnode does not have already "
                       f"({own} is the kind '{name}')")


def kind_module(name: str):
    """The module that defines kind ``name`` (imported), or None for a name no module holds."""
    module = _module_of(name)
    return None if module is None else _import_kind(name, module)


def _load(name: str, module: str) -> WorkloadKind:
    """The ``KIND`` of kind ``name``'s module, registered (the module imported once)."""
    kind = getattr(_import_kind(name, module), "KIND", None)
    if not isinstance(kind, WorkloadKind) or kind.name != name:
        found = f"a kind named '{kind.name}'" if isinstance(kind, WorkloadKind) else repr(kind)
        raise ConfigError(module, "KIND", found, f"a WorkloadKind named '{name}' (a kind's name "
                          f"is its module's name)")
    if _KINDS.get(name) is not kind:
        register(kind)
    return kind


def _import_kind(name: str, module: str):
    return _import_file(name, module) if module.endswith(".py") else _import(module)


def _import(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            raise                                   # the module's own imports failed
        raise ConfigError(PLUGINS_SOURCE, "", module,
                          "a module importable from sys.path (or a path to a .py file)") from None


def _import_file(name: str, path: str):
    """A plug-in given as a file, imported once as the module ``simnode_kind_<name>``."""
    if not Path(path).is_file():
        raise ConfigError(PLUGINS_SOURCE, "", path, "an existing Python file (.py)")
    module, resolved = f"simnode_kind_{name}", Path(path).resolve()
    loaded = sys.modules.get(module)
    if loaded is not None and getattr(loaded, "__file__", None) == str(resolved):
        return loaded
    spec = importlib.util.spec_from_file_location(module, resolved)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[module]
        raise
    return mod
