"""Time to accuracy: when a run's held-out accuracy curve first reaches a target, and claim (h)'s
per-seed ratio of two runs' times.

A run's curve is its held-out evals in order: x is training time (value pretraining plus
`time/train_s`, the RL loop's wall seconds with every eval taken out) or trajectories sampled
(`rollout/trajectories_sampled`), y is `eval/accuracy`. Between two evals the curve is the
straight line joining them. `time_to_accuracy(xs, ys, target)` is the first x where that
piecewise-linear curve reaches `target`:

- `ys[0] >= target`: `xs[0]` (reached before training, or at its start);
- else the first i with `ys[i-1] < target <= ys[i]`:
  `xs[i-1] + (target - ys[i-1]) / (ys[i] - ys[i-1]) * (xs[i] - xs[i-1])`;
- never reached within the run: None.

The straight line is a guess: all the evals say is that the curve first reaches `target`
somewhere after the last eval below it and no later than the first eval at or above it
(`crossing_bracket`).

Claim (h) pairs two arms at one seed: the target is the reference arm's (GRPO's) final accuracy,
`T_ref` the reference's own time to it and `T` the candidate's (SAO's); the per-seed value is
`T / T_ref`, claimed below 0.5. `time_ratio` gives it read from the straight lines (`ratio`, the
figure shown) and the bracket the evals allow (`low`, `high`): the earliest candidate crossing
over the latest reference crossing, and the latest over the earliest. The verdict is taken at the
bracket's ends (`sao.reproduce.stats.bracket_verdict`), never from the straight lines. Edge cases:
a reference whose own first eval already reaches its final accuracy (it never rose above its
start, `T_ref` at its start) gives no ratio; a candidate that never reached the target gives its
lower bound, `T_end / T_ref` (its whole run's training time, with the latest reference crossing
for the bracket's low end), as `ratio` and a bracket unbounded above: such a seed counts against
the claim, it is never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sao.plumbing.durable import read_jsonl
from sao.reproduce.readers import MissingMetric, read_summary

CLAIMED_RATIO = 0.5
"""Claim (h): SAO reaches GRPO's final accuracy in at most this fraction of GRPO's time."""


def time_to_accuracy(xs: Sequence[float], ys: Sequence[float], target: float) -> float | None:
    """The first x at which the piecewise-linear curve through `(xs[i], ys[i])` reaches `target`
    (see the module doc); None if it never does. `xs` must be non-decreasing."""
    if len(xs) != len(ys):
        raise ValueError(f"time_to_accuracy: {len(xs)} x values but {len(ys)} accuracies")
    if not xs:
        raise ValueError("time_to_accuracy: an empty curve")
    if any(b < a for a, b in zip(xs, xs[1:], strict=False)):
        raise ValueError("time_to_accuracy: x values must be non-decreasing")
    if ys[0] >= target:
        return float(xs[0])
    for i in range(1, len(xs)):
        (x0, y0), (x1, y1) = (xs[i - 1], ys[i - 1]), (xs[i], ys[i])
        if y0 < target <= y1:
            return x0 + (target - y0) / (y1 - y0) * (x1 - x0)
    return None


def crossing_bracket(
    xs: Sequence[float], ys: Sequence[float], target: float
) -> tuple[float, float] | None:
    """Where the curve through `(xs[i], ys[i])` first reaches `target`, as far as its points
    tell: `(xs[i-1], xs[i])` for the first eval i at or above it (the crossing lies after the
    last eval below it and no later than i), `(xs[0], xs[0])` if the first eval already reaches
    it, None if no eval does. `time_to_accuracy` lies inside it."""
    for i, y in enumerate(ys):
        if y >= target:
            return (float(xs[max(0, i - 1)]), float(xs[i]))
    return None


@dataclass(frozen=True)
class Curve:
    """A run's held-out accuracy against training seconds and against trajectories sampled."""

    seconds: tuple[float, ...]
    trajectories: tuple[float, ...]
    accuracy: tuple[float, ...]

    def to_dict(self) -> dict[str, list[float]]:
        return {
            "train_s": list(self.seconds),
            "trajectories": list(self.trajectories),
            "accuracy": list(self.accuracy),
        }

    @classmethod
    def from_dict(cls, stored: dict[str, list[float]]) -> Curve:
        """The curve `to_dict` wrote (a report's `curves`)."""
        return cls(
            tuple(float(x) for x in stored["train_s"]),
            tuple(float(x) for x in stored["trajectories"]),
            tuple(float(y) for y in stored["accuracy"]),
        )


