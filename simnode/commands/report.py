"""``simnode report RESULT_DIR [-o FILE.html]``: one self-contained HTML page of a run or
sweep output folder (``simnode run --out`` / ``simnode sweep --out``), the answer first: a
summary of what was run with its plots (the headline figures against the swept field beside
the published figures of the validation file, the time split per run where the kind's figures
add up to it) and one line per run naming its time and bottleneck; then the tables, folded by
kernel; then the other plots (``simnode.report.html``). A missing or corrupted folder, and an
output path that is empty, a folder, in a missing folder or not writable, exit 2 with one
paragraph naming the file or option (``simnode.report.html.write_report``)."""

from __future__ import annotations

ORDER = 60


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="write an HTML report of a run or sweep --out folder")
    p.add_argument("result_dir", metavar="RESULT_DIR", help="folder written by `simnode run/sweep --out`")
    p.add_argument("-o", "--output", metavar="FILE.html", default=None,
                   help="where to write the page (default: RESULT_DIR/report.html)")
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    from simnode.report.html import write_report
    path = write_report(args.result_dir, args.output, published_records())
    print(f"wrote {path}")
    return 0


def published_records(cases_path=None) -> list[dict]:
    """The published figures of the validation file (default: this checkout's; none if it
    is absent) as the report plots them: {metric, workload (file stem), topology (as the
    file writes it), set, published, tolerance_frac, source}."""
    from pathlib import Path

    from simnode.config.overrides import parse_assignment
    from simnode.runs.cases import DEFAULT_CASES, load_cases
    path = Path(cases_path) if cases_path else DEFAULT_CASES
    if cases_path is None and not path.exists():
        return []
    return [{"metric": c.metric, "workload": Path(c.workload).stem, "topology": c.topology,
             "set": dict(parse_assignment(s) for s in c.sets), "published": c.published,
             "tolerance_frac": c.tolerance, "source": c.source} for c in load_cases(path)]
