"""``simnode schedule TOPOLOGY WORKLOAD [--core N] [--max-per-pipe N]``: print the instruction
lists a core of a chip workload would run, without running them (schedules are data)."""

from __future__ import annotations

from simnode.commands.options import add_inputs, count, overlays_of

ORDER = 40


def register(subparsers) -> None:
    p = subparsers.add_parser("schedule", help="print a chip workload's schedule without running it")
    add_inputs(p)
    p.add_argument("--core", type=count, default=0, help="which core to list (default: 0)")
    p.add_argument("--max-per-pipe", type=count, default=20, help="records shown per pipe (default: 20)")
    p.set_defaults(func=cmd_schedule)


def cmd_schedule(args) -> int:
    from simnode.errors import ConfigError
    from simnode.instr.schedule import format_core
    from simnode.workloads.loader import load_inputs
    inputs = load_inputs(args.topology, args.workload, args.sets, overlays=overlays_of(args))
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
