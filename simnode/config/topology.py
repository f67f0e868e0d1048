"""Topology files: a chip, and optionally a supernode of such chips.

A topology file holds ``chip:`` -- either the chip mapping itself or the name of a
chip file in the same folder (``chip: ascend950dt`` reads ``ascend950dt.yaml``), so a
supernode references its chip instead of copying it -- and, for a supernode, a
``supernode:`` section read by ``simnode.config.supernode.supernode_from_mapping``.

``load_topology_raw`` resolves the chip reference into one raw mapping (so ``--set
topology.chip.memory.hbm_bandwidth_GBps=...`` works on either kind of file);
``topology_from_mapping`` validates it into a ``Topology``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simnode.config import params
from simnode.config.chip import ChipSpec, chip_from_mapping
from simnode.config.fields import Reader, load_yaml
from simnode.config.supernode import SupernodeSpec, supernode_from_mapping
from simnode.errors import ConfigError


@dataclass(frozen=True)
class Topology:
    """A validated topology: its chip, and its supernode (None for one chip)."""
    source: str
    chip: ChipSpec
    supernode: SupernodeSpec | None = None      #: None for one chip

    @property
    def num_ranks(self) -> int:
        return self.supernode.num_ranks if self.supernode is not None else 1


def load_topology_raw(path: str | Path) -> dict:
    """The file's mapping with a chip reference replaced by the referenced chip mapping."""
    return load_topology_files(path)[0]


def load_topology_files(path: str | Path) -> tuple[dict, str]:
    """``load_topology_raw``'s mapping, and the file its ``chip`` section came from."""
    path = Path(path)
    data = load_yaml(path)
    chip = data.get("chip")
    chip_file = str(path)
    if isinstance(chip, str):
        ref = path.parent / f"{chip}.yaml"
        if not ref.is_file():
            raise ConfigError(str(path), "chip", chip,
                              f"the name of a chip file next to it ({ref} does not exist)")
        chip_data = load_yaml(ref)
        if "chip" not in chip_data:
            raise ConfigError(str(ref), "chip", "<missing>", "a 'chip:' section")
        data = dict(data)
        data["chip"] = chip_data["chip"]
        chip_file = str(ref)
    return data, chip_file


def based_mapping(path: Path) -> dict | None:
    """The file's mapping if it names overlays (``base:``/``overlay:``,
    ``simnode.config.overlay.expand_topology``), None for anything else the loader reads (and
    reports) itself; an overlay given as a topology is an error. Here, not in the overlay
    module, so a run on a plain topology does not import that module."""
    if not path.is_file():
        return None
    data = load_yaml(path)
    if not isinstance(data, dict):
        return None
    if "values" in data and "overlay" in data and not isinstance(data["overlay"], (str, list)):
        raise ConfigError(str(path), "overlay", data["overlay"], "a topology file; this is a "
                          "calibration overlay: apply it with --topology-overlay FILE, or name it "
                          "in a topology file's overlay: key beside base: (the topology it was "
                          "fitted on)")
    return data if ("base" in data or "overlay" in data) else None


def optional_keys() -> tuple[str, ...]:
    """Dotted topology keys a file may leave out (their declarations give a default), which
    ``--set topology.KEY=...`` may therefore add."""
    return params.optional_keys(ChipSpec, "chip.") + params.optional_keys(SupernodeSpec, "supernode.")


def declared_keys() -> tuple[str, ...]:
    """Every dotted topology parameter (``chip.memory.hbm_bandwidth_GBps``,
    ``supernode.wqe_processing_ns``), from the declarations: what a ``topology.*`` key of an
    overlay may name."""
    return (tuple(k for k, _ in params.walk(ChipSpec, "chip."))
            + tuple(k for k, _ in params.walk(SupernodeSpec, "supernode.")))


def topology_from_mapping(data: dict, source: str) -> Topology:
    r = Reader(data, source)
    chip = chip_from_mapping(r.raw("chip"), source)
    supernode = None
    if r.has("supernode"):
        supernode = supernode_from_mapping(r.raw("supernode"), source)
    r.finish()
    return Topology(source, chip, supernode)


def load_topology(path: str | Path) -> Topology:
    return topology_from_mapping(load_topology_raw(path), str(path))
