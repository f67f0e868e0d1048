"""``simnode regress``: recompute every golden scenario and diff it against its baseline.

``simnode regress [--baselines DIR] [--only PATTERN ...] [--set KEY=VALUE ...] [--jobs N]
[--update]`` reads DIR/scenarios.yaml (default: traces/baselines/ of this checkout),
checks every selected scenario's inputs and baseline file before running anything, runs
the scenarios in parallel worker processes and prints the diff table (scenario, figure,
baseline, now, change %, tolerance, status).

Exit codes: 0 when no figure moved beyond its tolerance, 1 when one did (the summary
names them), 2 for bad input (a pattern matching no scenario, a missing or stale baseline
file, a malformed scenario file). ``--update`` shows the same diff, then rewrites the
selected baselines and exits 0: that is the only way the JSON files are written.
"""

from __future__ import annotations

import json
from pathlib import Path

from simnode.commands import jobs_count
from simnode.errors import ConfigError

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
    p.set_defaults(func=cmd_regress)


def _recorded_values(path: Path) -> dict | None:
    """Whatever figure values an old (perhaps stale) baseline holds, for the --update diff."""
    try:
        figures = json.loads(path.read_text()).get("figures", {})
        return {k: v["value"] for k, v in figures.items() if isinstance(v, dict) and "value" in v}
    except (OSError, ValueError, AttributeError):
        return None


def cmd_regress(args) -> int:
    from simnode.parallel import run_all
    from simnode.regress import (SCENARIOS_FILE, baseline_path, compare, format_rows, load_baseline,
                                 load_scenarios, resolve_figures, select, write_baseline)
    from simnode.workloads.loader import load_inputs

    if args.update and args.sets:
        raise ConfigError("--set", "set", args.sets, "no --set together with --update: baselines "
                          "record the scenarios exactly as scenarios.yaml defines them")
    folder = Path(args.baselines) if args.baselines else DEFAULT_BASELINES
    sfile = load_scenarios(folder / SCENARIOS_FILE)
    plans = []                 # (scenario, figures, baseline values, task), all checked before any run
    for sc in select(sfile.scenarios, args.only):
        topology, workload = str(sfile.root / sc.topology), str(sfile.root / sc.workload)
        sets = sc.sets() + tuple(args.sets)
        inputs = load_inputs(topology, workload, list(sets))
        figures = resolve_figures(sfile, sc, inputs.kind.name)
        if args.update:
            baseline = _recorded_values(baseline_path(folder, sc))
        else:
            baseline = load_baseline(folder, sc, figures)
        plans.append((sc, figures, baseline, (topology, workload, sets)))

    results = run_all([task for *_, task in plans], args.jobs)
    rows = [row for sc, figures, baseline, task in plans
            for row in compare(sc, figures, baseline, results[task])]
    print(format_rows(rows))
    if args.update:
        for sc, figures, _, task in plans:
            write_baseline(folder, sc, figures, results[task])
        print(f"recorded {len(plans)} baselines in {folder}")
        return 0
    if any(r.drifted for r in rows):
        print("a modeled figure moved: if the change is intended, record it with "
              "`simnode regress --update` (and say why in the commit)")
        return 1
    return 0
