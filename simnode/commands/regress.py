"""``simnode regress``: recompute every golden scenario and diff it against its baseline.

``simnode regress [--baselines DIR] [--only PATTERN ...] [--set KEY=VALUE ...] [--jobs N]
[--update] [--json]`` reads DIR/scenarios.yaml (default: traces/baselines/ of this checkout),
checks every selected scenario's inputs and baseline file before running anything, runs
the scenarios in parallel worker processes and prints the diff table (scenario, figure,
baseline, now, change %, tolerance, status; ``--json``: one object with a row per figure).

Exit codes: 0 when no figure moved beyond its tolerance, 1 when one did (the summary
names them), 2 for bad input (a pattern matching no scenario, a missing, unreadable or stale
baseline file, a malformed scenario file, a figure the run's result does not have, an
empty ``--baselines``). ``--update`` runs and checks every selected scenario, shows the same
diff, then rewrites the selected baselines (all or none) and exits 0: that is the only way
the JSON files are written.
"""

from __future__ import annotations

import json
from pathlib import Path

from simnode.commands import jobs_count
from simnode.errors import ConfigError

ORDER = 70
#: the baselines shipped with this checkout
DEFAULT_BASELINES = Path(__file__).resolve().parents[2] / "traces" / "baselines"


def register(subparsers) -> None:
    p = subparsers.add_parser("regress", help="recompute the golden baselines and diff them "
                              "(exit 1 on drift beyond tolerance)")
    p.add_argument("--baselines", metavar="DIR", default=None,
                   help="folder with scenarios.yaml and one <id>.json per scenario "
                        "(default: traces/baselines/ of this checkout)")
    p.add_argument("--only", action="append", default=[], metavar="PATTERN",
                   help="run only scenarios whose id matches this glob (deepep-*); repeatable")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="an override applied to every selected scenario (a what-if: "
                        "topology.supernode.port_bandwidth_GBps=25.71); not with --update")
    p.add_argument("--jobs", type=jobs_count, default=0, help="worker processes (0 = one per core)")
    p.add_argument("--update", action="store_true",
                   help="show the diff, then rewrite the selected baselines from this run")
    p.add_argument("--json", action="store_true",
                   help="print the diff as one JSON object (a row per figure); same exit code")
    p.set_defaults(func=cmd_regress)


def _recorded_values(path: Path) -> dict | None:
    """Whatever figure values an old (perhaps stale) baseline holds, for the --update diff."""
    try:
        figures = json.loads(path.read_text()).get("figures", {})
        return {k: v["value"] for k, v in figures.items() if isinstance(v, dict) and "value" in v}
    except (OSError, ValueError, AttributeError):
        return None


def baselines_folder(option: str | None) -> Path:
    """The folder of ``--baselines`` (None: this checkout's); an empty path is an error,
    never the shipped folder (``--update`` would rewrite it)."""
    if option is None:
        return DEFAULT_BASELINES
    if not str(option).strip():
        raise ConfigError("--baselines", "baselines", option, "a baselines folder path (it is empty)")
    return Path(option)


def cmd_regress(args) -> int:
    from simnode.commands.executor import execute
    from simnode.commands.baselines import (SCENARIOS_FILE, StaleFigures, baseline_path,
                                            baseline_record, check_figures, check_writable, compare,
                                            format_rows, load_baseline, load_scenarios,
                                            resolve_figures, rows_json, select, write_baselines)
    from simnode.commands.validate import in_entry
    from simnode.workloads.loader import load_inputs

    if args.update and args.sets:
        raise ConfigError("--set", "set", args.sets, "no --set together with --update: baselines "
                          "record the scenarios exactly as scenarios.yaml defines them")
    folder = baselines_folder(args.baselines)
    sfile = load_scenarios(folder / SCENARIOS_FILE)
    plans = []                 # (scenario, kind, figures, baseline values, spec), all checked before any run
    stale = []                 # (plan, StaleFigures): checked against a run before advising --update
    for sc in select(sfile.scenarios, args.only):
        topology, workload = str(sfile.root / sc.topology), str(sfile.root / sc.workload)
        sets = sc.sets() + tuple(args.sets)
        try:
            inputs = load_inputs(topology, workload, list(sets))
        except ConfigError as exc:
            raise in_entry(exc, sfile.where(sc), sc.key_path("set"), sc.sets(), args.sets) from None
        kind = inputs.kind.name
        figures = resolve_figures(sfile, sc, kind)
        baseline = None
        if args.update:
            check_writable(baseline_path(folder, sc), sc)
            baseline = _recorded_values(baseline_path(folder, sc))
        else:
            try:
                baseline = load_baseline(folder, sc, figures)
            except StaleFigures as exc:
                stale.append(((sc, kind, figures, None, inputs), exc))
        plans.append((sc, kind, figures, baseline, inputs))

    def run(selected) -> list[dict]:
        return [r.to_dict() for r in execute([plan[-1] for plan in selected], args.jobs,
                                             labels=[sfile.where(plan[0]) for plan in selected],
                                             title="regress")]

    if stale:
        # a figure the result lacks is the scenario file's mistake: --update would not help
        for ((sc, kind, figures, _, _), _), result in zip(stale, run([plan for plan, _ in stale])):
            check_figures(sfile, sc, kind, figures, result)
        raise stale[0][1]
    results = run(plans)
    if args.update:            # check every scenario before writing any file
        records = [baseline_record(sfile, sc, kind, figures, result)
                   for (sc, kind, figures, _, _), result in zip(plans, results)]
    rows = [row for (sc, _, figures, baseline, _), result in zip(plans, results)
            for row in compare(sc, figures, baseline, result)]
    print(json.dumps(rows_json(rows), indent=2) if args.json else format_rows(rows))
    if args.update:
        write_baselines(folder, records)
        if not args.json:
            print(f"recorded {len(plans)} baselines in {folder}")
        return 0
    if any(r.drifted for r in rows):
        if not args.json:
            print("a modeled figure moved: if the change is intended, record it with "
                  "`simnode regress --update` (and say why in the commit)")
        return 1
    return 0
