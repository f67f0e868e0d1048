"""Simulate an Ascend 950-class supernode: run, sweep, validate, schedule, report, regress.

``simnode run TOPOLOGY WORKLOAD [--set KEY=VALUE ...] [--json] [--trace FILE]``
runs one workload and prints its result as a table (or one JSON object).
``simnode sweep TOPOLOGY WORKLOAD --param FIELD=V1,V2 ...`` runs the grid in parallel
processes and prints a table (``--json``: a list of result objects).
``--out DIR`` (run and sweep) also writes the output folder of ``simnode.commands.outdir``.
``simnode validate`` runs every published case and prints model vs published (exit 1
if any case leaves its tolerance; ``--json``: one object with a row per case).
``simnode schedule TOPOLOGY WORKLOAD [--core N]`` prints the instruction lists a
chip workload would run, without running them.
``simnode report DIR`` and ``simnode regress`` live in ``simnode/commands/``.

User mistakes (bad files, keys, values, impossible schedules) print one paragraph
naming what is wrong and exit 2, without a traceback.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys

import importlib

from simnode.commands import jobs_count
from simnode.errors import SimnodeError

#: further subcommands, one module each in simnode/commands/: ``register(subparsers)`` adds
#: a parser whose ``func`` default runs it (returns the exit code)
PLUGIN_COMMANDS: tuple[str, ...] = ("report", "regress", "describe")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("topology", help="topology YAML (topologies/...)")
    p.add_argument("workload", help="workload YAML (workloads/...)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a workload field (m=128) or a topology field "
                        "(topology.chip.memory.hbm_bandwidth_GBps=5000); repeatable")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simnode", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one workload and print its result")
    _add_common(run)
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument("--out", metavar="DIR", help="write result.json, config.json (simnode.commands.outdir)")
    run.add_argument("--trace", metavar="FILE", help="write a Chrome Trace Event JSON file (gzip-compressed if FILE "
                          "ends in .gz; Perfetto opens both)")
    run.add_argument("--trace-scope", action="append", default=[], metavar="PATTERN",
                     help="trace only threads matching this fnmatch pattern (core00.*); repeatable")
    run.add_argument("--seed", type=int, default=None,
                     help="random seed: the same as --set seed=N, for kinds with a seed field")
    sweep = sub.add_parser("sweep", help="run a grid of --param values in parallel")
    _add_common(sweep)
    sweep.add_argument("--param", dest="params", action="append", default=[],
                       metavar="FIELD=V1,V2,...", help="a swept field (as --set); repeatable: "
                       "the grid is their cartesian product")
    sweep.add_argument("--jobs", type=jobs_count, default=0, help="worker processes (0 = one per core)")
    sweep.add_argument("--json", action="store_true", help="print a JSON list of result objects")
    sweep.add_argument("--out", metavar="DIR", help="write sweep.json, results.csv, points/ (simnode.commands.outdir)")
    sweep.add_argument("--executor", default="local", help="local (worker processes) or dask")
    sweep.add_argument("--address", metavar="HOST:PORT", help="dask scheduler (default: a local cluster)")
    val = sub.add_parser("validate", help="compare the model with every published figure")
    val.add_argument("--cases", default=None, metavar="FILE",
                     help="validation file (default: validation/published.yaml of this checkout)")
    val.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                     help="an override applied to every case (e.g. a what-if on the hardware)")
    val.add_argument("--jobs", type=jobs_count, default=0, help="worker processes (0 = one per core)")
    val.add_argument("--only", action="append", default=[], metavar="PATTERN",
                     help="run only cases whose id matches this glob (deepep-*); repeatable")
    val.add_argument("--json", action="store_true",
                     help="print one JSON object (a row per case, then the summary); same exit code")
    sched = sub.add_parser("schedule", help="print a chip workload's schedule without running it")
    _add_common(sched)
    sched.add_argument("--core", type=int, default=0, help="which core to list (default: 0)")
    sched.add_argument("--max-per-pipe", type=int, default=20, help="records shown per pipe")
    run.set_defaults(func=cmd_run)
    sweep.set_defaults(func=cmd_sweep)
    val.set_defaults(func=cmd_validate)
    sched.set_defaults(func=cmd_schedule)
    for name in PLUGIN_COMMANDS:
        importlib.import_module(f"simnode.commands.{name}").register(sub)
    return parser


def cmd_run(args) -> int:
    from simnode.commands.executor import execute
    from simnode.kernels.isa import PIPE_NAMES
    from simnode.commands.outdir import check_out_dir, write_run
    from simnode.report.result import format_table, to_json
    from simnode.workloads.loader import load_inputs
    from simnode.workloads.registry import RunOptions
    inputs = load_inputs(args.topology, args.workload, args.sets, seed=args.seed)
    if args.trace_scope and args.trace is None:
        from simnode.errors import ConfigError
        raise ConfigError("--trace-scope", "trace-scope", args.trace_scope[0],
                          "--trace FILE as well (the scope narrows a trace, and none was asked for)")
    if args.trace is not None:
        _check_output_path(args.trace, "--trace")
    if args.out is not None:
        check_out_dir(args.out, "run")
    opts = RunOptions(args.trace, args.trace_scope, progress=True)
    result = execute([inputs], jobs=1, progress=False, options=opts)[0]
    print(to_json(result) if args.json else format_table(result, PIPE_NAMES))   # series: --out only
    if args.out is not None:
        write_run(args.out, result, inputs)
    if args.trace is not None:
        _warn_if_heavy(args.trace)
    return 0


# The Perfetto UI runs in the browser's memory: plain JSON traces of several hundred MB
# load slowly or not at all (google/perfetto issue 99: a 900 MB trace crashed the UI).
HEAVY_TRACE_BYTES = 256 * 2**20


def _warn_if_heavy(path) -> None:
    """A note on stderr when a plain trace is large enough to strain a trace viewer."""
    import os
    size = os.path.getsize(path)
    if size > HEAVY_TRACE_BYTES and not str(path).endswith(".gz"):
        print(f"simnode: note: trace {path} is {size / 2**20:.0f} MiB; name it *.json.gz to "
              f"compress it (~17x) or narrow it with --trace-scope 'core00.*'", file=sys.stderr)


def cmd_sweep(args) -> int:
    import json

    from simnode.commands.outdir import check_out_dir, write_sweep
    from simnode.commands.sweep import format_sweep, parse_params, run_sweep
    params = parse_params(args.params)
    if args.out is not None:
        check_out_dir(args.out, "sweep")
    rows = run_sweep(args.topology, args.workload, params, args.sets, args.jobs,
                     executor=args.executor, address=args.address)
    if args.out is not None:
        write_sweep(args.out, rows, params, args.topology, args.workload, args.sets)
    if args.json:
        print(json.dumps([{"point": p, **r.to_dict()} for p, _, r in rows], indent=2))
    else:
        print(format_sweep(rows))
    return 0


def cmd_validate(args) -> int:
    from simnode.commands.baselines import select
    from simnode.commands.validate import cases_json, cases_path, format_cases, load_cases, run_cases
    cases = select(load_cases(cases_path(args.cases)), args.only)
    rows = run_cases(cases, sets=args.sets, jobs=args.jobs)
    print(json.dumps(cases_json(rows), indent=2) if args.json else format_cases(rows))
    return 0 if all(r.ok for r in rows) else 1


def cmd_schedule(args) -> int:
    from simnode.errors import ConfigError
    from simnode.kernels.schedule import format_core
    from simnode.workloads.loader import load_inputs
    inputs = load_inputs(args.topology, args.workload, args.sets)
    if inputs.kind.build is None:
        raise ConfigError(args.workload, "kind", inputs.kind.name,
                          "a chip workload kind with a single schedule")
    _, sched = inputs.build()
    sched.check(inputs.topology.chip)      # reject what `run` would reject (buffer overflow ...)
    if not 0 <= args.core < len(sched.cores):
        raise ConfigError("--core", "core", args.core, f"0..{len(sched.cores) - 1}")
    print(f"# {sched.meta}")
    print(format_core(sched, args.core, args.max_per_pipe))
    return 0


def _check_output_path(path: str, option: str) -> None:
    """Reject an output file whose folder does not exist before running, not with a traceback after."""
    from pathlib import Path
    from simnode.errors import ConfigError
    if not str(path).strip():
        raise ConfigError(option, option.lstrip("-"), path, "a file path (it is empty)")
    p = Path(path)
    folder = p.parent
    if not folder.is_dir():
        raise ConfigError(option, option.lstrip("-"), path,
                          f"a file in an existing folder ({folder} is not one)")
    if p.is_dir():
        raise ConfigError(option, option.lstrip("-"), path, "a file path (this is a folder)")
    import os
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


def _name(path: str) -> str:
    from pathlib import Path
    return Path(path).stem


#: what a file system says when an output cannot be written
_FILE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS,
                errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EIO}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SimnodeError as exc:
        print(f"simnode: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`simnode schedule ... | head`): not an error of ours; point
        # stdout at devnull so the interpreter's final flush does not raise again
        import os
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
        return 2


if __name__ == "__main__":
    sys.exit(main())
