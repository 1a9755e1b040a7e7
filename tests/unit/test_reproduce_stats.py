"""The verdict rule of `sao reproduce`, on hand-made per-seed differences."""

import math

import pytest

from sao.reproduce.stats import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    conjunction,
    mean_t_interval,
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
