"""The verdict rule of `sao reproduce`, on hand-made per-seed differences and side values."""

import math

import pytest

from sao.reproduce.render import seeds_needed_text
from sao.reproduce.report import comparison_spread, judge_sides
from sao.reproduce.stats import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    ComparisonSpread,
    SeedsNeeded,
    bracket_verdict,
    claim_seeds_needed,
    conjunction,
    interval_text,
    mean_t_interval,
    projected_interval,
    sample_sd,
    t_quantile_975,
    verdict,
)


def test_t_interval_of_three_seeds_uses_two_degrees_of_freedom():
    interval = mean_t_interval([1.0, 2.0, 3.0])  # mean 2, sample sd 1
    half = 4.303 / math.sqrt(3)
    assert interval.mean == pytest.approx(2.0)
    assert (interval.low, interval.high) == pytest.approx((2.0 - half, 2.0 + half))
    assert interval.n == 3


def test_t_quantile_falls_to_the_normal_beyond_the_table():
    assert t_quantile_975(1) == pytest.approx(12.706)
    assert t_quantile_975(30) == pytest.approx(2.042)
    assert t_quantile_975(200) == pytest.approx(1.96)


@pytest.mark.parametrize(
    ("differences", "relation", "expected"),
    [
        ([0.10, 0.12, 0.11], "greater", REPRODUCED),
        ([-0.10, -0.12, -0.11], "greater", NOT_REPRODUCED),
        ([0.10, -0.12, 0.01], "greater", INCONCLUSIVE),
        ([-0.10, -0.12, -0.11], "less", REPRODUCED),
        ([0.10, 0.12, 0.11], "less", NOT_REPRODUCED),
        ([0.10, -0.12, 0.01], "less", INCONCLUSIVE),
    ],
)
def test_each_verdict_of_a_directional_comparison(differences, relation, expected):
    assert verdict(mean_t_interval(differences), relation) == expected


def test_no_loss_comparison_is_judged_against_the_margin():
    margin = 0.02
    small_loss = mean_t_interval([-0.010, -0.012, -0.011])  # wholly above -0.02
    big_loss = mean_t_interval([-0.10, -0.12, -0.11])  # wholly below -0.02
    unclear = mean_t_interval([-0.10, 0.05, -0.02])
    assert verdict(small_loss, "not_less", margin) == REPRODUCED
    assert verdict(small_loss, "greater") == NOT_REPRODUCED  # the same numbers, another claim
    assert verdict(big_loss, "not_less", margin) == NOT_REPRODUCED
    assert verdict(unclear, "not_less", margin) == INCONCLUSIVE


@pytest.mark.parametrize("differences", [[0.5], [], [0.1, math.nan, 0.2]])
def test_no_interval_is_inconclusive(differences):
    assert verdict(mean_t_interval(differences), "greater") == INCONCLUSIVE


def test_a_chain_is_the_conjunction_of_its_comparisons():
    assert conjunction([REPRODUCED, REPRODUCED]) == REPRODUCED
    assert conjunction([REPRODUCED, INCONCLUSIVE]) == INCONCLUSIVE
    assert conjunction([INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED]) == NOT_REPRODUCED
    assert conjunction([]) == INCONCLUSIVE


def _needed(differences, relation="greater", margin=0.0):
    return claim_seeds_needed([ComparisonSpread(differences, relation, margin)])


def test_seeds_needed_by_hand_with_the_t_quantile_of_each_n():
    # Mean 2, sample sd 1: the half-width t_{0.975,n-1} / sqrt(n) must fall below 2.
    # n=2: 12.706/1.414 = 8.98; n=3: 4.303/1.732 = 2.48; n=4: 3.182/2 = 1.59 < 2.
    assert _needed([1.0, 2.0, 3.0]) == SeedsNeeded(4, REPRODUCED)
    assert _needed([-1.0, -2.0, -3.0], "less") == SeedsNeeded(4, REPRODUCED)


