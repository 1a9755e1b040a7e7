"""The verdict rule: per-seed paired differences, their mean with a 95% t-interval, and a verdict.

For one comparison, seed k runs both arms, and `d_k = value(left, k) - value(right, k)`. The
mean of the `d_k` gets a two-sided 95% Student-t interval (n - 1 degrees of freedom). With the
claimed direction:

- `greater` (left above right): `reproduced` if the interval lies wholly above 0, `not
  reproduced` if wholly below 0, else `inconclusive`.
- `less` (left below right): the mirror image.
- `not_less` with margin m (no loss beyond m): `reproduced` if the interval lies wholly above -m,
  `not reproduced` if wholly below -m, else `inconclusive`.

Fewer than 2 seeds, or a seed whose value is missing or not finite, give no interval:
`inconclusive`; a seed is never dropped to make an interval. A value known only to lie in a
bracket (claim (h)'s time ratio: the crossing lies between two evals) is judged at both ends
(`bracket_verdict`): `reproduced` only if the seeds at the end least favourable to the claim
give it, `not reproduced` only if the seeds at the end most favourable to it refute it.
A claim made of several comparisons is their conjunction: `reproduced` if every one is,
`not reproduced` if any one is, else `inconclusive`.

`claim_seeds_needed` is the power analysis of an undecided claim: how many seeds the rule would
need to decide it if the per-seed differences kept the mean and sample SD observed so far (see
`POWER_METHOD`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Relation = Literal["greater", "less", "not_less"]
Verdict = Literal["reproduced", "not reproduced", "inconclusive"]

REPRODUCED: Verdict = "reproduced"
NOT_REPRODUCED: Verdict = "not reproduced"
INCONCLUSIVE: Verdict = "inconclusive"

# Two-sided 95% quantiles of Student's t, t_{0.975, df}, for df = 1..30 (standard tables).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_Z975 = 1.960

RULE = """\
For each comparison, seed k runs both sides with the same seed (same warm start, tasks and
sampling seed), and d_k = value(left, seed k) - value(right, seed k). The mean of the d_k gets a
two-sided 95% Student-t interval with n - 1 degrees of freedom (n = seeds).

- claimed `left > right`: **reproduced** if the interval lies wholly above 0, **not reproduced**
  if wholly below 0, otherwise **inconclusive**;
- claimed `left < right`: the mirror image;
- claimed `left >= right - m` (no loss beyond a margin m): **reproduced** if the interval lies
  wholly above -m, **not reproduced** if wholly below -m, otherwise **inconclusive**.

Fewer than 2 seeds, or a value that is missing or not finite at any seed, gives no interval:
**inconclusive**; a seed without a value is never dropped to make one.

