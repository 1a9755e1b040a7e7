"""The statistics of a held-out eval: a proportion's interval, the paired difference of two
policies on the same tasks, and how many tasks an eval needs to resolve a gain of a given size.

Pure arithmetic on scores (no torch), so analyses and the reproduce report import it cheaply.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (sound near 0 and 1, unlike the normal one)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _mean_and_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean of `values` and their sample SD (n - 1 in the denominator; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    return mean, math.sqrt(sum((x - mean) ** 2 for x in values) / max(1, n - 1))


def _mean_and_half_width(values: Sequence[float]) -> tuple[float, float]:
    """Mean of `values` and the half-width of its normal 95% interval (sample variance)."""
    mean, sd = _mean_and_sd(values)
    return mean, 1.96 * sd / math.sqrt(len(values))


def accuracy_interval(
    rewards: Sequence[float], task_scores: Sequence[float], samples: int
) -> tuple[float, float]:
    """Wilson over trajectories when each task is sampled once; otherwise a normal interval over
    task means, since samples of one task are not independent draws."""
    if samples == 1 or not task_scores:
        return wilson_interval(sum(r > 0 for r in rewards), len(rewards))
    mean, half = _mean_and_half_width(task_scores)
    return (max(0.0, mean - half), min(1.0, mean + half))


def paired_difference(scores: Sequence[float], baseline: Sequence[float]) -> dict[str, Any]:
    """Mean of `scores[i] - baseline[i]` over paired tasks, with a normal 95% interval.

    Returns `difference`, `difference_ci95`, `sd` (sample SD of the per-task differences), `n`,
    and how many tasks each side scored higher on (`better`, `worse`); ties are the rest.

    Raises:
        ValueError: if the two lists differ in length or are empty.
    """
    if len(scores) != len(baseline) or not scores:
        raise ValueError(
            f"paired_difference: need two equally long, non-empty score lists, "
            f"got {len(scores)} and {len(baseline)}"
        )
    diffs = [a - b for a, b in zip(scores, baseline, strict=True)]
    mean, sd = _mean_and_sd(diffs)
    half = 1.96 * sd / math.sqrt(len(diffs))
    return {
        "difference": mean,
        "difference_ci95": [mean - half, mean + half],
        "sd": sd,
        "n": len(diffs),
        "better": sum(d > 0 for d in diffs),
        "worse": sum(d < 0 for d in diffs),
    }


Z_95 = 1.96
Z_POWER = 1.2816
"""One-sided normal quantile of 90%: an eval "resolves" a gain when a true gain of that size
would clear zero in 90% of such evals (for a gain of 0.10, a half-width of about 0.06)."""


def tasks_to_resolve(sd: float, effect: float, z: float = Z_95, z_power: float = Z_POWER) -> int:
    """Held-out tasks a paired eval needs to resolve a gain of `effect`: the smallest n >= 1 with
    n >= ((z + z_power) * sd / effect)^2, where its 95% half-width `z * sd / sqrt(n)` is at most
    `effect * z / (z + z_power)`, so a true gain of `effect` clears zero in about 90% of such evals.

    `sd` is the per-task paired SD observed so far, taken as the truth.

    Raises:
        ValueError: if `effect` is not positive or `sd` is negative or not finite.
    """
    if not effect > 0.0:
        raise ValueError(f"tasks_to_resolve: effect must be > 0, got {effect}")
    if not (math.isfinite(sd) and sd >= 0.0):
        raise ValueError(f"tasks_to_resolve: sd must be finite and >= 0, got {sd}")
    needed = ((z + z_power) * sd / effect) ** 2
    # The square can land a rounding error above an integer it equals.
    return max(1, math.ceil(needed - 1e-9))


def detection_chance(half_width: float, effect: float, z: float = Z_95) -> float:
    """How often a paired eval of this 95% half-width would put a true gain of `effect` above
    zero: P(N(effect, se^2) - half_width > 0) with se = half_width / z."""
    if half_width <= 0.0:
        return 1.0
    return NormalDist().cdf(effect * z / half_width - z)


PASS_FAIL_SD = 0.5
"""The largest SD a pass/fail score can have (at p = 0.5), as for any score in [0, 1]: what an
eval's power is computed from when every task's paired difference came out the same. A sample
SD of 0 from a few tasks says the tasks agreed, not that a fresh sample of tasks would."""


def power_sd(paired: dict[str, Any]) -> tuple[float, bool]:
    """The per-task SD a paired eval's power is computed from, and whether it is the bound
    `PASS_FAIL_SD` because the measured SD is 0 (never a power from no measured spread)."""
    measured = paired["sd"]
    if measured > 0.0:
        return measured, False
    return PASS_FAIL_SD, True


def eval_resolution(paired: dict[str, Any], effect: float) -> dict[str, Any]:
    """Whether a paired eval (`paired_difference`'s result) can resolve a gain of `effect`.

    Returns `effect`, `half_width` (of the 95% interval, `1.96 power_sd / sqrt(n)`), `sd` (the
    measured paired SD), `power_sd` (the SD the power is computed from: the measured one, or
    `PASS_FAIL_SD` when that is 0, `sd_bounded` then true), `n`, `detection_chance` (how often
    a true gain of `effect` would clear zero in such an eval), `resolves` (at least 90%, i.e. a
    half-width of at most `effect * 1.96 / (1.96 + 1.28)`) and `eval_n_needed`
    (`tasks_to_resolve` at `power_sd`).
    """
    sd, bounded = power_sd(paired)
    half = Z_95 * sd / math.sqrt(paired["n"])
    return {
        "effect": effect,
        "half_width": half,
        "sd": paired["sd"],
        "power_sd": sd,
        "sd_bounded": bounded,
        "n": paired["n"],
        "detection_chance": detection_chance(half, effect),
        "resolves": half <= effect * Z_95 / (Z_95 + Z_POWER) + 1e-12,
        "eval_n_needed": tasks_to_resolve(sd, effect),
    }


def _gain_interval(gain: dict[str, Any], resolution: dict[str, Any]) -> tuple[float, float]:
    """The gain's 95% interval as the line states it: with the SD bounded, the one the bound
    gives, since the eval's own zero-width interval would claim a precision it did not show."""
    if not resolution.get("sd_bounded"):
        low, high = gain["difference_ci95"]
        return low, high
    diff, half = gain["difference"], resolution["half_width"]
    return diff - half, diff + half


def _where(low: float, high: float) -> str:
    return "above 0" if low > 0 else "below 0" if high < 0 else "not distinguishable from 0"


def resolution_line(gain: dict[str, Any], resolution: dict[str, Any]) -> str:
    """One line on a paired held-out gain: whether its interval excludes zero, and whether the
    eval could resolve the effect of interest; when it could not, how many tasks would (said
    without "cannot resolve" when this gain's interval already excludes zero). A measured SD of
    0 is never taken at its word: the line then works from `PASS_FAIL_SD` and says so."""
    where = _where(*_gain_interval(gain, resolution))
    half, n, diff = resolution["half_width"], resolution["n"], gain["difference"]
    if resolution.get("sd_bounded"):
        head = (
            f"held-out gain {diff:+.3f} over n={n} tasks, every task's difference the same "
            f"(a paired SD of 0 measured on {n} tasks, not a spread of 0); at a per-task SD of "
            f"{resolution['power_sd']:g}, a pass/fail score's largest, +- {half:.3f} (95%), {where}"
        )
        source = f"at that SD of {resolution['power_sd']:g}"
    else:
        head = (
            f"held-out gain {diff:+.3f} +- {half:.3f} (paired 95% interval, n={n} tasks), {where}"
        )
        source = f"from the paired SD {resolution['sd']:.3f}"
    effect = resolution["effect"]
    chance = f"a true one clears 0 in {resolution['detection_chance']:.0%} of such evals"
    if resolution["resolves"]:
        return f"{head}; this eval resolves a gain of {effect:g} ({chance})"
    if where != "not distinguishable from 0":
        return (
            f"{head}; a true gain of {effect:g} would clear 0 in only "
            f"{resolution['detection_chance']:.0%} of such evals (about "
            f"{resolution['eval_n_needed']} held-out tasks for 90%, train.eval_n)"
        )
    return (
        f"{head}; this eval cannot resolve a gain of {effect:g} ({chance}, under 90%); about "
        f"{resolution['eval_n_needed']} held-out tasks would (train.eval_n, {source})"
    )
