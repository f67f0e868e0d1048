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

The scenario file, the baselines and the run are ``simnode.runs.scenarios`` and
``simnode.runs.baselines`` (``regress``); this command prints their rows (``format_rows``,
``rows_json``) and writes the baselines.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from simnode.commands.options import add_jobs, add_only, add_sets
from simnode.errors import ConfigError
from simnode.report.columns import align
from simnode.runs.cases import REPO_ROOT

ORDER = 70
#: the baselines shipped with this checkout
DEFAULT_BASELINES = REPO_ROOT / "traces" / "baselines"


def register(subparsers) -> None:
    p = subparsers.add_parser("regress", help="recompute the golden baselines and diff them "
                              "(exit 1 on drift beyond tolerance)")
    p.add_argument("--baselines", metavar="DIR", default=None,
                   help="folder with scenarios.yaml and one <id>.json per scenario "
                        "(default: traces/baselines/ of this checkout)")
    add_only(p, "run only scenarios whose id matches this glob (deepep-*); repeatable")
    add_sets(p, "an override applied to every selected scenario (a what-if: "
                "topology.supernode.port_bandwidth_GBps=25.71); not with --update")
    add_jobs(p)
    p.add_argument("--update", action="store_true",
                   help="show the diff, then rewrite the selected baselines from this run")
    p.add_argument("--json", action="store_true",
                   help="print the diff as one JSON object (a row per figure); same exit code")
    p.set_defaults(func=cmd_regress)


def baselines_folder(option: str | None) -> Path:
    """The folder of ``--baselines`` (None: this checkout's); an empty path is an error,
    never the shipped folder (``--update`` would rewrite it)."""
    if option is None:
        return DEFAULT_BASELINES
    if not str(option).strip():
        raise ConfigError("--baselines", "baselines", option, "a baselines folder path (it is empty)")
    return Path(option)


def cmd_regress(args) -> int:
    from simnode.runs.baselines import regress, write_baselines
    if args.update and args.sets:
        raise ConfigError("--set", "set", args.sets, "no --set together with --update: baselines "
                          "record the scenarios exactly as scenarios.yaml defines them")
    folder = baselines_folder(args.baselines)
    rows, records = regress(folder, args.only, args.sets, args.jobs, args.update)
    print(json.dumps(rows_json(rows), indent=2) if args.json else format_rows(rows))
    if args.update:
        write_baselines(folder, records)
        if not args.json:
            print(f"recorded {len(records)} baselines in {folder}")
        return 0
    if any(r.drifted for r in rows):
        if not args.json:
            print("a modeled figure moved: if the change is intended, record it with "
                  "`simnode regress --update` (and say why in the commit)")
        return 1
    return 0


def _show(value) -> str:
    if value is None:
        return "-"
    return f"{value:.10g}" if isinstance(value, (int, float)) else str(value)


def format_rows(rows: list) -> str:
    """The diff table and a summary line naming every drifted figure."""
    header = ["scenario", "figure", "baseline", "now", "change %", "tolerance", "status"]
    table = [header]
    for r in rows:
        change = r.change_frac
        exact = r.tolerance == 0 or isinstance(r.baseline, str) or isinstance(r.now, str)
        table.append([r.scenario, r.figure, _show(r.baseline), _show(r.now),
                      "-" if change is None else f"{100 * change:+.2f}",
                      "exact" if exact else f"{100 * r.tolerance:g}%", r.status])
    drifted = [r for r in rows if r.drifted]
    counts = {s: sum(r.status == s for r in rows) for s in ("same", "ok", "NEW", "DRIFT", "MISSING")}
    n_scenarios = len({r.scenario for r in rows})
    summary = (f"{n_scenarios} scenario{'s' * (n_scenarios != 1)}, {len(rows)} figures: "
               + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    lines = [align(table), summary]
    if drifted:
        lines.append("drifted beyond tolerance: " + ", ".join(f"{r.scenario}/{r.figure}" for r in drifted))
    return "\n".join(lines)


def rows_json(rows: list) -> dict:
    """The diff table as one JSON object: a row per figure and the drifted ones."""
    return {
        # change_frac null: not two numbers, or a move away from a baseline of 0 (infinite)
        "figures": [{"scenario": r.scenario, "figure": r.figure, "baseline": r.baseline,
                     "now": r.now, "tolerance_frac": r.tolerance, "status": r.status,
                     "change_frac": r.change_frac if r.change_frac is not None
                     and math.isfinite(r.change_frac) else None} for r in rows],
        "scenarios": len({r.scenario for r in rows}),
        "drifted": [f"{r.scenario}/{r.figure}" for r in rows if r.drifted],
    }

