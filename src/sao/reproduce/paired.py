"""Judging a paired metric (claim (h)'s time ratio): one value per seed from both arms' runs,
known only within the bracket its evals allow, compared with a fixed threshold by the study's
rule at the bracket's ends (`sao.reproduce.stats.bracket_verdict`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sao.reproduce.claims import TIME_RATIO, Comparison, PairedMetric
from sao.reproduce.readers import MissingMetric
from sao.reproduce.report import finite, judge_brackets
from sao.reproduce.runs import run_dir_for
from sao.reproduce.stats import Relation
from sao.reproduce.time_to_accuracy import Curve, TimeRatio, time_ratio


def judge_paired(
    comparison: Comparison, metric: PairedMetric, seeds: int, out: Path
) -> dict[str, Any]:
    """A paired metric per seed (left arm's run against right arm's), against the threshold."""
    left_arm, right_arm = comparison.left.arm, comparison.right.arm
    readings: list[TimeRatio | None] = []
    missing: list[str] = []
    for seed in range(seeds):
        try:
            readings.append(
                metric.read(run_dir_for(out, left_arm, seed), run_dir_for(out, right_arm, seed))
            )
        except MissingMetric as err:
            missing.append(str(err))
            readings.append(None)
    return {
        "description": comparison.describe(),
        "metric": metric.name,
        "metric_description": metric.description,
        "relation": comparison.relation,
        "margin": comparison.margin,
        "threshold": comparison.threshold,
        "left": left_arm.key,
        "right": right_arm.key,
        **paired_values(
            readings,
            (left_arm.key, right_arm.key),
            comparison.threshold,
            comparison.relation,
            comparison.margin,
        ),
        "missing": missing,
    }


def paired_values(
    readings: list[TimeRatio | None],
    arms: tuple[str, str],
    threshold: float,
    relation: Relation,
    margin: float,
) -> dict[str, Any]:
    """What a comparison keeps of its per-seed readings (None: not read): each arm's seconds to
    the target (`arm_values`), the targets, the ratios shown (`left_values`), their brackets,
    notes on seeds whose ratio is a bound or missing, and the judgement (`judge_brackets`)."""
    left_key, right_key = arms
    ratios = [None if r is None else finite(r.ratio) for r in readings]
    brackets = [
        None if r is None or r.low is None or finite(r.ratio) is None else (r.low, r.high)
        for r in readings
    ]
    return {
        "arm_values": {
            left_key: [None if r is None else r.candidate_s for r in readings],
            right_key: [None if r is None else r.reference_s for r in readings],
        },
        "targets": [None if r is None else r.target for r in readings],
        "left_values": ratios,
        "right_values": [threshold] * len(readings),
        **judge_brackets(ratios, brackets, threshold, relation, margin),
        "seed_notes": [
            f"seed {seed}: {r.reason}"
            for seed, r in enumerate(readings)
            if r is not None and r.reason
        ],
    }


NO_BRACKETS = (
    "the report keeps neither the runs' curves nor the ratios' brackets, so its ratios cannot be "
    "judged at their brackets' ends"
)


def rejudge_paired(
    comparison: dict[str, Any], curves: dict[str, list[dict[str, list] | None]] | None
) -> dict[str, Any]:
    """A stored paired comparison judged again: from the claim's stored `curves` when they hold
    both arms (every ratio and bracket read again, as `judge_paired` reads them from the runs),
    else from its stored `brackets`; without either, no seed has a bracket (inconclusive)."""
    relation, margin = comparison["relation"], comparison["margin"]
    threshold = comparison["threshold"]
    arms = (comparison["left"], comparison["right"])
    readable = comparison["metric"] == TIME_RATIO.name and curves is not None
    if readable and all(key in curves for key in arms):
        readings = [
            None
            if left is None or right is None
            else time_ratio(Curve.from_dict(left), Curve.from_dict(right))
            for left, right in zip(curves[arms[0]], curves[arms[1]], strict=True)
        ]
        return {
            **comparison,
            "metric_description": TIME_RATIO.description,
            **paired_values(readings, arms, threshold, relation, margin),
        }
    values = comparison["left_values"]
    brackets = comparison.get("brackets")
    missing = list(comparison["missing"])
    if brackets is None:
        brackets = [None] * len(values)
        missing = [*missing, NO_BRACKETS] if NO_BRACKETS not in missing else missing
    return {
        **comparison,
        **judge_brackets(values, brackets, threshold, relation, margin),
        "missing": missing,
    }
