"""Statistics of `sao eval`: the Wilson interval and the paired difference of two policies."""

import math
import random

import pytest

from sao.evaluation import paired_difference, wilson_interval


def test_paired_difference_by_hand():
    result = paired_difference([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0])
    assert result["difference"] == pytest.approx(0.5)
    # Differences 1, 0, 0, 1: sample sd sqrt(1/3), so the half-width is 1.96 * sqrt(1/3 / 4).
    half = 1.96 * math.sqrt(1 / 12)
    assert result["difference_ci95"] == pytest.approx([0.5 - half, 0.5 + half])
    assert (result["n"], result["better"], result["worse"]) == (4, 2, 0)


def test_pairing_cancels_task_difficulty():
    # Tasks of very different difficulty, the model 0.1 better on each: an unpaired interval
    # would be as wide as the spread of difficulties; the paired one sees only the 0.1.
    rng = random.Random(0)
    baseline = [rng.random() * 0.8 for _ in range(200)]
    model = [b + 0.1 for b in baseline]
    result = paired_difference(model, baseline)
    low, high = result["difference_ci95"]
    assert low == pytest.approx(0.1) and high == pytest.approx(0.1)
    assert result["better"] == 200


@pytest.mark.parametrize("scores, baseline", [([1.0], [1.0, 0.0]), ([], [])])
def test_paired_difference_needs_equal_non_empty_lists(scores, baseline):
    with pytest.raises(ValueError, match="equally long, non-empty"):
        paired_difference(scores, baseline)


def test_wilson_interval_stays_inside_zero_one_and_covers_the_estimate():
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    low, high = wilson_interval(41, 200)
    assert low < 41 / 200 < high
    assert wilson_interval(0, 0) == (0.0, 1.0)