def test_seeds_needed_beyond_the_t_table_uses_the_normal_quantile():
    # Mean 0.1, sd 0.5: 1.96 * 0.5 / sqrt(n) < 0.1 needs sqrt(n) > 9.8, n > 96.04: 97
    # (n = 96 gives 0.10002; below 31 seeds t is larger still).
    assert sample_sd([-0.4, 0.1, 0.6]) == pytest.approx(0.5)
    assert _needed([-0.4, 0.1, 0.6]) == SeedsNeeded(97, REPRODUCED)
    assert projected_interval(0.1, 0.5, 96).low < 0.0 < projected_interval(0.1, 0.5, 97).low
    # The same spread on the wrong side of 0: the seeds that would refute the claim.
    assert _needed([-0.6, -0.1, 0.4]) == SeedsNeeded(97, NOT_REPRODUCED)


def test_seeds_needed_of_a_no_loss_comparison_is_measured_from_the_margin():
    # Mean 0, sd 0.05, margin 0.02: t_{0.975,n-1} * 0.05 / sqrt(n) < 0.02.
    # n=26: 2.060 * 0.05 / 5.099 = 0.0202; n=27: 2.056 * 0.05 / 5.196 = 0.0198.
    assert _needed([-0.05, 0.0, 0.05], "not_less", 0.02) == SeedsNeeded(27, REPRODUCED)


def test_seeds_needed_of_the_full_studys_claim_f_matches_its_verdict_at_three_seeds():
    # sao - sao_step_mean per seed (docs/reproduce/report.json): reproduced at 3, not at 2.
    assert _needed([0.025, 0.05, 0.055]) == SeedsNeeded(3, REPRODUCED)


def test_a_claims_seeds_needed_is_its_conjunction_over_seeds():
    fast, slow_for, slow_against = [1.0, 2.0, 3.0], [-0.4, 0.1, 0.6], [-0.6, -0.1, 0.4]
    both_hold = [ComparisonSpread(fast, "greater"), ComparisonSpread(slow_for, "greater")]
    assert claim_seeds_needed(both_hold) == SeedsNeeded(97, REPRODUCED)
    # One comparison refuted refutes the claim, as soon as it is: here at 4 seeds.
    refuted_early = [ComparisonSpread(slow_for, "greater"), ComparisonSpread(fast, "less")]
    assert claim_seeds_needed(refuted_early) == SeedsNeeded(4, NOT_REPRODUCED)
    held_then_refuted = [
        ComparisonSpread(fast, "greater"),
        ComparisonSpread(slow_against, "greater"),
    ]
    assert claim_seeds_needed(held_then_refuted) == SeedsNeeded(97, NOT_REPRODUCED)


@pytest.mark.parametrize("differences", [[-1.0, 0.0, 1.0], [0.5], [], [0.1, math.nan, 0.2]])
def test_no_seeds_decide_a_mean_at_the_threshold_or_without_a_spread(differences):
    assert _needed(differences) == SeedsNeeded(None, INCONCLUSIVE)


def test_the_search_stops_at_its_limit():
    # Mean 0.01, sd 1: about (1.96 / 0.01)^2 = 38,416 seeds, past a limit of 1,000.
    assert claim_seeds_needed(
        [ComparisonSpread([-0.99, 0.01, 1.01], "greater")], max_seeds=1000
    ) == SeedsNeeded(None, INCONCLUSIVE)
    assert _needed([-0.99, 0.01, 1.01]) == SeedsNeeded(None, INCONCLUSIVE)


