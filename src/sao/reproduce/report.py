"""Judge each claim from its runs' numbers and write `report.json`, `report.md` and the plots.

`report.json` holds `commits` (the commits the study's runs were made at), `power_method`, and
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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sao.durable import atomic_write_json, atomic_write_text
from sao.reproduce.claims import CLAIMS, Claim, Comparison, PairedMetric, Side
from sao.reproduce.readers import MissingMetric
from sao.reproduce.runs import run_dir_for, run_state
from sao.reproduce.stats import (
    MAX_SEEDS_SEARCHED,
    POWER_METHOD,
    RULE,
    ComparisonSpread,
    Interval,
    Relation,
    bracket_verdict,
    claim_seeds_needed,
    conjunction,
    ends_text,
    interval_text,
    mean_t_interval,
    sample_sd,
    verdict,
)

_SIGN = {"greater": ">", "less": "<", "not_less": ">="}


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


def judge_comparison(comparison: Comparison, seeds: int, out: Path) -> dict[str, Any]:
    """Read every arm of `comparison` at each seed, pair the sides by seed, and judge."""
    if isinstance(comparison.metric, PairedMetric):
        from sao.reproduce.paired import judge_paired

        return judge_paired(comparison, comparison.metric, seeds, out)
    arm_values: dict[str, list[float | None]] = {}
    missing: list[str] = []
    for side in (comparison.left, comparison.right):
        for arm in side.arms():
            if arm.key in arm_values:
                continue
            values: list[float | None] = []
            for seed in range(seeds):
                try:
                    values.append(finite(comparison.metric.read(run_dir_for(out, arm, seed))))
                except MissingMetric as err:
                    values.append(None)
                    missing.append(str(err))
            arm_values[arm.key] = values
    left = _side_values(comparison.left, arm_values, seeds)
    right = _side_values(comparison.right, arm_values, seeds)
    return {
        "description": comparison.describe(),
        "metric": comparison.metric.name,
        "metric_description": comparison.metric.description,
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


def judge_claim(claim: Claim, seeds: int, out: Path) -> dict[str, Any]:
    comparisons = [judge_comparison(c, seeds, out) for c in claim.comparisons]
    planned = [(arm, seed) for seed in range(seeds) for arm in claim.arms]
    finished = sum(run_state(run_dir_for(out, arm, seed)) == "finished" for arm, seed in planned)
    entry = {
        "id": claim.id,
        "statement": claim.statement,
        "paper": claim.paper,
        "runs_finished": finished,
        "runs_planned": len(planned),
        "arms": [
            {"key": a.key, "env": a.env, "preset": a.preset, "overrides": list(a.overrides)}
            for a in claim.arms
        ],
        "notes": claim.notes,
        "comparisons": comparisons,
    }
    if claim.curves:
        from sao.reproduce.curves import arm_curves

        entry["curves"] = arm_curves(claim, seeds, out)
    return {**entry, **_claim_judgement(entry)}


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


def build_report(
    claims: list[Claim], seeds: int, budget: str, out: Path, commits: list[str] | None = None
) -> dict[str, Any]:
    """The whole report as a JSON-ready dict; `commits`: those the runs were made at."""
    return {
        "budget": budget,
        "seeds_requested": seeds,
        "commits": commits or [],
        "rule": RULE,
        "power_method": POWER_METHOD,
        "claims": [judge_claim(claim, seeds, out) for claim in claims],
    }


def rejudge(report: dict[str, Any]) -> dict[str, Any]:
    """`report` judged again by the current rule and power analysis from the per-seed values it
    stores (each comparison's `left_values` and `right_values`; a paired comparison's ratios and
    brackets read again from its claim's stored `curves`), with each claim's `paper` and `notes`
    from the current claim table: a report whose run directories are gone can still be
    refreshed.

    `other_studies` (optional) are claims judged in separate studies (another budget or
    environment), each `{"file", "budget", "commits", "claims"}` and optionally a `"note"` (what
    set the study apart, shown beside its commit); they are judged again the same
    way and listed in the opening table beside this study's claims, so one table holds every
    verdict."""
    others = [
        {**study, "claims": _rejudge_claims(study["claims"])}
        for study in report.get("other_studies", [])
    ]
    out = {
        **report,
        "commits": report.get("commits", []),
        "rule": RULE,
        "power_method": POWER_METHOD,
        "claims": _rejudge_claims(report["claims"]),
    }
    if others:
        out["other_studies"] = others
    return out


def _rejudge_comparison(comparison: dict[str, Any], claim: dict[str, Any]) -> dict[str, Any]:
    """One stored comparison judged again; a paired one (claim (h)) from the claim's curves."""
    if "threshold" in comparison:
        from sao.reproduce.paired import rejudge_paired

        return rejudge_paired(comparison, claim.get("curves"))
    left, right = comparison["left_values"], comparison["right_values"]
    return {**comparison, **judge_sides(left, right, comparison["relation"], comparison["margin"])}


def _rejudge_claims(judged: list[dict[str, Any]]) -> list[dict[str, Any]]:
    claims = []
    for claim in judged:
        comparisons = [_rejudge_comparison(c, claim) for c in claim["comparisons"]]
        known = CLAIMS.get(claim["id"])
        entry = {**claim, "comparisons": comparisons}
        # The claim table's words on how a claim's values are read follow the code that reads
        # them, as the verdicts do.
        entry["paper"] = known.paper if known is not None else claim.get("paper", "")
        entry["notes"] = known.notes if known is not None else claim.get("notes", "")
        claims.append({**entry, **_claim_judgement(entry)})
    return claims


def write_report(report: dict[str, Any], out: Path) -> None:
    """`report.json`, `report.md` and `plots/claim_<id>.png` under `out`."""
    from sao.reproduce.plots import plot_claim

    plot_dir = out / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    for claim in report["claims"]:
        plot_claim(claim, plot_dir / f"claim_{claim['id']}.png")
        if "curves" in claim:
            from sao.reproduce.curves import plot_curves

            plot_curves(claim, plot_dir / f"claim_{claim['id']}_curves.png")
    write_text_report(report, out)


def write_text_report(report: dict[str, Any], out: Path) -> None:
    """`report.json` and `report.md` under `out` (the plots are left as they are)."""
    atomic_write_json(out / "report.json", report)
    atomic_write_text(out / "report.md", render_markdown(report))


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.4f}"


