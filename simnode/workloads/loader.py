"""Read a topology and a workload file, apply ``--set`` overrides, validate both.

``load_inputs(topology_path, workload_path, sets)`` returns a ``RunInputs``; keys
in ``sets`` starting with ``topology.`` go to the topology file's mapping, all
others to the workload's fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simnode.config.fields import Reader, load_yaml
from simnode.config.overrides import apply_overrides, parse_assignment
from simnode.config.topology import Topology, load_topology_raw, optional_keys, topology_from_mapping
from simnode.errors import ConfigError, DeadlockError, ScheduleError
from simnode.workloads.registry import WorkloadKind, get_kind

TOPOLOGY_PREFIX = "topology."


@dataclass(frozen=True)
class RunInputs:
    topology: Topology
    kind: WorkloadKind
    params: dict
    workload_source: str          #: the workload file, "(with --set overrides)" if any

    def run(self, options=None, name: str = "run"):
        """The kind's result; an impossible or deadlocked schedule names the workload."""
        try:
            return self.kind.run(self.topology, self.params, options, name=name)
        except (ScheduleError, DeadlockError) as exc:
            raise _in_workload(exc, self.workload_source) from None

    def build(self):
        """The kind's (params, schedule) without running it; errors as ``run``."""
        try:
            return self.kind.build(self.topology, self.params)
        except (ScheduleError, DeadlockError) as exc:
            raise _in_workload(exc, self.workload_source) from None


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


def load_inputs(topology_path, workload_path, sets=()) -> RunInputs:
    for name, path in (("TOPOLOGY", topology_path), ("WORKLOAD", workload_path)):
        if not str(path).strip():
            raise ConfigError(f"the {name} argument", "", str(path), f"a {name.lower()} YAML file path (it is empty)")
    work_sets, topo_sets = split_sets(list(sets) if not isinstance(sets, dict) else sets)
    topo_raw = load_topology_raw(topology_path)
    topo_src = str(topology_path)
    if topo_sets:
        topo_raw = apply_overrides(topo_raw, topo_sets, "--set topology.*", extra_keys=optional_keys())
        topo_src += " (with --set overrides)"
    topology = topology_from_mapping(topo_raw, topo_src)

    data = load_yaml(workload_path)
    src = str(workload_path)
    data = _resolve_paths(data, Path(workload_path).parent)
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
    params = kind.read_params(r)
    r.finish()
    if kind.needs_supernode and topology.supernode is None:
        raise ConfigError(str(topology_path), "supernode", "<missing>",
                          f"a supernode section: workload kind '{kind.name}' runs on a supernode")
    if kind.check is not None:
        kind.check(topology, params, src)
    return RunInputs(topology, kind, params, src)
