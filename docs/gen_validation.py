"""Print the table of docs/validation.md: every case of validation/published.yaml, published
against model, from one `simnode validate --json` run.

    python docs/gen_validation.py                 # runs simnode validate --json --jobs 2
    python docs/gen_validation.py VALIDATE.json   # formats a stored run instead

Paste the output over the table in docs/validation.md; tests/test_docs.py holds every row of
that table to a fresh run (model within 1%, published, tolerance, status and source exact).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
HEADER = ("| case | metric | published | model | error | tolerance | within | source |\n"
          "|---|---|---|---|---|---|---|---|")


def status(row: dict) -> str:
    """The `within` column as `simnode validate` prints it: yes, NO, or fit."""
    if row["within"] is None:
        return "fit"
    return "yes" if row["within"] else "NO"


def table(validate: dict, cases_file: Path = ROOT / "validation" / "published.yaml") -> str:
    """The markdown table of one `simnode validate --json` result, rows in the file's order."""
    cases = {c["id"]: c for c in yaml.safe_load(cases_file.read_text())["cases"]}
    lines = [HEADER]
    for row in validate["cases"]:
        case = cases[row["id"]]
        model = f"{row['model']:.1f}" if abs(row["model"]) >= 100 else f"{row['model']:.2f}"   # ms-scale rows
        lines.append(f"| `{row['id']}` | {row['metric']} | {case['published']:g} | {model} | "
                     f"{100 * row['error_frac']:+.1f}% | {100 * case['tolerance']:g}% | {status(row)} | "
                     f"{case['source']} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv:
        validate = json.loads(Path(argv[0]).read_text())
    else:
        out = subprocess.run([sys.executable, "-m", "simnode", "validate", "--json", "--jobs", "2"],
                             cwd=ROOT, capture_output=True, text=True)
        if out.returncode not in (0, 1):
            sys.stderr.write(out.stderr)
            return out.returncode
        validate = json.loads(out.stdout)
    print(table(validate))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
