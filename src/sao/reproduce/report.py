"""Judge each claim from its runs' numbers and write `report.json`, `report.md` and the plots.

`report.json` holds `claims`: one entry per claim with `id`, `statement`, `verdict`, `seeds`
(how many seeds every comparison of the claim could use), and `comparisons`, each with the
per-seed values of every arm it reads (`arm_values`), of each side, the per-seed differences,
`mean_difference`, `ci95` and its own `verdict`. Values a run lacks are `null` and named in
`missing`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sao.durable import atomic_write_json, atomic_write_text
from sao.reproduce.claims import Claim, Comparison, Side
from sao.reproduce.readers import MissingMetric
from sao.reproduce.runs import run_dir_for, run_state
from sao.reproduce.stats import RULE, conjunction, mean_t_interval, verdict

_SIGN = {"greater": ">", "less": "<", "not_less": ">="}


def _finite(value: float | None) -> float | None:
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
    arm_values: dict[str, list[float | None]] = {}
    missing: list[str] = []
    for side in (comparison.left, comparison.right):
        for arm in side.arms():
            if arm.key in arm_values:
                continue
            values: list[float | None] = []
            for seed in range(seeds):
                try:
                    values.append(_finite(comparison.metric.read(run_dir_for(out, arm, seed))))
                except MissingMetric as err:
                    values.append(None)
                    missing.append(str(err))
            arm_values[arm.key] = values
    left = _side_values(comparison.left, arm_values, seeds)
    right = _side_values(comparison.right, arm_values, seeds)
    paired = [
        (seed, a - b)
        for seed, (a, b) in enumerate(zip(left, right, strict=True))
        if a is not None and b is not None
    ]
    interval = mean_t_interval([d for _, d in paired])
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
        "seeds_used": [seed for seed, _ in paired],
        "differences": [d for _, d in paired],
        "mean_difference": _finite(interval.mean),
        "ci95": [_finite(interval.low), _finite(interval.high)],
        "verdict": verdict(interval, comparison.relation, comparison.margin),
        "missing": missing,
    }


NOT_RUN = "not run"
"""The verdict of a claim some of whose runs have not finished (`sao reproduce --report-only`
on a study still under way): its numbers are shown, but nothing is judged from part of them."""


def judge_claim(claim: Claim, seeds: int, out: Path) -> dict[str, Any]:
    comparisons = [judge_comparison(c, seeds, out) for c in claim.comparisons]
    planned = [(arm, seed) for seed in range(seeds) for arm in claim.arms]
    finished = sum(run_state(run_dir_for(out, arm, seed)) == "finished" for arm, seed in planned)
    complete = finished == len(planned)
    return {
        "id": claim.id,
        "statement": claim.statement,
        "verdict": conjunction([c["verdict"] for c in comparisons]) if complete else NOT_RUN,
        "runs_finished": finished,
        "runs_planned": len(planned),
        "seeds": min(len(c["seeds_used"]) for c in comparisons),
        "arms": [
            {"key": a.key, "env": a.env, "preset": a.preset, "overrides": list(a.overrides)}
            for a in claim.arms
        ],
        "notes": claim.notes,
        "comparisons": comparisons,
    }


def build_report(claims: list[Claim], seeds: int, budget: str, out: Path) -> dict[str, Any]:
    """The whole report as a JSON-ready dict."""
    return {
        "budget": budget,
        "seeds_requested": seeds,
        "rule": RULE,
        "claims": [judge_claim(claim, seeds, out) for claim in claims],
    }


def write_report(report: dict[str, Any], out: Path) -> None:
    """`report.json`, `report.md` and `plots/claim_<id>.png` under `out`."""
    from sao.reproduce.plots import plot_claim

    plot_dir = out / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    for claim in report["claims"]:
        plot_claim(claim, plot_dir / f"claim_{claim['id']}.png")
    atomic_write_json(out / "report.json", report)
    atomic_write_text(out / "report.md", render_markdown(report))


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.4f}"


def _plain(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def render_markdown(report: dict[str, Any]) -> str:
    """The report for people: the rule first, then each claim's numbers and verdict."""
    lines = [
        "# `sao reproduce` report",
        "",
        f"Budget `{report['budget']}`, {report['seeds_requested']} seed(s) per arm.",
        "",
        "## Verdict rule (fixed before the numbers)",
        "",
        report["rule"],
        "",
        "## Verdicts",
        "",
        "| claim | statement | seeds | runs finished | verdict |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| ({c['id']}) | {c['statement']} | {c['seeds']} | "
        f"{c['runs_finished']} of {c['runs_planned']} | **{c['verdict']}** |"
        for c in report["claims"]
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
            f"Claim verdict: **{claim['verdict']}** over {claim['seeds']} seed(s).",
            "",
            f"![claim {claim['id']}](plots/claim_{claim['id']}.png)",
        ]
    return "\n".join(lines) + "\n"


def _comparison_lines(comp: dict[str, Any]) -> list[str]:
    margin = f" - {comp['margin']:g}" if comp["relation"] == "not_less" else ""
    lines = [
        "",
        f"### {comp['metric']}: {comp['left']} {_SIGN[comp['relation']]} {comp['right']}{margin}",
        "",
        f"Metric: {comp['metric_description']}.",
        "",
        "| seed | left | right | left - right |",
        "|---|---|---|---|",
    ]
    for seed, (a, b) in enumerate(zip(comp["left_values"], comp["right_values"], strict=True)):
        diff = a - b if a is not None and b is not None else None
        lines.append(f"| {seed} | {_plain(a)} | {_plain(b)} | {_num(diff)} |")
    low, high = comp["ci95"]
    lines += [
        "",
        f"Mean difference {_num(comp['mean_difference'])}, 95% t-interval "
        f"[{_num(low)}, {_num(high)}] over {len(comp['differences'])} seed(s): "
        f"**{comp['verdict']}**.",
    ]
    if comp["missing"]:
        lines += ["", "Missing: " + "; ".join(comp["missing"]) + "."]
    return lines
