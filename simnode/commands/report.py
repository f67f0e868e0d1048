"""``simnode report RESULT_DIR [-o FILE.html]``: one self-contained HTML page of a run or
sweep output folder (``simnode run --out`` / ``simnode sweep --out``): tables of every
kernel's time, bound, simulated/bound ratio and bottleneck, the hottest links, and the
plots of ``simnode.report.plots`` embedded as PNG. A missing or corrupted folder, and an
output path that is empty, a folder, in a missing folder or not writable, exit 2 with one
paragraph naming the file or option (``simnode.report.html.write_report``)."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="write an HTML report of a run or sweep --out folder")
    p.add_argument("result_dir", metavar="RESULT_DIR", help="folder written by `simnode run/sweep --out`")
    p.add_argument("-o", "--output", metavar="FILE.html", default=None,
                   help="where to write the page (default: RESULT_DIR/report.html)")
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    from simnode.report.html import write_report
    path = write_report(args.result_dir, args.output)
    print(f"wrote {path}")
    return 0
