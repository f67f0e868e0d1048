"""A run parsed once: topology and workload files plus ``--set`` overrides -> a ``RunSpec``.

``load_inputs(topology_path, workload_path, sets, seed=None)`` reads both files once,
applies the overrides (keys starting with ``topology.`` go to the topology file's mapping,
all others to the workload's fields), validates everything against the declarations
(``simnode.config.params``) and returns a ``RunSpec``: the resolved configuration and,
per parameter, where its value came from (``origins``: the file, ``--set``, a calibration
overlay or the declared default). ``overlays`` (``simnode.config.overlay.Overlay``, from
``--topology-overlay`` or ``sweep --band``) apply their fitted values before the
``--set`` overrides (which win); each must have been fitted on this topology file, and a
key of one that the run does not have is an error of the overlay file (``values.KEY``). A
topology file that names overlays (``base:``/``overlay:``, ``simnode.config.overlay``) is
read as its base with those overlays applied first, by the same path. A ``RunSpec`` pickles, so a sweep's worker, a Dask cluster or the
validation and regression pools run exactly what the parent parsed; nothing reads a file
again (a tile program is imported where it runs, by its resolved path).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from simnode.config import params as declarations
from simnode.config.fields import Reader, load_yaml
from simnode.config.overrides import apply_overrides, assignment_text, parse_assignment
from simnode.config.topology import (Topology, based_mapping, load_topology_files, optional_keys,
                                     topology_from_mapping)
from simnode.errors import ConfigError, DeadlockError, ScheduleError
from simnode.workloads.registry import WorkloadKind, get_kind

TOPOLOGY_PREFIX = "topology."
#: ``RunSpec.origins`` values besides a file path
FROM_SET, FROM_DEFAULT = "--set", "default"
#: ``RunSpec.origins`` of a value an overlay sets: this prefix, then the overlay's path
FROM_OVERLAY = "overlay "


@dataclass(frozen=True)
class RunSpec:
    """One run, resolved: see the module docstring."""
    topology: Topology
    kind_name: str
    params: dict                  #: the workload's fields, defaults filled
    workload_source: str          #: the workload file, "(with --set overrides)" if any
    topology_path: str = ""
    workload_path: str = ""
    sets: tuple = ()              #: the overrides as ``key=value`` text, in the order given
    #: where each value came from, by dotted key ("chip.memory.hbm_bandwidth_GBps",
    #: "supernode.num_ranks", "workload.seed"): a file path, FROM_SET or FROM_DEFAULT
    origins: dict = field(default_factory=dict, compare=False)
    #: the calibration overlays applied (``Overlay`` records), in order
    overlays: tuple = ()

    @property
    def kind(self) -> WorkloadKind:
        return get_kind(self.kind_name)

    @property
    def name(self) -> str:
        """The run's name in results: the workload file's stem."""
        return Path(self.workload_path).stem if self.workload_path else self.kind_name

    @property
    def key(self) -> tuple:
        """What makes two runs the same run (validation cases sharing one run)."""
        return (self.topology_path, self.workload_path, self.sets,
                tuple(o.path for o in self.overlays))

    def run(self, options=None, name: str | None = None):
        """The kind's result, recording the seed it ran with (kinds with a seed field); an
        impossible or deadlocked schedule names the workload."""
        try:
            result = self.kind.run(self.topology, self.params, options, name=name or self.name)
        except (ScheduleError, DeadlockError) as exc:
            raise _in_workload(exc, self.workload_source) from None
        if "seed" in self.params:
            result = dataclasses.replace(result, seed=self.params["seed"])
        return result

    def build(self):
        """The kind's (params, schedule) without running it; errors as ``run``."""
        try:
            return self.kind.build(self.topology, self.params)
        except (ScheduleError, DeadlockError) as exc:
            raise _in_workload(exc, self.workload_source) from None

    def estimated_s(self) -> float:
        """The run's estimated time in seconds of one core (0 if its kind gives none)."""
        return self.kind.cost(self.topology, self.params) if self.kind.cost is not None else 0.0

    def cost_note(self, jobs: int = 1) -> str | None:
        """One line announcing a run far above its kind's reference run, or None (``jobs``:
        the processes the run may use)."""
        from simnode.workloads.registry import cost_note
        return cost_note(self.kind, self.topology, self.params, jobs)

    def resolved(self) -> dict:
        """The configuration the run reads, from the declarations (JSON-ready)."""
        topo = {"chip": declarations.resolved(self.topology.chip)}
        if self.topology.supernode is not None:
            topo["supernode"] = declarations.resolved(self.topology.supernode)
        return {"topology": topo, "workload": {"kind": self.kind_name,
                                               **{k: _plain(v) for k, v in self.params.items()}}}


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _in_workload(exc: Exception, source: str) -> Exception:
    """The same error with the workload it came from in front of its message."""
    return type(exc)(f"{source}: {exc}")


