"""`sao reproduce`: run the chosen claims' arms over seeds, then judge and report them."""

from __future__ import annotations

import fcntl
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
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
"""`OUT/study.json` records the budget, so a study is never continued at another size, and
`commits`: the commits of `sao` its runs were made at (each time some of them ran)."""


DATA_DIR = "data"
"""`OUT/data/`: the study's per-seed data (`sao.reproduce.study_data`), from which its report
is judged; copy it under `docs/reproduce/data/<study>/` to keep the study."""


def parse_claims(text: str) -> list[str]:
    """`"c,f"` (or `"cf"`) -> `["c", "f"]`, in table order; a comma-separated item that is a
    claim's whole id (`h_latency`) is that claim, any other is read letter by letter. ValueError
    names a wrong one."""
    items = [item for item in text.replace(" ", "").lower().split(",") if item]
    if not items:
        raise ValueError("expected claim letters such as c or a,c,f")
    wanted: set[str] = set()
    unknown: list[str] = []
    for item in items:
        if item in CLAIMS:
            wanted.add(item)
        elif all(letter in CLAIMS for letter in item):
            wanted.update(item)
        else:
            unknown.append(item)
    if unknown:
        raise ValueError(
            f"unknown claim {', '.join(map(repr, unknown))} (claims are {', '.join(CLAIMS)})"
        )
    return [claim for claim in CLAIMS if claim in wanted]


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


@contextmanager
def study_lock(out: Path) -> Iterator[None]:
    """Hold `OUT/.lock` while runs are started, so two `sao reproduce` never train one run twice;
    the lock goes with the process, so a killed study leaves none behind."""
    with (out / ".lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"--out {out} is in use by another sao reproduce (wait for it, or choose "
                "another --out)"
            ) from None
        yield


def source_commit() -> str | None:
    """The short commit of the `sao` checkout being run, or None outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def record_commit(out: Path, commit: str | None) -> list[str]:
    """Add `commit` to the study's `commits` (once); returns them all."""
    path = out / STUDY_FILE
    study = json.loads(path.read_text())
    commits = list(study.get("commits", []))
    if commit is not None and commit not in commits:
        commits.append(commit)
        path.write_text(json.dumps({**study, "commits": commits}) + "\n")
    return commits


def study_commits(out: Path) -> list[str]:
    """The commits recorded for the study in `out` (none for a study begun before they were)."""
    return list(json.loads((out / STUDY_FILE).read_text()).get("commits", []))


def run_reproduce_command(
    claim_ids: list[str],
    seeds: int,
    budget: str,
    out: str | Path,
    run_fn: RunFunction = train_in_process,
    warm_start_fn: WarmStartFunction = warm_start_once,
    progress: bool = True,
    report_only: bool = False,
    workers: int = 1,
) -> int:
    """Run what is missing of the study in `out`, then write its per-seed data (`OUT/data/`) and
    `report.json`, `report.md` and the plots judged from it.

    With `report_only`, run nothing: report what has finished, and give a claim whose runs have
    not all finished the verdict "not run" (its numbers so far are shown, not judged). With
    `workers` > 1, that many runs train at a time (`execute`); refused for a claim that times
    its runs, whose clocks need the cores alone.
    """
    out = Path(out)
    if report_only and not (out / STUDY_FILE).is_file():
        raise ConfigError(f"--report-only: {out} holds no study (no {STUDY_FILE})")
    claims = [CLAIMS[i] for i in claim_ids]
    timed = [claim.id for claim in claims if any(arm.timed for arm in claim.arms)]
    if workers > 1 and timed and not report_only:
        raise ConfigError(
            f"--workers {workers}: claim ({', '.join(timed)}) times its runs, which need the "
            "cores alone (run it with --workers 1)"
        )
    check_study(out, budget)
    runs = plan(claims, seeds, out)
    if report_only:
        counts = {"finished": sum(run_state(r.run_dir) == "finished" for r in runs)}
        counts["interrupted"], counts["new"] = 0, len(runs) - counts["finished"]
    else:
        with study_lock(out):
            if any(run_state(r.run_dir) != "finished" for r in runs):
                record_commit(out, source_commit())
            counts = execute(
                runs, BUDGETS[budget], run_fn, warm_start_fn, progress=progress, workers=workers
            )
    # Imported here so that matplotlib loads only when a report is written.
    from sao.reproduce.render import seeds_needed_text, write_report
    from sao.reproduce.report import build_report
    from sao.reproduce.study_data import collect_study_data, write_study_data

    # The report is judged from the per-seed data written beside it, as a refresh judges it.
    data = collect_study_data(claims, seeds, budget, out, study_commits(out))
    write_study_data(data, out / DATA_DIR)
    report = {**build_report(claims, data), "data": DATA_DIR}
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
        print(
            f"  ({claim['id']}) {claim['verdict']}: {claim['statement']}; seeds needed at the "
            f"observed effects: {seeds_needed_text(claim)}"
        )
    return 0
