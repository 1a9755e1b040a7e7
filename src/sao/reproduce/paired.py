"""Judging a paired metric (claim (h)'s time ratio): one value per seed from both arms' runs,
compared with a fixed threshold by the study's rule (`sao.reproduce.stats`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sao.reproduce.claims import Comparison, PairedMetric
from sao.reproduce.readers import MissingMetric
from sao.reproduce.report import finite, judge_sides
from sao.reproduce.runs import run_dir_for


def judge_paired(
    comparison: Comparison, metric: PairedMetric, seeds: int, out: Path
) -> dict[str, Any]:
    """A paired metric per seed (left arm's run against right arm's), against the threshold."""
    left_arm, right_arm = comparison.left.arm, comparison.right.arm
    ratios: list[float | None] = []
    times: dict[str, list[float | None]] = {left_arm.key: [], right_arm.key: []}
    targets: list[float | None] = []
    missing: list[str] = []
    notes: list[str] = []
    for seed in range(seeds):
        try:
            reading = metric.read(
                run_dir_for(out, left_arm, seed), run_dir_for(out, right_arm, seed)
            )
        except MissingMetric as err:
            missing.append(str(err))
            for values in (ratios, times[left_arm.key], times[right_arm.key], targets):
                values.append(None)
            continue
        ratios.append(finite(reading.ratio))
        times[left_arm.key].append(reading.candidate_s)
        times[right_arm.key].append(reading.reference_s)
        targets.append(reading.target)
        if reading.reason:
            notes.append(f"seed {seed}: {reading.reason}")
    threshold = [comparison.threshold] * seeds
    return {
        "description": comparison.describe(),
        "metric": metric.name,
        "metric_description": metric.description,
        "relation": comparison.relation,
        "margin": comparison.margin,
        "threshold": comparison.threshold,
        "left": left_arm.key,
        "right": right_arm.key,
        "arm_values": times,
        "targets": targets,
        "left_values": ratios,
        "right_values": threshold,
        **judge_sides(ratios, threshold, comparison.relation, comparison.margin),
        "missing": missing,
        "seed_notes": notes,
    }
