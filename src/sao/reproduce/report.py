"""Judge each claim from its study's per-seed data into a report (`sao.reproduce.render` writes
it out as `report.json`, `report.md` and the plots).

The data (`sao.reproduce.study_data`) is what is judged, whether a study has just run or is
refreshed long after its runs are gone. `report.json` holds `data` (the study's data directory,
relative to the report), `commits` (the commits the study's runs were made at), `power_method`, and
`claims`: one entry per claim with `id`, `statement`, `paper` (what the paper reports),
`verdict`, `seeds` (how many seeds every comparison of the claim could use), `seeds_needed` and
`verdict_at_seeds_needed` (the power analysis, `sao.reproduce.stats.claim_seeds_needed`), and
`comparisons`, each with the per-seed values of every arm it reads (`arm_values`), of each side,
the seeds with a value (`seeds_used`) and without (`seeds_missing`), the former's differences,
`mean_difference`, `sd` (their sample SD), `ci95` (over every seed: none while a seed lacks a
value), its own `verdict` and its own `seeds_needed` / `verdict_at_seeds_needed`. Values a run
lacks are `null` and named in `missing`. A comparison of a paired metric (claim (h)'s time
ratio) has `threshold`: its `left_values` are the per-seed ratios read from the straight lines
between evals (shown, not judged), its `right_values` the threshold, `brackets` each ratio's
`[low, high]` (high `null`: unbounded), `ends` the low and high ends' differences, means and
intervals, from which its verdict is taken (`sao.reproduce.stats.bracket_verdict`),
`arm_values` each arm's seconds to the target and `targets` the per-seed target accuracies, with
`seed_notes` on seeds whose ratio is a bound or missing; a claim with curves (h) has `curves`,
per arm and seed (`sao.reproduce.curves`).

A row without data to judge it from has `data_absent` (why) and the verdict inconclusive.

A report that also lists `other_studies` holds several studies of one claim; each claim entry
(a row) may then say `current` (true on the one row whose verdict is the claim's current answer,
with `why_current`, a sentence saying why it replaces the others) and
`seeds_added_after_looking` (seeds run after an earlier result for the claim had been read, with
`after_looking`, which result); `not_run_notes` (optional, per claim id) says what stands in for
a claim no study answers. `sao.reproduce.render.current_answers` checks that each claim has
exactly one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sao.reproduce.claims import CLAIMS, Claim, Comparison, PairedMetric, Side
from sao.reproduce.readers import MissingMetric
from sao.reproduce.stats import (
    POWER_METHOD,
    RULE,
    ComparisonSpread,
    Interval,
    Relation,
    bracket_verdict,
    claim_seeds_needed,
    conjunction,
    mean_t_interval,
    sample_sd,
    verdict,
)
from sao.reproduce.study_data import DataAbsent, StudyData, read_study_data


def finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _side_values(
    side: Side, arm_values: dict[str, list[float | None]], seeds: int
) -> list[float | None]:
    values = arm_values[side.arm.key]
    if side.minus is None:
        return list(values)
    minus = arm_values[side.minus.key]
    return [
        a - b if a is not None and b is not None else None
        for a, b in zip(values, minus, strict=True)
    ][:seeds]


def judge_comparison(comparison: Comparison, data: StudyData) -> dict[str, Any]:
    """Read every arm of `comparison` at each seed from the study's data, pair the sides by
    seed, and judge."""
    seeds = data.seeds
    if isinstance(comparison.metric, PairedMetric):
        from sao.reproduce.paired import judge_paired

        return judge_paired(comparison, comparison.metric, data)
    arm_values: dict[str, list[float | None]] = {}
    missing: list[str] = []
    for side in (comparison.left, comparison.right):
        for arm in side.arms():
            if arm.key in arm_values:
                continue
            values: list[float | None] = []
            for seed in range(seeds):
                try:
                    value = data.value(comparison.metric.name, arm.key, seed)
                    values.append(None if value is None else finite(value))
                except MissingMetric as err:
                    values.append(None)
                    missing.append(str(err))
            arm_values[arm.key] = values
    left = _side_values(comparison.left, arm_values, seeds)
    right = _side_values(comparison.right, arm_values, seeds)
    return {
        "description": comparison.describe(),
        "metric": comparison.metric.name,
        "metric_description": data.metrics.get(
            comparison.metric.name, comparison.metric.description
        ),
        "relation": comparison.relation,
        "margin": comparison.margin,
        "left": comparison.left.describe(),
        "right": comparison.right.describe(),
        "arm_values": arm_values,
        "left_values": left,
        "right_values": right,
        **judge_sides(left, right, comparison.relation, comparison.margin),
        "missing": missing,
    }


def _difference(a: float | None, b: float | None) -> float | None:
    """`a - b`, or None when either is missing or the difference is not finite."""
    return None if a is None or b is None else finite(a - b)


def _rule_interval(per_seed: Sequence[float | None]) -> Interval:
    """The rule's interval over every seed: none (inconclusive) when any seed lacks a value, so
    that no seed is dropped to make one; an unbounded value (inf) gives none either."""
    if any(d is None for d in per_seed):
        return Interval(math.nan, -math.inf, math.inf, len(per_seed))
    return mean_t_interval([d for d in per_seed if d is not None])


def judge_sides(
    left: list[float | None], right: list[float | None], relation: Relation, margin: float
) -> dict[str, Any]:
    """The judged part of a comparison from its per-seed side values (None: missing): seeds
    with a value (`seeds_used`) and without (`seeds_missing`), the differences of the former,
    their mean and SD, the 95% interval over every seed (none if any seed lacks a value), the
    verdict, and the seeds needed."""
    per_seed = [_difference(a, b) for a, b in zip(left, right, strict=True)]
    differences = [d for d in per_seed if d is not None]
    interval = _rule_interval(per_seed)
    missing = [seed for seed, d in enumerate(per_seed) if d is None]
    needed = claim_seeds_needed([_spread(differences, missing, relation, margin)])
    return {
        "seeds_used": [seed for seed, d in enumerate(per_seed) if d is not None],
        "seeds_missing": missing,
        "differences": differences,
        "mean_difference": finite(sum(differences) / len(differences)) if differences else None,
        "sd": finite(sample_sd(differences)) if len(differences) >= 2 else None,
        "ci95": [finite(interval.low), finite(interval.high)],
        "verdict": verdict(interval, relation, margin),
        "seeds_needed": needed.seeds,
        "verdict_at_seeds_needed": needed.verdict,
    }


def _spread(
    differences: Sequence[float], missing: Sequence[int], relation: Relation, margin: float
) -> ComparisonSpread:
    """The power analysis's view of a comparison: a seed without a value stays in as NaN, so
    no figure is projected while one is missing."""
    return ComparisonSpread([*differences, *[math.nan] * len(missing)], relation, margin)


def _bracket_ends(
    brackets: Sequence[Sequence[float | None] | None], threshold: float
) -> tuple[list[float | None], list[float | None]]:
    """Per seed, each bracket's low and high end minus `threshold` (inf: unbounded; None: the
    seed has no value)."""
    low = [None if b is None or b[0] is None else b[0] - threshold for b in brackets]
    high = [
        None if b is None or b[0] is None else math.inf if b[1] is None else b[1] - threshold
        for b in brackets
    ]
    return low, high


def _end_fields(per_seed: Sequence[float | None]) -> dict[str, Any]:
    """One end's differences as the report keeps them: mean and 95% interval over every seed
    (none when a seed has no value or is unbounded there)."""
    interval = _rule_interval(per_seed)
    return {
        "differences": [None if d is None else finite(d) for d in per_seed],
        "mean_difference": finite(interval.mean),
        "ci95": [finite(interval.low), finite(interval.high)],
    }


def _judged_ends(
    low: list[float | None], high: list[float | None], relation: Relation
) -> tuple[list[float | None], list[float | None]]:
    """The ends (favourable to the claim, unfavourable to it): the low ends favour `less`."""
    return (low, high) if relation == "less" else (high, low)


def judge_brackets(
    values: list[float | None],
    brackets: Sequence[Sequence[float | None] | None],
    threshold: float,
    relation: Relation,
    margin: float,
) -> dict[str, Any]:
    """A paired metric against `threshold` whose per-seed value is known only within a bracket
    (`[low, high]`, high None: unbounded; None: no value). `values` are the figures shown (claim
    (h): read from the straight lines between evals): their differences, mean, SD and interval
    are reported as `judge_sides` gives them, but the verdict and seeds needed come from the
    bracket ends (`bracket_verdict`), kept as `ends`."""
    shown = judge_sides(values, [threshold] * len(values), relation, margin)
    low, high = _bracket_ends(brackets, threshold)
    favourable, unfavourable = _judged_ends(low, high, relation)
    judged = bracket_verdict(
        _rule_interval(favourable), _rule_interval(unfavourable), relation, margin
    )
    needed = claim_seeds_needed([_bracket_spread(brackets, threshold, relation, margin)])
    return {
        **shown,
        "brackets": [None if b is None else list(b) for b in brackets],
        "ends": {"low": _end_fields(low), "high": _end_fields(high)},
        "verdict": judged,
        "seeds_needed": needed.seeds,
        "verdict_at_seeds_needed": needed.verdict,
    }


def _bracket_spread(
    brackets: Sequence[Sequence[float | None] | None],
    threshold: float,
    relation: Relation,
    margin: float,
) -> ComparisonSpread:
    favourable, unfavourable = _judged_ends(*_bracket_ends(brackets, threshold), relation)

    def nan_if_missing(ends: list[float | None]) -> list[float]:
        return [math.nan if d is None else d for d in ends]

    return ComparisonSpread(
        nan_if_missing(unfavourable), relation, margin, refuting=nan_if_missing(favourable)
    )


def comparison_spread(comparison: dict[str, Any]) -> ComparisonSpread:
    """A judged comparison (an entry of a claim's `comparisons`) as the power analysis sees it."""
    relation, margin = comparison["relation"], comparison["margin"]
    if "brackets" in comparison:
        return _bracket_spread(comparison["brackets"], comparison["threshold"], relation, margin)
    missing = comparison.get("seeds_missing", [])
    return _spread(comparison["differences"], missing, relation, margin)


NOT_RUN = "not run"
"""The verdict of a claim some of whose runs have not finished (`sao reproduce --report-only`
on a study still under way): its numbers are shown, but nothing is judged from part of them."""


def judge_claim(claim: Claim, data: StudyData) -> dict[str, Any]:
    """`claim` judged from a study's per-seed data (`sao.reproduce.study_data`)."""
    comparisons = [judge_comparison(c, data) for c in claim.comparisons]
    planned = [(arm, seed) for seed in range(data.seeds) for arm in claim.arms]
    finished = sum(data.finished(arm.key, seed) for arm, seed in planned)
    entry = {
        "id": claim.id,
        "statement": claim.statement,
        "paper": claim.paper,
        "runs_finished": finished,
        "runs_planned": len(planned),
        "arms": _arm_entries(claim),
        "notes": claim.notes,
        "comparisons": comparisons,
    }
    if claim.curves:
        from sao.reproduce.curves import arm_curves

        entry["curves"] = arm_curves(claim, data)
    return {**entry, **_claim_judgement(entry)}


def _arm_entries(claim: Claim) -> list[dict[str, Any]]:
    return [
        {"key": a.key, "env": a.env, "preset": a.preset, "overrides": list(a.overrides)}
        for a in claim.arms
    ]


def _claim_judgement(claim: dict[str, Any]) -> dict[str, Any]:
    """A claim's verdict, seeds and power analysis from its judged comparisons."""
    comparisons = claim["comparisons"]
    needed = claim_seeds_needed([comparison_spread(c) for c in comparisons])
    complete = claim["runs_finished"] == claim["runs_planned"]
    return {
        "verdict": conjunction([c["verdict"] for c in comparisons]) if complete else NOT_RUN,
        "seeds": min(len(c["seeds_used"]) for c in comparisons),
        "seeds_needed": needed.seeds,
        "verdict_at_seeds_needed": needed.verdict,
    }


def build_report(claims: list[Claim], data: StudyData) -> dict[str, Any]:
    """The whole report of one study as a JSON-ready dict, judged from its data."""
    return {
        "budget": data.budget,
        "seeds_requested": data.seeds,
        "commits": list(data.commits),
        "rule": RULE,
        "power_method": POWER_METHOD,
        "claims": [judge_claim(claim, data) for claim in claims],
    }


ROW_MARKS = ("current", "why_current", "seeds_added_after_looking", "after_looking")
"""What a report says of a row beyond its data: which row answers its claim and why, and which
seeds were run after an earlier result had been read (kept as written on a refresh)."""

DATA_ABSENT = "data absent"


def rejudge(report: dict[str, Any], base: Path) -> dict[str, Any]:
    """`report` judged again by the current rule, power analysis and claim table from the
    per-seed data of each of its studies (`sao.reproduce.study_data`), whose directory the
    study names as `data`, relative to `base`; nothing is judged from the values the report
    itself holds. A row whose study has no data, or whose data does not answer its claim, is
    inconclusive and says why (`data_absent`).

    `other_studies` (optional) are claims judged in separate studies (another budget or
    environment), each `{"file", "data", "claims"}` and optionally a `"note"` (what set the
    study apart, shown beside its commit); they are judged again the same way, and each
    claim's row marked current opens the report, the others following under History. A row
    keeps its `ROW_MARKS`; its numbers, the study's budget and commits come from the data."""
    out = {**report, "rule": RULE, "power_method": POWER_METHOD, **_rejudge_study(report, base)}
    if report.get("other_studies"):
        out["other_studies"] = [
            {**study, **_rejudge_study(study, base)} for study in report["other_studies"]
        ]
    return out


def study_data_of(study: dict[str, Any], base: Path) -> StudyData:
    """The data of a report's study (its `data` directory under `base`); DataAbsent says why
    there is none."""
    if not study.get("data"):
        raise DataAbsent("the report names no data directory for this study")
    return read_study_data(base / study["data"])


def _rejudge_study(study: dict[str, Any], base: Path) -> dict[str, Any]:
    """A study's rows, budget and commits judged again from its data."""
    try:
        data = study_data_of(study, base)
    except DataAbsent as err:
        return {"claims": [_absent_row(row, str(err)) for row in study["claims"]]}
    rows = []
    for row in study["claims"]:
        marks = {key: row[key] for key in ROW_MARKS if key in row}
        if row["id"] not in CLAIMS:
            rows.append(_absent_row(row, f"claim ({row['id']}) is not in the claim table"))
        elif row["id"] not in data.claims:
            rows.append(_absent_row(row, f"{data.where} does not answer claim ({row['id']})"))
        else:
            rows.append({**judge_claim(CLAIMS[row["id"]], data), **marks})
    judged = {"budget": data.budget, "commits": list(data.commits), "claims": rows}
    if "seeds_requested" in study:
        judged["seeds_requested"] = data.seeds
    return judged


def _absent_row(row: dict[str, Any], why: str) -> dict[str, Any]:
    """A row with no data to judge it from: inconclusive, saying why; no numbers."""
    known = CLAIMS.get(row["id"])
    return {
        "id": row["id"],
        "statement": known.statement if known is not None else row.get("statement", ""),
        "paper": known.paper if known is not None else row.get("paper", ""),
        "notes": known.notes if known is not None else row.get("notes", ""),
        "arms": [] if known is None else _arm_entries(known),
        "comparisons": [],
        "runs_finished": 0,
        "runs_planned": 0,
        "verdict": "inconclusive",
        "data_absent": why,
        "seeds": 0,
        "seeds_needed": None,
        "verdict_at_seeds_needed": None,
        **{key: row[key] for key in ROW_MARKS if key in row},
    }
