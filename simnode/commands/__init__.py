"""The subcommands of ``simnode``, one module each, and what they share.

A module with ``register(subparsers)`` is a command (``run``, ``sweep``, ``validate``,
``schedule``, ``describe``, ``report``, ``regress``): it adds its parser, whose ``func``
default runs it and returns the exit code; ``ORDER`` places it in ``simnode --help``.
``simnode.cli`` finds them here (``command_modules``), so adding a command is adding a
module. The others serve them: ``executor`` (the one executor of runs), ``outdir`` (the
--out folders), ``baselines`` (regression scenarios and baselines).

``jobs_count`` and ``count`` are argparse types: a non-negative integer, or a one-line
usage error naming the value.
"""

import argparse
import importlib
import importlib.util


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


def command_module(name: str):
    """The command module named ``name`` (a command's name is its module's), or None if no
    module of this package registers a command by that name."""
    # find_spec looks for that one module (listing the package with pkgutil, and importing
    # pkgutil, cost a run's start-up more); a folder without __init__ has no ``register``
    if not name.isidentifier() or name == "__init__" \
            or importlib.util.find_spec(f"{__name__}.{name}") is None:
        return None
    mod = importlib.import_module(f"{__name__}.{name}")
    return mod if hasattr(mod, "register") else None


def command_modules() -> list:
    """Every command module of this package, in ``ORDER`` (then by name)."""
    import pkgutil
    mods = []
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "register"):
            mods.append(mod)
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 100), m.__name__))
