"""Judge a written `report.json` again from its studies' data; rewrite it, its `report.md` and
each other study's page.

`python -m sao.reproduce.refresh OUT/report.json [--plots]` recomputes every row's intervals,
verdicts and power analysis from the per-seed data of its study (the directory the study names
as `data`, relative to the report: `sao.reproduce.study_data`), with the current rule, power
analysis and claim table, so a study whose run directories are gone stays in step with the
code. Nothing is judged from the numbers `report.json` itself holds: a row whose data is not
there is inconclusive and says so. Each study of `other_studies` gets its page (its `file`)
rewritten from the same rows, with the account of its runs its data keeps (`provenance`);
`--plots` also redraws the plots (`plots/claim_<id>.png`, and `plots/<study>/claim_<id>.png`
for a study's page). A `provenance` text in `report.json` is kept and printed under the
report's opening tables. A report holding several studies of one claim must mark exactly one
of them current (`render.current_answers`); one that does not is refused in one line, and
nothing is rewritten.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from sao.plumbing.durable import atomic_write_text
from sao.reproduce.claims import CLAIMS
from sao.reproduce.render import (
    OWN_STUDY,
    current_answers,
    draw_plots,
    render_markdown,
    seeds_needed_text,
    write_text_report,
)
from sao.reproduce.report import DATA_ABSENT, ROW_MARKS, rejudge, study_data_of
from sao.reproduce.stats import POWER_METHOD, RULE
from sao.reproduce.study_data import DataAbsent


def page_plots(study: dict[str, Any]) -> str:
    """Where a study's page finds its plots: `plots/<study>/claim_`, `<study>` its file's stem."""
    return f"plots/{Path(study['file']).stem}/claim_"


def study_page(study: dict[str, Any], base: Path) -> str:
    """The page of one of a report's other studies: its rows as a report of their own (every
    row its claim's answer there), with the account of its runs from its data."""
    try:
        data = study_data_of(study, base)
        seeds, provenance = data.seeds, data.provenance
    except DataAbsent:
        seeds, provenance = 0, ""
    marks = set(ROW_MARKS) - {"seeds_added_after_looking", "after_looking"}
    page = {
        "budget": study.get("budget", "not recorded"),
        "seeds_requested": seeds,
        "commits": study.get("commits", []),
        "rule": RULE,
        "power_method": POWER_METHOD,
        "claims": [{k: v for k, v in row.items() if k not in marks} for row in study["claims"]],
        "provenance": provenance,
    }
    return render_markdown(page, every_claim=False, plots=page_plots(study))


def refresh(report_json: Path, plots: bool = False) -> dict:
    """Rejudge `report_json` from its studies' data and rewrite it with `report.md` and the
    other studies' pages beside it (and the plots, with `plots`); returns the report. Every
    page is rendered before anything is written, so a refused report writes nothing."""
    out = report_json.parent
    report = rejudge(json.loads(report_json.read_text()), out)
    pages = [
        (out / study["file"], study_page(study, out)) for study in report.get("other_studies", [])
    ]
    write_text_report(report, out)
    for path, text in pages:
        atomic_write_text(path, text)
    if plots:
        draw_plots(report["claims"], out / "plots")
        for study in report.get("other_studies", []):
            draw_plots(study["claims"], out / page_plots(study).removesuffix("/claim_"))
    return report


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    plots = "--plots" in args
    args = [a for a in args if a != "--plots"]
    if len(args) != 1:
        print("usage: python -m sao.reproduce.refresh OUT/report.json [--plots]", file=sys.stderr)
        return 2
    path = Path(args[0])
    try:
        report = refresh(path, plots)
    except (OSError, ValueError, KeyError, TypeError) as err:
        reason = f"missing field {err}" if isinstance(err, KeyError) else str(err)
        print(f"sao.reproduce.refresh: {path}: cannot refresh ({reason})", file=sys.stderr)
        return 1
    answers = current_answers(report)
    for claim_id in [
        *(c for c in CLAIMS if c in answers),
        *(c for c in answers if c not in CLAIMS),
    ]:
        claim, _, study = answers[claim_id]
        source = "" if study == OWN_STUDY else f" [{study}]"
        absent = f" ({DATA_ABSENT}: {claim['data_absent']})" if claim.get("data_absent") else ""
        print(
            f"({claim['id']}) {claim['verdict']}{absent}{source}; seeds needed at the observed "
            f"effects: {seeds_needed_text(claim)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
