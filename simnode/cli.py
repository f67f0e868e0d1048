"""Simulate an Ascend 950-class supernode: ``simnode COMMAND ...``.

Every command is a module of ``simnode.commands`` (run, sweep, validate, calibrate,
schedule, describe, report, regress; ``simnode COMMAND --help``), found there, not listed
here. This module builds the parser and turns what goes wrong into what a user should see:

- user mistakes (bad files, keys, values, impossible schedules; ``SimnodeError``) and
  usage errors print one line naming what is wrong and exit 2, without a traceback;
- Ctrl-C prints one line and exits 130 (the executor has stopped any workers); SIGTERM
  the same way, exit 143 (``simnode.runs.signals.sigterm_as_interrupt``);
- a write the file system refuses (a full disk) is one line, exit 2.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys

# OpenBLAS starts one thread per core when numpy is imported (~0.1 s of CPU, a quarter of a
# short run); simnode's only BLAS calls are the calibration solver's small matrix products
# and solves, which OpenBLAS runs on one thread at these sizes anyway (the same results).
# Set before anything imports numpy; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# numpy advises the kernel to back arrays of >= 4 MiB with huge pages; with THP "madvise" a
# fault in such an array may compact memory first. A large network run allocates arrays of
# its ~10^6 classes at every wake, where the compaction costs seconds of system time (DeepEP
# EP512: ~2.5 s with the advice, ~1 s without; user time and peak memory alike).
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

from simnode.errors import SimnodeError  # noqa: E402

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130      # 128 + SIGINT, as shells report it
EXIT_TERMINATED = 143       # 128 + SIGTERM, as shells report it


class _Parser(argparse.ArgumentParser):
    """argparse, except that a usage error is one line (the command's --help has the rest)."""

    def error(self, message: str):
        self.exit(EXIT_USER_ERROR, f"simnode: error: {self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with ``argv`` naming a command (its first word), of that
    command only: importing the others (their multiprocessing, csv, report modules: ~0.1 s)
    is not needed to run one. Anything else (no command, --help, a misspelt name) gets them
    all, so its usage message lists every command."""
    from simnode.commands import command_module, command_modules
    parser = _Parser(prog="simnode", description="Simulate an Ascend 950-class supernode: its chips' "
                     "pipes, L2, HBM and the network that joins them, on one clock.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    one = command_module(argv[0]) if argv else None
    for module in [one] if one is not None else command_modules():
        module.register(sub)
    return parser


#: what a file system says when an output cannot be written
_FILE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS,
                errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EIO}


def _exit_now(rc: int) -> None:
    """End this process now, its output flushed: a command that closed every file it wrote
    (``simnode run``) skips the interpreter's teardown, which frees a large run's millions of
    objects one by one and unloads numba's compiler (~0.35 s of an EP128 DeepEP run's 2.7 s)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:             # the reader went away: as main's handler, not an error
        pass
    os._exit(rc)


def main(argv: list[str] | None = None) -> int:
    from simnode.runs.signals import Terminated, sigterm_as_interrupt
    try:
        with sigterm_as_interrupt():
            args = build_parser(sys.argv[1:] if argv is None else argv).parse_args(argv)
            rc = args.func(args)
        if argv is None and getattr(args, "fast_exit", False):
            _exit_now(rc)
        return rc
    except Terminated:
        print("simnode: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("simnode: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SimnodeError as exc:
        print(f"simnode: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:
        # the reader went away (`simnode schedule ... | head`): not an error of ours; point
        # stdout at devnull so the interpreter's final flush does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        # the file system refused a write the checks before the run could not foresee (a full
        # disk, /dev/full, a folder removed mid-run): the user's to fix. Any other OSError is
        # not a user mistake and keeps its traceback.
        if exc.errno not in _FILE_ERRNOS:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        print(f"simnode: error: could not write the output{where}: {exc.strerror or exc}.",
              file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
