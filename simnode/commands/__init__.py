"""Subcommands beyond the core ones of ``simnode.cli``: one module each, listed in
``simnode.cli.PLUGIN_COMMANDS``; each has ``register(subparsers)``."""
