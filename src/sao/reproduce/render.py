"""Write a judged report (`sao.reproduce.report`) for people: `report.json`, `report.md` with
the current answer per claim and the history of every other study, and the plots."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sao.plumbing.durable import atomic_write_json, atomic_write_text
from sao.reproduce.claims import CLAIMS
from sao.reproduce.report import DATA_ABSENT, NOT_RUN
from sao.reproduce.stats import MAX_SEEDS_SEARCHED, POWER_METHOD, ends_text, interval_text

_SIGN = {"greater": ">", "less": "<", "not_less": ">="}


def draw_plots(claims: list[dict[str, Any]], plot_dir: Path) -> None:
    """`claim_<id>.png`, and `claim_<id>_curves.png` for a claim with curves, under `plot_dir`
    for every judged claim (a row without data has nothing to draw)."""
    from sao.reproduce.curves import plot_curves
    from sao.reproduce.plots import plot_claim

    plot_dir.mkdir(parents=True, exist_ok=True)
    for claim in claims:
        if claim.get("data_absent"):
            continue
        plot_claim(claim, plot_dir / f"claim_{claim['id']}.png")
        if "curves" in claim:
            plot_curves(claim, plot_dir / f"claim_{claim['id']}_curves.png")


def write_report(report: dict[str, Any], out: Path) -> None:
    """`report.json`, `report.md` and `plots/claim_<id>.png` under `out`."""
    draw_plots(report["claims"], out / "plots")
    write_text_report(report, out)


def write_text_report(report: dict[str, Any], out: Path) -> None:
    """`report.json` and `report.md` under `out` (the plots are left as they are). The markdown
    is rendered first, so a report refused there (`current_answers`) writes neither file."""
    markdown = render_markdown(report)
    atomic_write_json(out / "report.json", report)
    atomic_write_text(out / "report.md", markdown)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.4f}"


def _plain(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def seeds_needed_text(item: dict[str, Any]) -> str:
    """A claim's or comparison's power analysis in words, e.g. `29 (then not reproduced)`."""
    needed = item.get("seeds_needed")
    if item.get("data_absent"):
        return f"n/a ({DATA_ABSENT})"
    if needed is not None:
        return f"{needed} (then {item['verdict_at_seeds_needed']})"
    comparisons = item.get("comparisons", [item])
    if any(c.get("seeds_missing") for c in comparisons):
        return "n/a (a seed has no value)"
    if any(len(c["differences"]) < 2 for c in comparisons):
        return "n/a (fewer than 2 seeds)"
    if any(_open_on_the_claims_side(c) for c in comparisons):
        return "n/a (a bracket open on the claim's side, and its other ends do not refute)"
    return f"more than {MAX_SEEDS_SEARCHED:,}"


def _open_on_the_claims_side(comparison: dict[str, Any]) -> bool:
    """Whether some seed's bracket has no end least favourable to the claim (claim (h): SAO
    never reached the target), so that no number of seeds could reproduce it."""
    brackets = comparison.get("brackets") or []
    return comparison["relation"] == "less" and any(
        b is not None and b[1] is None for b in brackets
    )


def _ours(claim: dict[str, Any]) -> str:
    """Each comparison's mean difference and interval, arms named by preset (env dropped)."""
    if claim.get("data_absent"):
        return f"{DATA_ABSENT}: {claim['data_absent']}"
    names = {a["key"]: a["key"].removeprefix(a["env"] + "_") for a in claim["arms"]}

    def short(text: str) -> str:
        for key in sorted(names, key=len, reverse=True):
            text = text.replace(key, names[key])
        return text

    parts = []
    for comp in claim["comparisons"]:
        interval = interval_text(comp)
        if "threshold" in comp:
            pair = f"({short(comp['left'])}, {short(comp['right'])}) - {comp['threshold']:g}"
        else:
            pair = f"{short(comp['left'])} - {short(comp['right'])}"
        parts.append(f"{comp['metric']} {pair}: {interval}")
    return "; ".join(parts)