# ------------------------------------------------------------ values known only within brackets
def test_a_bracket_reproduces_only_at_its_unfavourable_end_and_refutes_only_at_its_favourable():
    below, above, straddling = (
        mean_t_interval([-0.30, -0.31, -0.29]),
        mean_t_interval([0.30, 0.31, 0.29]),
        mean_t_interval([-0.30, 0.10, 0.40]),
    )
    # Claimed `less`: the high ends are the unfavourable ones.
    assert bracket_verdict(below, below, "less") == REPRODUCED
    assert bracket_verdict(below, straddling, "less") == INCONCLUSIVE
    assert bracket_verdict(above, above, "less") == NOT_REPRODUCED
    assert bracket_verdict(straddling, above, "less") == INCONCLUSIVE
    # Exact values (both ends the same interval): the plain rule.
    for interval in (below, above, straddling):
        assert bracket_verdict(interval, interval, "greater") == verdict(interval, "greater")
    # An unbounded end gives no interval: it can never reproduce, the other end may refute.
    unbounded = mean_t_interval([0.3, math.inf, 0.4])
    assert bracket_verdict(above, unbounded, "less") == NOT_REPRODUCED
    assert bracket_verdict(below, unbounded, "less") == INCONCLUSIVE


def test_seeds_needed_of_a_bracket_projects_each_end_on_its_own():
    # High ends mean 2, sd 1 (reproducing `greater` needs 4 seeds); low ends no better.
    exact = ComparisonSpread([1.0, 2.0, 3.0], "greater")
    bracketed = ComparisonSpread([1.0, 2.0, 3.0], "greater", refuting=[1.5, 2.5, 3.5])
    assert (
        claim_seeds_needed([bracketed]) == claim_seeds_needed([exact]) == SeedsNeeded(4, REPRODUCED)
    )
    # `less` with an unbounded high end: only the low ends can decide it, and only by refuting.
    refuted = ComparisonSpread([0.5, math.inf, 1.5], "less", refuting=[1.0, 2.0, 3.0])
    assert claim_seeds_needed([refuted]) == SeedsNeeded(4, NOT_REPRODUCED)
    supportive = ComparisonSpread([0.5, math.inf, 1.5], "less", refuting=[-1.0, -2.0, -3.0])
    assert claim_seeds_needed([supportive]) == SeedsNeeded(None, INCONCLUSIVE)


# ---------------------------------------------------------- missing and non-finite values
def test_a_missing_value_leaves_a_comparison_inconclusive_and_is_never_dropped():
    # Seeds 0, 2 and 3 alone would give an interval wholly above 0.
    judged = judge_sides([0.71, None, 0.73, 0.78], [0.5, 0.5, 0.5, 0.5], "greater", 0.0)
    assert judged["verdict"] == INCONCLUSIVE
    assert judged["seeds_used"] == [0, 2, 3] and judged["seeds_missing"] == [1]
    assert judged["ci95"] == [None, None]
    assert judged["seeds_needed"] is None
    assert judged["differences"] == pytest.approx([0.21, 0.23, 0.28])
    assert judge_sides([0.71, 0.72, 0.73, 0.78], [0.5] * 4, "greater", 0.0)["verdict"] == REPRODUCED
    # A missing value on the right side counts the same.
    assert (
        judge_sides([0.71, 0.72, 0.73], [0.5, None, 0.5], "greater", 0.0)["verdict"] == INCONCLUSIVE
    )


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_value_that_is_not_finite_leaves_a_comparison_inconclusive(bad):
    judged = judge_sides([0.71, bad, 0.73, 0.78], [0.5] * 4, "greater", 0.0)
    assert judged["verdict"] == INCONCLUSIVE and judged["seeds_missing"] == [1]
    assert judged["ci95"] == [None, None]


def test_a_claim_with_a_seed_missing_gets_no_seeds_needed_figure():
    comparison = {
        "relation": "greater",
        "margin": 0.0,
        **judge_sides([0.71, None, 0.73, 0.78], [0.5] * 4, "greater", 0.0),
    }
    assert claim_seeds_needed([comparison_spread(comparison)]) == SeedsNeeded(None, INCONCLUSIVE)
    assert seeds_needed_text(comparison) == "n/a (a seed has no value)"
    assert interval_text(comparison) == "+0.240, no interval (no value at seed 1)"
