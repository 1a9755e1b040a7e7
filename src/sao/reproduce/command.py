"""`sao reproduce`: run the chosen claims' arms over seeds, then judge and report them."""

from __future__ import annotations

import json
from pathlib import Path

from sao.config import ConfigError
from sao.reproduce.budgets import BUDGETS
from sao.reproduce.claims import CLAIMS
from sao.reproduce.runs import (
    RunFunction,
    WarmStartFunction,
    execute,
    plan,
    run_state,
    train_in_process,
    warm_start_once,
)

STUDY_FILE = "study.json"
"""`OUT/study.json` records the budget, so a study is never continued at another size."""


def parse_claims(text: str) -> list[str]:
    """`"c,f"` (or `"cf"`) -> `["c", "f"]`, in table order; ValueError names a wrong letter."""
    letters = [ch for ch in text.replace(",", "").replace(" ", "").lower()]
    if not letters:
        raise ValueError("expected claim letters such as c or a,c,f")
    unknown = sorted(set(letters) - set(CLAIMS))
    if unknown:
        raise ValueError(
            f"unknown claim {', '.join(map(repr, unknown))} (claims are {', '.join(CLAIMS)})"
        )
    return [letter for letter in CLAIMS if letter in letters]


def check_study(out: Path, budget: str) -> None:
    """Refuse to continue `out` at a budget other than the one it was started with."""
    path = out / STUDY_FILE
    if path.is_file():
        started = json.loads(path.read_text()).get("budget")
        if started != budget:
            raise ConfigError(
                f"--out {out} holds a --budget {started} study; --budget {budget} would mix "
                "run sizes (choose another --out)"
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"budget": budget}) + "\n")


def run_reproduce_command(
    claim_ids: list[str],
    seeds: int,
    budget: str,
    out: str | Path,
    run_fn: RunFunction = train_in_process,
    warm_start_fn: WarmStartFunction = warm_start_once,
    progress: bool = True,
    report_only: bool = False,
) -> int:
    """Run what is missing of the study in `out`, then write `report.json`, `report.md`, plots.

    With `report_only`, run nothing: report what has finished, and give a claim whose runs have
    not all finished the verdict "not run" (its numbers so far are shown, not judged).
    """
    out = Path(out)
    if report_only and not (out / STUDY_FILE).is_file():
        raise ConfigError(f"--report-only: {out} holds no study (no {STUDY_FILE})")
    check_study(out, budget)
    claims = [CLAIMS[i] for i in claim_ids]
    runs = plan(claims, seeds, out)
    if report_only:
        counts = {"finished": sum(run_state(r.run_dir) == "finished" for r in runs)}
        counts["interrupted"], counts["new"] = 0, len(runs) - counts["finished"]
    else:
        counts = execute(runs, BUDGETS[budget], run_fn, warm_start_fn, progress=progress)
    from sao.reproduce.report import build_report, write_report  # matplotlib only when needed

    report = build_report(claims, seeds, budget, out)
    write_report(report, out)
    if report_only:
        summary = f"{counts['finished']} finished, {counts['new']} not run (--report-only)"
    else:
        summary = (
            f"{counts['finished']} already finished, {counts['interrupted']} resumed, "
            f"{counts['new']} new"
        )
    print(f"sao reproduce: {len(runs)} runs ({summary}); report in {out / 'report.md'}")
    for claim in report["claims"]:
        print(f"  ({claim['id']}) {claim['verdict']}: {claim['statement']}")
    return 0
