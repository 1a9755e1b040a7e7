"""Judging a paired metric (claim (h)'s time ratio): one value per seed from both arms' recorded
accuracy curves, known only within the bracket its evals allow, compared with a fixed threshold
by the study's rule at the bracket's ends (`sao.reproduce.stats.bracket_verdict`)."""

from __future__ import annotations

from typing import Any

from sao.reproduce.claims import Comparison, PairedMetric
from sao.reproduce.readers import MissingMetric
from sao.reproduce.report import finite, judge_brackets
from sao.reproduce.stats import Relation
from sao.reproduce.study_data import StudyData
from sao.reproduce.time_to_accuracy import Curve, TimeRatio


def judge_paired(comparison: Comparison, metric: PairedMetric, data: StudyData) -> dict[str, Any]:
    """A paired metric per seed (left arm's curve against right arm's), against the threshold."""
    left_arm, right_arm = comparison.left.arm, comparison.right.arm
    readings: list[TimeRatio | None] = []
    missing: list[str] = []
    for seed in range(data.seeds):
        try:
            left = Curve.from_dict(data.curve(left_arm.key, seed))
            right = Curve.from_dict(data.curve(right_arm.key, seed))
            readings.append(metric.read(left, right))
        except MissingMetric as err:
            missing.append(str(err))
            readings.append(None)
    return {
        "description": comparison.describe(),
        "metric": metric.name,
        "metric_description": data.metrics.get(metric.name, metric.description),
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