def _plain(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def seeds_needed_text(item: dict[str, Any]) -> str:
    """A claim's or comparison's power analysis in words, e.g. `29 (then not reproduced)`."""
    needed = item.get("seeds_needed")
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


def summary_table(report: dict[str, Any]) -> list[str]:
    """The table a report opens with: per claim the paper's figure, ours, verdict and seeds."""
    commits = ", ".join(f"`{c}`" for c in report.get("commits", [])) or "not recorded"
    lines = [
        "| claim | paper (AIME25 / BeyondAIME pass@1) | ours: mean difference [95% interval] "
        "| verdict | seeds | seeds needed | runs at |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [_summary_row(c, commits) for c in report["claims"]]
    for study in report.get("other_studies", []):
        where = ", ".join(f"`{c}`" for c in study.get("commits", [])) or "not recorded"
        where += f", budget `{study['budget']}`: [{study['file']}]({study['file']})"
        if study.get("note"):
            where += f"; {study['note']}"
        lines += [_summary_row(c, where) for c in study["claims"]]
    return lines


def _summary_row(claim: dict[str, Any], runs_at: str) -> str:
    return (
        f"| ({claim['id']}) {claim['statement']} | {claim.get('paper', '')} | {_ours(claim)} "
        f"| **{claim['verdict']}** | {claim['seeds']} | {seeds_needed_text(claim)} | {runs_at} |"
    )


def render_markdown(report: dict[str, Any]) -> str:
    """The report for people: one summary table, the rule and the power analysis's method, then
    each claim's numbers and verdict."""
    lines = ["# `sao reproduce` report", "", *summary_table(report), ""]
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
            f"![claim {claim['id']}](plots/claim_{claim['id']}.png)",
        ]
        if "curves" in claim:
            lines += [
                "",
                f"![claim {claim['id']} curves](plots/claim_{claim['id']}_curves.png)",
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
