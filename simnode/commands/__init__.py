"""The subcommands of ``simnode``, one module each: argument parsing and printing.

A module with ``register(subparsers)`` is a command (``run``, ``sweep``, ``validate``,
``calibrate``, ``schedule``, ``describe``, ``report``, ``regress``): it adds its parser,
whose ``func`` default runs it and returns the exit code; ``ORDER`` places it in ``simnode
--help``. ``simnode.cli`` finds them here (``command_modules``), so adding a command is
adding a module. No module imports a command module but ``simnode.cli`` and this package.
The others serve them: ``options`` (the arguments several commands take), ``outdir`` (the
--out folders). What the commands run lives below them, in ``simnode.runs`` (the executor,
validation cases, regression baselines) and ``simnode.calibrate``.
"""

import importlib
import importlib.util


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