OWN_STUDY = "the report's own study"
"""How `study_rows` names the study a report was written from, as against its `other_studies`
(named by their files)."""

_COLUMNS = (
    "| claim | paper (AIME25 / BeyondAIME pass@1) | ours: mean difference [95% interval] "
    "| verdict | seeds | seeds needed | runs at |"
)


def study_rows(report: dict[str, Any]) -> list[tuple[dict[str, Any], str, str]]:
    """Every (study, claim) row of a report in the order the studies were listed: the claim's
    entry, the table's "runs at" text, and the study's name (its file; `OWN_STUDY` for the
    study the report was written from)."""
    commits = ", ".join(f"`{c}`" for c in report.get("commits", [])) or "not recorded"
    own = f"{commits}, budget `{report['budget']}`: this report (its claims' sections below)"
    rows = [(claim, own, OWN_STUDY) for claim in report["claims"]]
    for study in report.get("other_studies", []):
        where = ", ".join(f"`{c}`" for c in study.get("commits", [])) or "not recorded"
        where += f", budget `{study['budget']}`: [{study['file']}]({study['file']})"
        if study.get("note"):
            where += f"; {study['note']}"
        rows += [(claim, where, study["file"]) for claim in study["claims"]]
    return rows


def current_answers(report: dict[str, Any]) -> dict[str, tuple[dict[str, Any], str, str]]:
    """Per claim id, the row (`study_rows`) whose verdict is the claim's current answer.

    A claim studied once is answered by that study unless its row says `"current": false`; a
    claim studied more than once needs exactly one row with `"current": true` and a
    `why_current` sentence. Anything else raises ValueError in one line."""
    by_claim: dict[str, list[tuple[dict[str, Any], str, str]]] = {}
    for row in study_rows(report):
        by_claim.setdefault(row[0]["id"], []).append(row)
    answers = {}
    for claim_id, rows in by_claim.items():
        marked = [row for row in rows if row[0].get("current") is True]
        if len(rows) == 1 and rows[0][0].get("current", True) is not False:
            marked = rows
        names = ", ".join(row[2] for row in rows)
        if not marked:
            studies = f"{len(rows)} studies" if len(rows) > 1 else "1 study"
            raise ValueError(
                f"claim ({claim_id}) has {studies} ({names}) and none marked "
                '"current": true; mark the one whose verdict is its answer'
            )
        if len(marked) > 1:
            raise ValueError(
                f"claim ({claim_id}) has {len(marked)} studies marked current "
                f"({', '.join(row[2] for row in marked)}); mark exactly one"
            )
        if len(rows) > 1 and not marked[0][0].get("why_current"):
            raise ValueError(
                f"claim ({claim_id}): its current study ({marked[0][2]}) gives no why_current, "
                "the sentence saying why it replaces the claim's other studies"
            )
        answers[claim_id] = marked[0]
    return answers


