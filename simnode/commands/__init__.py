"""Subcommands beyond the core ones of ``simnode.cli``: one module each, listed in
``simnode.cli.PLUGIN_COMMANDS``; each has ``register(subparsers)``."""

import argparse


def jobs_count(text: str) -> int:
    """argparse type of ``--jobs``: a count of worker processes, 0 = one per core."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 0 (0 = one per core)")
    return n
