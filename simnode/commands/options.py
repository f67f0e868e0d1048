"""The arguments several commands take, declared once, and their checks.

Not a command itself (it has no ``register``): the command modules import it, never each
other. ``count`` and ``jobs_count`` are argparse types (a non-negative integer, or a
one-line usage error naming the value); ``add_list`` declares a repeatable option, and
``add_sets``, ``add_overlays``, ``add_only`` and ``add_jobs`` the ones most commands share,
each with the command's own help; ``add_inputs`` declares TOPOLOGY, WORKLOAD, ``--set`` and
``--topology-overlay`` as run, sweep and schedule take them. ``overlays_of(args)`` loads the
``--topology-overlay`` files; ``cases_path`` and ``check_output_path`` check a path option
before anything runs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from simnode.errors import ConfigError

#: the help of --jobs where it is the number of worker processes
WORKERS = "worker processes (0 = one per core)"


def count(text: str) -> int:
    """argparse type of a count: an integer >= 0."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 0")
    return n


def jobs_count(text: str) -> int:
    """argparse type of ``--jobs``: a count of worker processes, 0 = one per core."""
    try:
        return count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 0 (0 = one per core)") from None


def add_list(p, flag: str, metavar: str, help: str, dest: str | None = None) -> None:
    """A repeatable option: every use appends its value to a list (empty if never used)."""
    p.add_argument(flag, dest=dest, action="append", default=[], metavar=metavar, help=help)


def add_sets(p, help: str) -> None:
    """``--set KEY=VALUE``, repeatable, into ``args.sets``."""
    add_list(p, "--set", "KEY=VALUE", help, dest="sets")


def add_overlays(p, help: str) -> None:
    """``--topology-overlay FILE``, repeatable, into ``args.overlays`` (``overlays_of``)."""
    add_list(p, "--topology-overlay", "FILE", help, dest="overlays")


def add_only(p, help: str) -> None:
    """``--only PATTERN``, repeatable: the ids (cases, scenarios) to keep, as globs."""
    add_list(p, "--only", "PATTERN", help)


def add_jobs(p, help: str = WORKERS) -> None:
    """``--jobs N`` (``jobs_count``), default 0."""
    p.add_argument("--jobs", type=jobs_count, default=0, help=help)


def add_inputs(p) -> None:
    """TOPOLOGY, WORKLOAD, --set and --topology-overlay, as run, sweep and schedule take them."""
    p.add_argument("topology", help="topology YAML (topologies/...)")
    p.add_argument("workload", help="workload YAML (workloads/...)")
    add_sets(p, "override a workload field (m=128) or a topology field "
                "(topology.chip.memory.hbm_bandwidth_GBps=5000); repeatable")
    add_overlays(p, "a calibration overlay written by `simnode calibrate` (topologies/calibrated/"
                    "...), applied before --set; repeatable")


def overlays_of(args) -> tuple:
    """The ``--topology-overlay`` files of ``args``, loaded and checked."""
    files = getattr(args, "overlays", ())
    if not files:               # (the overlay module's dataclasses cost ~3 ms to import)
        return ()
    from simnode.config.overlay import load_overlay
    return tuple(load_overlay(o) for o in files)


def cases_path(option: str | None) -> Path:
    """The cases file of ``--cases`` (None: the shipped validation/published.yaml); an
    empty path is an error, never the shipped file."""
    from simnode.runs.cases import DEFAULT_CASES
    if option is None:
        return DEFAULT_CASES
    if not str(option).strip():
        raise ConfigError("--cases", "cases", option, "a cases file path (it is empty)")
    return Path(option)


def check_output_path(path: str, option: str) -> None:
    """Reject an output file whose folder does not exist before running, not with a traceback after."""
    if not str(path).strip():
        raise ConfigError(option, option.lstrip("-"), path, "a file path (it is empty)")
    p = Path(path)
    folder = p.parent
    if not folder.is_dir():
        raise ConfigError(option, option.lstrip("-"), path,
                          f"a file in an existing folder ({folder} is not one)")
    if p.is_dir():
        raise ConfigError(option, option.lstrip("-"), path, "a file path (this is a folder)")
    # can it be written? Probe only what a probe cannot disturb: an existing regular file is
    # opened for append (nothing written), a new one needs a writable folder; a pipe, a device
    # or a symlink is left to the run (opening a pipe would hand its reader an end of file)
    if p.is_file() and not p.is_symlink():
        try:
            with open(p, "ab"):
                pass
        except OSError as exc:
            raise ConfigError(option, option.lstrip("-"), path,
                              f"a file simnode can write ({exc.strerror})") from None
    elif not p.exists() and not p.is_symlink() and not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(option, option.lstrip("-"), path,
                          f"a file in a folder simnode can write to ({folder} is not one)")