def summary_table(report: dict[str, Any], every_claim: bool = True) -> list[str]:
    """The table a report opens with: one row per claim, its current answer (`current_answers`)
    with the paper's figure, ours, verdict, seeds and why that study is the answer; with
    `every_claim`, a claim of the claim table with no study in the report is listed as not
    run. Claims come in the claim table's order."""
    answers = current_answers(report)
    ids = [c for c in CLAIMS if every_claim or c in answers]
    ids += [c for c in answers if c not in CLAIMS]
    lines = [
        _COLUMNS + " why this study is the answer |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for claim_id in ids:
        if claim_id not in answers:
            lines.append(_not_run_row(claim_id, report.get("not_run_notes", {})))
            continue
        claim, runs_at, _ = answers[claim_id]
        why = claim.get("why_current") or "the only study of this claim in this report"
        lines.append(f"{_summary_row(claim, runs_at)} {why} |")
    return lines


def history_table(report: dict[str, Any]) -> list[str]:
    """Every row that is not a claim's current answer, in the order the studies were listed
    (none: no lines)."""
    current = {id(row[0]) for row in current_answers(report).values()}
    rows = [_summary_row(c, where) for c, where, _ in study_rows(report) if id(c) not in current]
    return [_COLUMNS, "|---|---|---|---|---|---|---|", *rows] if rows else []


def _not_run_row(claim_id: str, notes: dict[str, str]) -> str:
    claim = CLAIMS[claim_id]
    why = notes.get(claim_id, "no study of this claim in this report")
    return f"| ({claim_id}) {claim.statement} | {claim.paper} | | **{NOT_RUN}** | | | | {why} |"


def _seed_list(seeds: Sequence[int]) -> str:
    """Seeds as ranges: `5-8`, `3, 4`, `0, 2-5`."""
    runs: list[list[int]] = []
    for seed in sorted(seeds):
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    parts = []
    for run in runs:
        parts += [f"{run[0]}-{run[-1]}"] if len(run) > 2 else [str(s) for s in run]
    return ", ".join(parts)


def _summary_row(claim: dict[str, Any], runs_at: str) -> str:
    seeds = str(claim["seeds"])
    added = claim.get("seeds_added_after_looking")
    if added:
        seeds += f" ({_seed_list(added)} added after looking)"
        if claim.get("after_looking"):
            runs_at += f"; added after looking: {claim['after_looking']}"
    return (
        f"| ({claim['id']}) {claim['statement']} | {claim.get('paper', '')} | {_ours(claim)} "
        f"| **{claim['verdict']}** | {seeds} | {seeds_needed_text(claim)} | {runs_at} |"
    )


def render_markdown(
    report: dict[str, Any], every_claim: bool = True, plots: str = "plots/claim_"
) -> str:
    """The report for people: the current answer per claim, the history (every other study),
    the rule and the power analysis's method, then each claim's numbers and verdict.
    `every_claim`: list the claims the report has no study of as not run; `plots`: how the
    plots' paths begin (`<plots><id>.png`, `<plots><id>_curves.png`)."""
    lines = [
        "# `sao reproduce` report",
        "",
        "## Current answer per claim",
        "",
        "One row per claim: the study whose verdict is the claim's current answer, and why it "
        "replaces the claim's other studies (under History). A seeds figure marked "
        '"added after looking" counts seeds run after an earlier result for the claim had been '
        "read (its power analysis or verdict set how many more to run); the runs-at column "
        "says which result.",
        "",
        *summary_table(report, every_claim),
        "",
    ]
    history = history_table(report)
    if history:
        lines += [
            "## History",
            "",
            "Every other study of each claim, in the order the report lists its studies (as "
            "they were added): the claim's current answer above replaces each.",
            "",
            *history,
            "",
        ]
    if report.get("provenance"):
        lines += [report["provenance"], ""]
    lines += [
        f"Budget `{report['budget']}`, {report['seeds_requested']} seed(s) per arm. Ours are "
        "differences left - right of the comparisons below (accuracies as fractions, not "
        "points); the paper's numbers are SAO_SPEC section 7.",
        "",
        "## Verdict rule (fixed before the numbers)",
        "",
        report["rule"],
        "",
        "## Seeds needed (power analysis)",
        "",
        report.get("power_method", POWER_METHOD),
    ]
    for claim in report["claims"]:
        lines += ["", f"## ({claim['id']}) {claim['statement']}", ""]
        lines.append(
            "Arms: "
            + "; ".join(
                f"`{a['key']}` = `{a['preset']}` on {a['env']}"
                + (f" with {', '.join(a['overrides'])}" if a["overrides"] else "")
                for a in claim["arms"]
            )
            + "."
        )
        if claim["notes"]:
            lines += ["", claim["notes"]]
        if claim.get("data_absent"):
            lines += [
                "",
                f"Claim verdict: **{claim['verdict']}**, {DATA_ABSENT}: {claim['data_absent']}.",
            ]
            continue
        for comp in claim["comparisons"]:
            lines += _comparison_lines(comp)
        if claim["verdict"] == NOT_RUN:
            lines += [
                "",
                f"Only {claim['runs_finished']} of its {claim['runs_planned']} runs have "
                "finished: the numbers above are shown as they stand and not judged.",
            ]
        lines += [
            "",
            f"Claim verdict: **{claim['verdict']}** over {claim['seeds']} seed(s), "
            f"{claim['runs_finished']} of {claim['runs_planned']} runs finished. Seeds needed "
            f"at the observed effects: {seeds_needed_text(claim)}.",
            "",
            f"![claim {claim['id']}]({plots}{claim['id']}.png)",
        ]
        if "curves" in claim:
            lines += [
                "",
                f"![claim {claim['id']} curves]({plots}{claim['id']}_curves.png)",
            ]
    return "\n".join(lines) + "\n"


def _bracket_text(bracket: Sequence[float | None] | None) -> str:
    if bracket is None:
        return "n/a"
    low, high = bracket
    return f"[{_plain(low)}, {'unbounded' if high is None else _plain(high)}]"


def _judgement_text(comp: dict[str, Any]) -> str:
    """How a comparison's verdict was reached, in one sentence."""
    low, high = comp["ci95"]
    n = len(comp["differences"])
    interval = (
        f"Mean difference {_num(comp['mean_difference'])}, 95% t-interval "
        f"[{_num(low)}, {_num(high)}] over {n} seed(s)"
    )
    if comp.get("seeds_missing"):
        interval = (
            f"Mean difference {_num(comp['mean_difference'])} over the {n} seed(s) with a value; "
            f"no 95% t-interval, since seed(s) {comp['seeds_missing']} have none"
        )
    if "ends" not in comp:
        return f"{interval}: **{comp['verdict']}**."
    return (
        f"{interval}, read from the straight lines between evals (shown, not judged). At the "
        f"brackets' ends, {ends_text(comp)}: **{comp['verdict']}** (reproduced only if the "
        "ends least favourable to the claim give it, refuted only if the most favourable do)."
    )


def _comparison_lines(comp: dict[str, Any]) -> list[str]:
    margin = f" - {comp['margin']:g}" if comp["relation"] == "not_less" else ""
    bracketed = "brackets" in comp
    if "threshold" in comp:
        title = comp["description"]
        columns = "| seed | value | threshold | value - threshold |"
        if bracketed:
            columns = "| seed | value (between evals) | bracket | threshold | value - threshold |"
    else:
        sign = _SIGN[comp["relation"]]
        title = f"{comp['metric']}: {comp['left']} {sign} {comp['right']}{margin}"
        columns = "| seed | left | right | left - right |"
    lines = ["", f"### {title}", "", f"Metric: {comp['metric_description']}.", "", columns]
    lines.append("|---|---|---|---|---|" if bracketed else "|---|---|---|---|")
    for seed, (a, b) in enumerate(zip(comp["left_values"], comp["right_values"], strict=True)):
        diff = a - b if a is not None and b is not None else None
        bracket = f" {_bracket_text(comp['brackets'][seed])} |" if bracketed else ""
        lines.append(f"| {seed} | {_plain(a)} |{bracket} {_plain(b)} | {_num(diff)} |")
    lines += [
        "",
        f"{_judgement_text(comp)} SD of the differences {_plain(comp.get('sd'))}; seeds needed "
        f"for this comparison alone: {seeds_needed_text(comp)}.",
    ]
    if comp.get("targets"):
        times = comp["arm_values"]
        lines += [
            "",
            "Per seed, target accuracy and seconds to it: "
            + "; ".join(
                f"seed {seed}: n/a (not read)"
                if target is None
                else f"seed {seed}: {_plain(target)}, "
                + ", ".join(f"{key} {_seconds(times[key][seed])}" for key in times)
                for seed, target in enumerate(comp["targets"])
            )
            + ".",
        ]
    if comp.get("seed_notes"):
        lines += ["", "Notes: " + "; ".join(comp["seed_notes"]) + "."]
    if comp["missing"]:
        lines += ["", "Missing: " + "; ".join(comp["missing"]) + "."]
    return lines
