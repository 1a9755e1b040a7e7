"""Print claim (h)'s per-seed time-to-accuracy ratios for runs made outside `sao reproduce`: each
candidate run against the reference run of the same seed (same order), with the reference's
final held-out accuracy as the target, read from both runs' eval curves (training seconds, value
pretraining counted, evals not; `sao.reproduce.time_to_accuracy`). Also the trajectories each
needed to reach that target, so time and sample efficiency can be told apart:

python scripts/time_ratios.py \
    --candidate runs/h_iso/sao_mb4_s0,runs/h_iso/sao_mb4_s1,runs/h_iso/sao_mb4_s2 \
    --reference runs/reproduce_h_full/calc_grpo_timed/seed0,...
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sao.reproduce.time_to_accuracy import Curve, read_curve, time_ratio, time_to_accuracy


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


def seed_row(candidate: Curve, reference: Curve) -> dict[str, float | None | str]:
    """One seed's numbers: the target, both runs' seconds and trajectories to it, the ratio."""
    ratio = time_ratio(candidate, reference)
    target = ratio.target
    return {
        "target": target,
        "candidate_s": ratio.candidate_s,
        "reference_s": ratio.reference_s,
        "ratio": ratio.ratio,
        "reason": ratio.reason,
        "candidate_traj": time_to_accuracy(candidate.trajectories, candidate.accuracy, target),
        "reference_traj": time_to_accuracy(reference.trajectories, reference.accuracy, target),
        "candidate_final": candidate.accuracy[-1],
        "candidate_end_s": candidate.seconds[-1],
        "reference_end_s": reference.seconds[-1],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidate", required=True, help="comma-separated run dirs, by seed")
    parser.add_argument("--reference", required=True, help="comma-separated run dirs, by seed")
    args = parser.parse_args(argv)
    candidates = [Path(p) for p in args.candidate.split(",") if p]
    references = [Path(p) for p in args.reference.split(",") if p]
    if len(candidates) != len(references):
        parser.error(f"{len(candidates)} candidate runs but {len(references)} reference runs")
    print(
        "| seed | target | candidate s | reference s | ratio | candidate traj | reference traj "
        "| candidate final | end s (cand / ref) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for seed, (cand, ref) in enumerate(zip(candidates, references, strict=True)):
        row = seed_row(read_curve(cand), read_curve(ref))
        ratio = _fmt(row["ratio"], ".2f") + (f" ({row['reason']})" if row["reason"] else "")
        print(
            f"| {seed} | {row['target']:.3f} | {_fmt(row['candidate_s'])} | "
            f"{_fmt(row['reference_s'])} | {ratio} | {_fmt(row['candidate_traj'], '.0f')} | "
            f"{_fmt(row['reference_traj'], '.0f')} | {row['candidate_final']:.3f} | "
            f"{row['candidate_end_s']:.0f} / {row['reference_end_s']:.0f} |"
        )


if __name__ == "__main__":
    main()