A value known only to lie in a bracket is judged at the bracket's ends. Claim (h)'s time ratio is
one: each run's crossing of the target lies somewhere between its last eval below the target and
its first at or above it, so the ratio lies between the ratio of the earliest candidate crossing
to the latest reference crossing and that of the latest to the earliest (unbounded above when the
candidate never reached the target, whose lower end is then its whole run's time). The verdict is
**reproduced** only if the rule gives it with every seed at the end of its bracket least
favourable to the claim, **not reproduced** only if the rule gives it with every seed at the end
most favourable to the claim, otherwise **inconclusive**. The ratio read from the straight line
between evals is shown beside the ends, but nothing is judged from it. (Each end is a plug-in,
like the rest of the rule: the interval at the ends is not the widest the brackets allow, since
the t-interval's width also moves with the spread of the values.)

A claim made of several comparisons is their conjunction: **reproduced** if every comparison is,
**not reproduced** if any one is, otherwise **inconclusive**."""


POWER_METHOD = """\
Seeds needed: the smallest number of seeds n at which the rule above would decide the claim if
every comparison's differences kept the mean and sample standard deviation observed so far, i.e.
the interval mean +- t_{0.975, n-1} * sd / sqrt(n) (the rule's own t quantile, so the search runs
n = 2, 3, ... because t depends on n) first excludes 0 (or -m) for the conjunction of the
comparisons; it names the verdict the rule would then give. This is a plug-in calculation, not a
power guarantee: it treats the observed mean and SD as the true ones, so a fresh study of that
size passes only about half the time (80% power needs roughly twice the seeds, by
((1.96 + 0.84) / 1.96)^2), and an SD from 3 seeds is itself uncertain (its 95% range spans about
0.5x to 6x). A mean on the wrong side of the threshold gives the seeds needed to refute; a mean
exactly at it, more seeds than the search allows, or a seed without a value, gives none. A
comparison judged at the ends of brackets projects each end on its own (the least favourable end
for reproducing, the most favourable for refuting)."""

MAX_SEEDS_SEARCHED = 10_000


def t_quantile_975(df: int) -> float:
    """t_{0.975} with `df` degrees of freedom (the normal 1.96 beyond 30, where t is within 2%)."""
    if df < 1:
        raise ValueError(f"t_quantile_975: df must be >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else _Z975


@dataclass(frozen=True)
class Interval:
    """Mean of paired differences with its 95% t-interval (`low`/`high` are +-inf if n < 2)."""

    mean: float
    low: float
    high: float
    n: int


def mean_t_interval(differences: Sequence[float]) -> Interval:
    """The mean of `differences` and its two-sided 95% Student-t interval."""
    n = len(differences)
    if n == 0 or not all(math.isfinite(d) for d in differences):
        return Interval(math.nan, -math.inf, math.inf, n)
    mean = sum(differences) / n
    if n < 2:
        return Interval(mean, -math.inf, math.inf, n)
    variance = sum((d - mean) ** 2 for d in differences) / (n - 1)
    half = t_quantile_975(n - 1) * math.sqrt(variance / n)
    return Interval(mean, mean - half, mean + half, n)


def verdict(interval: Interval, relation: Relation, margin: float = 0.0) -> Verdict:
    """The verdict of one comparison whose claimed direction is `relation` (see module doc)."""
    if not math.isfinite(interval.low) or not math.isfinite(interval.high):
        return INCONCLUSIVE
    if relation == "greater":
        supported, refuted = interval.low > 0.0, interval.high < 0.0
    elif relation == "less":
        supported, refuted = interval.high < 0.0, interval.low > 0.0
    elif relation == "not_less":
        supported, refuted = interval.low > -margin, interval.high < -margin
    else:
        raise ValueError(f"verdict: unknown relation {relation!r}")
    if supported:
        return REPRODUCED
    return NOT_REPRODUCED if refuted else INCONCLUSIVE


def bracket_verdict(
    favourable: Interval, unfavourable: Interval, relation: Relation, margin: float = 0.0
) -> Verdict:
    """The verdict of a comparison whose per-seed values are known only to lie in brackets:
    `favourable` is the interval with every seed at the end of its bracket most favourable to
    the claim, `unfavourable` at the least favourable end. The claim is reproduced only if even
    the unfavourable ends reproduce it, refuted only if even the favourable ends refute it.
    With exact values (both intervals the same) this is `verdict`."""
    if verdict(unfavourable, relation, margin) == REPRODUCED:
        return REPRODUCED
    if verdict(favourable, relation, margin) == NOT_REPRODUCED:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def conjunction(verdicts: Sequence[Verdict]) -> Verdict:
    """A claim made of several comparisons: all must hold; any one refuted refutes it."""
    if not verdicts:
        return INCONCLUSIVE
    if all(v == REPRODUCED for v in verdicts):
        return REPRODUCED
    if any(v == NOT_REPRODUCED for v in verdicts):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def sample_sd(differences: Sequence[float]) -> float:
    """Sample standard deviation (n - 1 in the denominator); ValueError below 2 values."""
    n = len(differences)
    if n < 2:
        raise ValueError(f"sample_sd: need at least 2 values, got {n}")
    mean = sum(differences) / n
    return math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))


def projected_interval(mean: float, sd: float, n: int) -> Interval:
    """The rule's 95% t-interval of `n` seeds whose differences have this mean and sample SD."""
    if n < 2:
        raise ValueError(f"projected_interval: need n >= 2 seeds, got {n}")
    half = t_quantile_975(n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


@dataclass(frozen=True)
class ComparisonSpread:
    """What the power analysis keeps of one comparison: its per-seed differences and claim.

    For bracketed values (`bracket_verdict`), `differences` are those at the end least
    favourable to the claim, which alone can reproduce it, and `refuting` those at the most
    favourable end, which alone can refute it; None: the values are exact."""

    differences: Sequence[float]
    relation: Relation
    margin: float = 0.0
    refuting: Sequence[float] | None = None


@dataclass(frozen=True)
class SeedsNeeded:
    """The seeds the rule would need (`seeds`, None if none up to the search limit or no spread
    to project from) and the verdict it would then give (`verdict`)."""

    seeds: int | None
    verdict: Verdict


def _observed(differences: Sequence[float]) -> tuple[float, float] | None:
    """Mean and sample SD to project from; None with fewer than 2 values or any not finite."""
    if len(differences) < 2 or not all(math.isfinite(d) for d in differences):
        return None
    return sum(differences) / len(differences), sample_sd(differences)


_NO_INTERVAL = Interval(math.nan, -math.inf, math.inf, 0)


def _projected(observed: tuple[float, float] | None, n: int) -> Interval:
    return _NO_INTERVAL if observed is None else projected_interval(*observed, n)


def claim_seeds_needed(
    comparisons: Sequence[ComparisonSpread], max_seeds: int = MAX_SEEDS_SEARCHED
) -> SeedsNeeded:
    """Seeds needed to decide a claim made of `comparisons` at their observed means and SDs.

    See `POWER_METHOD`. A comparison with fewer than 2 finite differences has no spread to
    project from, and the claim gets `SeedsNeeded(None, "inconclusive")`; a bracketed one
    (`ComparisonSpread.refuting`) whose unfavourable ends have no spread can only be refuted.
    """
    observed: list[tuple[tuple[float, float] | None, tuple[float, float] | None, Relation, float]]
    observed = []
    for comp in comparisons:
        supporting = _observed(comp.differences)
        refuting = supporting if comp.refuting is None else _observed(comp.refuting)
        if supporting is None and refuting is None:
            return SeedsNeeded(None, INCONCLUSIVE)
        observed.append((supporting, refuting, comp.relation, comp.margin))
    if not observed:
        return SeedsNeeded(None, INCONCLUSIVE)
    for n in range(2, max_seeds + 1):
        decided = conjunction(
            [
                bracket_verdict(_projected(refuting, n), _projected(supporting, n), rel, margin)
                for supporting, refuting, rel, margin in observed
            ]
        )
        if decided != INCONCLUSIVE:
            return SeedsNeeded(n, decided)
    return SeedsNeeded(None, INCONCLUSIVE)


def _mean_and_interval(mean: float | None, ci95: Sequence[float | None]) -> str:
    low, high = ci95
    if mean is None:
        return "no interval"
    if low is None or high is None:
        return f"{mean:+.3f}, no interval"
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def _seed_list(seeds: Sequence[int]) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(s) for s in seeds)


def ends_text(comparison: dict) -> str:
    """A comparison judged at bracket ends (claim (h)): each end's mean difference and interval,
    e.g. `low +0.412 [+0.101, +0.723], high unbounded (seed 2)`, the high end `unbounded` where
    a seed's bracket has no upper end."""
    ends = comparison["ends"]
    open_above = [
        seed for seed, b in enumerate(comparison["brackets"]) if b is not None and b[1] is None
    ]
    low = _mean_and_interval(ends["low"]["mean_difference"], ends["low"]["ci95"])
    high = _mean_and_interval(ends["high"]["mean_difference"], ends["high"]["ci95"])
    if open_above:
        high = f"unbounded ({_seed_list(open_above)})"
    return f"low {low}, high {high}"


def interval_text(comparison: dict) -> str:
    """A judged comparison's mean difference and 95% interval as the report and plots print it,
    e.g. `+0.012 [-0.031, +0.055]`; `no interval` (with the seeds that lack a value) when the
    rule has none. A comparison judged at bracket ends (claim (h)) adds them (`ends_text`)."""
    text = _mean_and_interval(comparison["mean_difference"], comparison["ci95"])
    if comparison.get("seeds_missing"):
        text += f" (no value at {_seed_list(comparison['seeds_missing'])})"
    if not comparison.get("ends"):
        return text
    return f"{text} between evals' lines; bracket ends {ends_text(comparison)}"