def _resolve_paths(data: dict, folder: Path) -> dict:
    """Relative paths in a workload file's path fields, made relative to the file's folder."""
    try:
        kind = get_kind(data.get("kind"), "workload")
    except ConfigError:
        return data                  # named properly when the kind is read below
    out = data
    for key in kind.path_fields:
        value = data.get(key)
        if isinstance(value, str) and value.strip() and not Path(value).is_absolute():
            out = dict(out)
            out[key] = str(folder / value)
    return out


def split_sets(sets: list[str] | dict) -> tuple[dict, dict]:
    """Separate ``--set`` assignments into (workload, topology) dicts."""
    pairs = sets.items() if isinstance(sets, dict) else (parse_assignment(s) for s in sets)
    work, topo = {}, {}
    for key, value in pairs:
        if key.startswith(TOPOLOGY_PREFIX):
            topo[key[len(TOPOLOGY_PREFIX):]] = value
        else:
            work[key] = value
    return work, topo


def _origins(topology: Topology, topo_raw: dict, topo_sets: dict, topo_files: dict,
             data: dict, work_sets: dict, work_path: str, fields) -> dict:
    def has(mapping, dotted):
        node = mapping
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    def origin(dotted, raw, sets, path):
        if any(dotted == k or dotted.startswith(k + ".") for k in sets):
            return FROM_SET
        return path if has(raw, dotted) else FROM_DEFAULT

    out = {}
    specs = [("chip", topology.chip)] + ([("supernode", topology.supernode)]
                                         if topology.supernode is not None else [])
    for section, spec in specs:
        for key, _ in declarations.walk(type(spec), section + "."):
            out[key] = origin(key, topo_raw, topo_sets, topo_files[section])
    for f in fields:
        out[f"workload.{f.name}"] = origin(f.name, data, work_sets, work_path)
    return out


def _topology(topology_path, topo_sets: dict) -> tuple[Topology, dict, str]:
    """The validated topology, its raw mapping after the overrides, and its chip's file."""
    topo_raw, chip_file = load_topology_files(topology_path)
    topo_src = str(topology_path)
    if topo_sets:
        topo_raw = apply_overrides(topo_raw, topo_sets, "--set topology.*", extra_keys=optional_keys())
        topo_src += " (with --set overrides)"
    return topology_from_mapping(topo_raw, topo_src), topo_raw, chip_file


def load_topology_only(topology_path, sets=(), overlays=()) -> tuple[Topology, dict]:
    """A topology file with ``topology.*`` overrides (and the ``topology.*`` values of
    ``overlays``, applied first): the topology and its ``origins``."""
    if not str(topology_path).strip():
        raise ConfigError("the TOPOLOGY argument", "", str(topology_path),
                          "a topology YAML file path (it is empty)")
    work_sets, topo_sets = split_sets(list(sets))
    if work_sets:
        key = next(iter(work_sets))
        raise ConfigError("--set", key, work_sets[key], "a topology.* key (no WORKLOAD is given, "
                          "so there are no workload fields to set)")
    topology_path, overlays = with_named_overlays(topology_path, overlays)
    check_overlays(overlays, topology_path)
    over = {}
    from_overlay = {}
    for o in overlays:
        for key, value in o.values.items():
            if key.startswith(TOPOLOGY_PREFIX):      # workload values need a WORKLOAD
                over[key[len(TOPOLOGY_PREFIX):]] = value
                from_overlay[key[len(TOPOLOGY_PREFIX):]] = FROM_OVERLAY + o.path
    try:
        topology, raw, chip_file = _topology(topology_path, {**over, **topo_sets})
    except ConfigError as exc:
        raise _in_overlay(exc, overlays, sets) from None
    origins = _origins(topology, raw, {**over, **topo_sets}, {"chip": chip_file,
                                                              "supernode": str(topology_path)}, {}, {}, "", ())
    for key, where in from_overlay.items():
        if key in origins and not any(key == k or key.startswith(k + ".") for k in topo_sets):
            origins[key] = where
    return topology, origins


def load_inputs(topology_path, workload_path, sets=(), seed: int | None = None,
                overlays=()) -> RunSpec:
    """Parse one run (see the module docstring); ``seed`` is ``--seed``: the same as
    ``--set seed=N`` for a kind with a seed field, and an error together with it."""
    for name, path in (("TOPOLOGY", topology_path), ("WORKLOAD", workload_path)):
        if not str(path).strip():
            raise ConfigError(f"the {name} argument", "", str(path), f"a {name.lower()} YAML file path (it is empty)")
    if isinstance(sets, dict):                  # {key: typed value}, as validation cases give them
        sets = [assignment_text(k, v) for k, v in sets.items()]
    given = str(topology_path)
    topology_path, overlays = with_named_overlays(topology_path, overlays)
    if overlays:
        check_overlays(overlays, topology_path)
        try:
            spec = _load(topology_path, workload_path, list(sets), seed, overlays)
        except ConfigError as exc:
            raise _in_overlay(exc, overlays, sets) from None
    else:
        spec = _load(topology_path, workload_path, list(sets), seed, ())
    # the path the user gave (a file naming overlays shows as itself; its overlays are listed)
    return dataclasses.replace(spec, topology_path=given) if given != topology_path else spec