def read_curve(run_dir: Path) -> Curve:
    """The eval rows of a finished run's `metrics.jsonl` as a `Curve` (value pretraining's
    seconds, logged on the step-0 row, start the training clock)."""
    read_summary(run_dir)
    rows = read_jsonl(run_dir / "metrics.jsonl")
    if not rows or "time/train_s" not in rows[0]:
        raise MissingMetric(f"{run_dir / 'metrics.jsonl'}: no time/train_s (run made before it)")
    pretrain = float(rows[0].get("time/value_pretrain_s", 0.0))
    evals = [r for r in rows if "eval/accuracy" in r and "time/train_s" in r]
    return Curve(
        tuple(pretrain + float(r["time/train_s"]) for r in evals),
        tuple(float(r.get("rollout/trajectories_sampled", 0)) for r in evals),
        tuple(float(r["eval/accuracy"]) for r in evals),
    )


@dataclass(frozen=True)
class TimeRatio:
    """One seed of claim (h): the candidate's and reference's times to the reference's final
    accuracy read from the straight lines between evals, their ratio (None: no ratio, `reason`
    says why; a lower bound when the candidate never reached the target), and the bracket the
    evals allow for it, `low` to `high` (`high` None: unbounded above; both None with no ratio)."""

    target: float
    candidate_s: float | None
    reference_s: float
    ratio: float | None
    reason: str = ""
    low: float | None = None
    high: float | None = None


def ratio_bracket(
    candidate: tuple[float, float], reference: tuple[float, float]
) -> tuple[float, float | None]:
    """The bracket of `T / T_ref` from the two crossings' brackets (`crossing_bracket`): the
    earliest candidate crossing over the latest reference one, to the latest over the earliest
    (None: unbounded, a reference crossing that may lie at 0 s). `reference` must end above 0."""
    ref_early, ref_late = reference
    high = candidate[1] / ref_early if ref_early > 0.0 else None
    return candidate[0] / ref_late, high


def time_ratio(candidate: Curve, reference: Curve) -> TimeRatio:
    """Claim (h)'s per-seed value from two curves (see the module doc for the edge cases)."""
    target = reference.accuracy[-1]
    reference_s = time_to_accuracy(reference.seconds, reference.accuracy, target)
    reference_at = crossing_bracket(reference.seconds, reference.accuracy, target)
    assert reference_s is not None and reference_at is not None  # its own last point reaches it
    candidate_s = time_to_accuracy(candidate.seconds, candidate.accuracy, target)
    if reference.accuracy[0] >= target or reference_s <= 0.0:
        return TimeRatio(
            target, candidate_s, reference_s, None, "the reference never rose above its start"
        )
    candidate_at = crossing_bracket(candidate.seconds, candidate.accuracy, target)
    if candidate_s is not None and candidate_at is not None:
        low, high = ratio_bracket(candidate_at, reference_at)
        return TimeRatio(target, candidate_s, reference_s, candidate_s / reference_s, "", low, high)
    end = candidate.seconds[-1]
    low, _ = ratio_bracket((end, end), reference_at)
    return TimeRatio(
        target,
        None,
        reference_s,
        end / reference_s,
        f"never reached {target:.3f}: lower bound",
        low,
        None,
    )
