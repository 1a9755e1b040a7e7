"""Judge a written `report.json` again and rewrite it and its `report.md` (plots untouched).

`python -m sao.reproduce.refresh OUT/report.json` recomputes every interval, verdict and the
power analysis from the per-seed values the report stores, with the current rule, power analysis
and claim table, so a report whose run directories are gone (a study kept only as its report)
stays in step with the code. A `provenance` text in `report.json` (how, when and where the runs
were made) is kept and printed under the report's opening tables. A report holding several
studies of one claim must mark exactly one of them current (`report.current_answers`); one
that does not is refused in one line, and nothing is rewritten.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sao.reproduce.report import (
    OWN_STUDY,
    current_answers,
    rejudge,
    seeds_needed_text,
    write_text_report,
)


def refresh(report_json: Path) -> dict:
    """Rejudge `report_json` and rewrite it with `report.md` beside it; returns the report."""
    report = rejudge(json.loads(report_json.read_text()))
    write_text_report(report, report_json.parent)
    return report


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m sao.reproduce.refresh OUT/report.json", file=sys.stderr)
        return 2
    path = Path(args[0])
    try:
        report = refresh(path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        reason = f"missing field {err}" if isinstance(err, KeyError) else str(err)
        print(f"sao.reproduce.refresh: {path}: cannot refresh ({reason})", file=sys.stderr)
        return 1
    for claim, _, study in current_answers(report).values():
        source = "" if study == OWN_STUDY else f" [{study}]"
        print(
            f"({claim['id']}) {claim['verdict']}{source}; seeds needed at the observed effects: "
            f"{seeds_needed_text(claim)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
