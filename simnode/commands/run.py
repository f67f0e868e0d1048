"""``simnode run TOPOLOGY WORKLOAD [--set KEY=VALUE ...] [--seed N] [--json] [--out DIR]
[--trace FILE [--trace-scope PATTERN ...]] [--progress]``: run one workload and print its
result as a table (or the flat JSON object, ``simnode.report.result``).

The run is parsed once (``simnode.workloads.loader.RunSpec``) and run by the one executor
in this process. Before it starts: the output paths are checked, and a run estimated far
above its kind's reference run is announced on stderr (``cost_note``). After it: a trace
whose ``--trace-scope`` matched no thread is an error (the file, holding no spans, is
removed), and a large plain trace gets a note. On Ctrl-C a partly written trace is removed
(the CLI prints one line and exits 130).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from simnode.commands.options import add_inputs, add_jobs, add_list, check_output_path, overlays_of

ORDER = 10
# The Perfetto UI runs in the browser's memory: plain JSON traces of several hundred MB
# load slowly or not at all (google/perfetto issue 99: a 900 MB trace crashed the UI).
HEAVY_TRACE_BYTES = 256 * 2**20


def register(subparsers) -> None:
    run = subparsers.add_parser("run", help="run one workload and print its result")
    add_inputs(run)
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument("--out", metavar="DIR", help="write result.json, series.json, config.json "
                     "(simnode.commands.outdir)")
    run.add_argument("--trace", metavar="FILE", help="write a Chrome Trace Event JSON file (gzip-compressed "
                     "if FILE ends in .gz; Perfetto opens both)")
    add_list(run, "--trace-scope", "PATTERN",
             "trace only threads matching this fnmatch pattern (core00.*); repeatable")
    run.add_argument("--seed", type=int, default=None,
                     help="random seed: the same as --set seed=N, for kinds with a seed field")
    add_jobs(run, "processes for the run's independent parts, e.g. DeepEP's dispatch and "
                  "combine (0 = one per core, at most 2; 1 = one process)")
    run.add_argument("--progress", action="store_true",
                     help="draw the progress line on stderr even when it is not a terminal")
    # every file the run writes is closed when cmd_run returns: the process may end at once
    run.set_defaults(func=cmd_run, fast_exit=True)


def cmd_run(args) -> int:
    from simnode.errors import ConfigError
    from simnode.report.result import format_table, to_json
    from simnode.runs.executor import execute
    from simnode.workloads.loader import load_inputs
    from simnode.workloads.registry import ALWAYS, RunOptions
    inputs = load_inputs(args.topology, args.workload, args.sets, seed=args.seed,
                         overlays=overlays_of(args))
    if args.trace_scope and args.trace is None:
        raise ConfigError("--trace-scope", "trace-scope", args.trace_scope[0],
                          "--trace FILE as well (the scope narrows a trace, and none was asked for)")
    if args.trace is not None:
        check_output_path(args.trace, "--trace")
    if args.out is not None:
        from simnode.commands.outdir import check_out_dir   # (only for --out)
        check_out_dir(args.out, "run")
    jobs = args.jobs or min(2, os.cpu_count() or 1)       # 0 = one per core, as executor's
    note = inputs.cost_note(jobs)
    if note:
        print(f"simnode: note: {note}", file=sys.stderr)
    opts = RunOptions(args.trace, args.trace_scope, progress=ALWAYS if args.progress else True,
                      jobs=jobs)
    try:
        result = execute([inputs], jobs=1, progress=False, options=opts)[0]
    except KeyboardInterrupt:
        if args.trace is not None:
            Path(args.trace).unlink(missing_ok=True)        # a partial trace is no trace
        raise
    if args.trace_scope and not traced_any_thread(args.trace):
        Path(args.trace).unlink(missing_ok=True)
        raise ConfigError("--trace-scope", "trace-scope", args.trace_scope if len(args.trace_scope) > 1
                          else args.trace_scope[0],
                          f"a pattern matching a thread of this run (threads are named like core00.aic.mte2, "
                          f"core03.aiv1.v, rank000.deepep or a link rank0->leaf0); none matched, so "
                          f"{args.trace} would hold no spans and was removed")
    if args.json:
        print(to_json(result))                          # series: --out only
    else:
        from simnode.instr.isa import PIPE_NAMES        # the table's pipe columns (not for --json)
        print(format_table(result, PIPE_NAMES))
    if args.out is not None:
        from simnode.commands.outdir import write_run
        write_run(args.out, result, inputs)
    if args.trace is not None:
        _warn_if_heavy(args.trace)
    return 0


def traced_any_thread(path) -> bool:
    """Whether a Chrome trace names a thread (a ``thread_name`` event, one per line as
    ``simnode.engine.trace`` writes them): read until the first, so cheap when it has one."""
    import gzip                 # (only with --trace-scope)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return any('"thread_name"' in line for line in f)


def _warn_if_heavy(path) -> None:
    """A note on stderr when a plain trace is large enough to strain a trace viewer."""
    size = os.path.getsize(path)
    if size > HEAVY_TRACE_BYTES and not str(path).endswith(".gz"):
        print(f"simnode: note: trace {path} is {size / 2**20:.0f} MiB; name it *.json.gz to "
              f"compress it (~17x) or narrow it with --trace-scope 'core00.*'", file=sys.stderr)