def with_named_overlays(topology_path, overlays=()) -> tuple[str, tuple]:
    """(the topology file itself, the overlays to apply): those a topology file names in
    its ``overlay:`` key (``simnode.config.overlay.expand_topology``) first, then ``overlays``
    (``--topology-overlay``, ``sweep --band``; one named by both applies once)."""
    if not overlays and based_mapping(Path(topology_path)) is None:
        return str(topology_path), ()           # (as expand_topology: a plain file is itself)
    from simnode.config.overlay import expand_topology
    base, named = expand_topology(topology_path)
    rest = tuple(o for o in overlays if not any(same_file(o.path, n.path) for n in named))
    return base, tuple(named) + rest


def check_overlays(overlays, topology_path) -> None:
    """Each overlay was fitted on ``topology_path`` (the same file; for a file that names
    overlays, its base), else an error naming it."""
    from simnode.config.overlay import expand_topology
    topology_path = expand_topology(topology_path)[0]
    for o in overlays:
        if not same_file(o.base_path(), topology_path):
            raise ConfigError(o.path, "topology", o.topology,
                              f"the topology this run uses ({topology_path}): an overlay's values "
                              f"were fitted on one topology and apply to it alone")


def same_file(a, b) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _in_overlay(exc: ConfigError, overlays, sets) -> ConfigError:
    """An error about a key an overlay sets (and no --set overrides) named in the overlay."""
    mine = [s.partition("=")[0].strip() for s in sets]
    for o in reversed(overlays):
        for key in o.values:
            for cand in (exc.key_path, TOPOLOGY_PREFIX + exc.key_path):
                if exc.key_path and (cand == key or cand.startswith(key + ".")) and key not in mine:
                    return ConfigError(o.path, f"values.{key}", exc.value, exc.expected, exc.hint)
    return exc


def _load(topology_path, workload_path, sets: list, seed, overlays: tuple) -> RunSpec:
    set_text = tuple(sets)
    over = [s for o in overlays for s in o.sets()]
    over_work, over_topo = split_sets(over)
    user_work, user_topo = split_sets(sets)
    work_sets, topo_sets = {**over_work, **user_work}, {**over_topo, **user_topo}
    from_overlay = {}
    for o in overlays:
        for key in o.values:
            from_overlay[key[len(TOPOLOGY_PREFIX):] if key.startswith(TOPOLOGY_PREFIX)
                         else "workload." + key] = FROM_OVERLAY + o.path
    topology, topo_raw, chip_file = _topology(topology_path, topo_sets)

    data = load_yaml(workload_path)
    src = str(workload_path)
    data = _resolve_paths(data, Path(workload_path).parent)
    file_data = data
    if seed is not None:
        work_sets = _with_seed(work_sets, seed, data, src)
        set_text += (f"seed={seed}",)
    if work_sets:
        # the kind (possibly overridden) decides which optional fields --set may add; the
        # workload's values with the plain --set values decide a kind's extra fields
        kind_name = work_sets.get("kind", data.get("kind"))
        kind = get_kind(kind_name, "--set" if "kind" in work_sets else src)
        probe = {**data, **{k: v for k, v in work_sets.items() if "." not in k}}
        data = apply_overrides(data, work_sets, "--set", extra_keys=kind.optional_keys(probe, "--set"))
        src += " (with --set overrides)"
    kind = get_kind(data.get("kind"), src)
    r = Reader(data, src)
    r.string("kind")
    fields = kind.all_fields(r.data, r.source)
    params = {f.name: f.read(r) for f in fields}
    r.finish()
    if kind.needs_supernode and topology.supernode is None:
        raise ConfigError(str(topology_path), "supernode", "<missing>",
                          f"a supernode section: workload kind '{kind.name}' runs on a supernode")
    if kind.check is not None:
        kind.check(topology, params, src)
    origins = _origins(topology, topo_raw, topo_sets, {"chip": chip_file, "supernode": str(topology_path)},
                       file_data, work_sets, str(workload_path), fields)
    user_keys = set(user_topo) | {"workload." + k for k in user_work}
    for key, where in from_overlay.items():
        if key in origins and not any(key == k or key.startswith(k + ".") for k in user_keys):
            origins[key] = where
    return RunSpec(topology, kind.name, params, src, str(topology_path), str(workload_path),
                   set_text, origins, overlays)


def _with_seed(work_sets: dict, seed: int, data: dict, source: str) -> dict:
    """``--seed N`` as the ``seed`` field: only for a kind that has one, never beside ``--set seed=``."""
    if "seed" in work_sets:
        raise ConfigError("--seed", "seed", seed, f"either --seed or --set seed=, not both (--set "
                          f"seed={work_sets['seed']!r} is given too, and one would silently win)")
    kind = get_kind(work_sets.get("kind", data.get("kind")), source)
    if "seed" not in {f.name for f in kind.all_fields(data, source)}:
        raise ConfigError("--seed", "seed", seed,
                          f"a workload kind with a seed field ('{kind.name}' has none)")
    return {**work_sets, "seed": seed}
