"""Statistics of `sao eval`: the Wilson interval and the paired difference of two policies."""

import math
import random

import pytest

from sao.evaluation.stats import (
    PASS_FAIL_SD,
    detection_chance,
    eval_resolution,
    paired_difference,
    resolution_line,
    tasks_to_resolve,
    wilson_interval,
)


def test_paired_difference_by_hand():
    result = paired_difference([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0])
    assert result["difference"] == pytest.approx(0.5)
    # Differences 1, 0, 0, 1: sample sd sqrt(1/3), so the half-width is 1.96 * sqrt(1/3 / 4).
    half = 1.96 * math.sqrt(1 / 12)
    assert result["difference_ci95"] == pytest.approx([0.5 - half, 0.5 + half])
    assert result["sd"] == pytest.approx(math.sqrt(1 / 3))
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


def test_tasks_to_resolve_by_hand():
    # ((1.96 + 1.2816) * 0.5 / 0.1)^2 = 262.8 -> 263 tasks.
    assert tasks_to_resolve(0.5, 0.10) == 263
    # code_repair's in-run eval (docs/notebook/2026-11-29-code-repair-presets-and-stalling.md):
    # paired SD 0.51; +0.10 resolved at about +-0.06.
    assert tasks_to_resolve(0.51, 0.10) == 274  # (3.2416 * 0.51 / 0.1)^2 = 273.3
    assert tasks_to_resolve(0.0, 0.10) == 1
    # At the returned n the eval resolves the effect, one task fewer it does not.
    n = tasks_to_resolve(0.37, 0.05)
    bound = 0.05 * 1.96 / (1.96 + 1.2816)
    assert 1.96 * 0.37 / math.sqrt(n) <= bound < 1.96 * 0.37 / math.sqrt(n - 1)


def test_a_gain_of_the_half_width_clears_zero_half_the_time_and_0_06_resolves_0_10():
    assert detection_chance(0.05, 0.05) == pytest.approx(0.5)
    assert detection_chance(0.0605, 0.10) == pytest.approx(0.90, abs=0.002)
    assert detection_chance(0.10, 0.05) < 0.2 and detection_chance(0.0, 0.1) == 1.0


@pytest.mark.parametrize(("sd", "effect"), [(0.5, 0.0), (0.5, -0.1), (-0.1, 0.1), (math.nan, 0.1)])
def test_tasks_to_resolve_refuses_what_has_no_answer(sd, effect):
    with pytest.raises(ValueError, match="tasks_to_resolve"):
        tasks_to_resolve(sd, effect)


def test_an_eval_too_small_for_the_effect_says_so_and_names_the_tasks_that_would_do():
    # 100 tasks, 13 better and 12 worse by a whole point: SD about 0.5, half-width about 0.098.
    final = [1.0] * 13 + [0.0] * 12 + [0.0] * 75
    initial = [0.0] * 13 + [1.0] * 12 + [0.0] * 75
    gain = paired_difference(final, initial)
    sd = math.sqrt((25 - 100 * 0.01**2) / 99)
    assert gain["sd"] == pytest.approx(sd)
    small = eval_resolution(gain, 0.10)
    half = 1.96 * sd / 10
    assert small["half_width"] == pytest.approx(half)
    assert not small["resolves"]
    assert small["eval_n_needed"] == math.ceil(((1.96 + 1.2816) * sd / 0.10) ** 2)  # 263
    assert small["detection_chance"] == pytest.approx(0.51, abs=0.01)
    assert resolution_line(gain, small) == (
        f"held-out gain +0.010 +- {half:.3f} (paired 95% interval, n=100 tasks), not "
        "distinguishable from 0; this eval cannot resolve a gain of 0.1 (a true one clears 0 "
        f"in 51% of such evals, under 90%); about {small['eval_n_needed']} held-out tasks would "
        f"(train.eval_n, from the paired SD {sd:.3f})"
    )
    clear = paired_difference([1.0] * 40 + [0.0] * 60, [0.0] * 100)
    coarse = eval_resolution(clear, 0.10)
    assert not coarse["resolves"]
    assert resolution_line(clear, coarse) == (
        f"held-out gain +0.400 +- {coarse['half_width']:.3f} (paired 95% interval, n=100 tasks), "
        f"above 0; a true gain of 0.1 would clear 0 in only {coarse['detection_chance']:.0%} of "
        f"such evals (about {coarse['eval_n_needed']} held-out tasks for 90%, train.eval_n)"
    )
    large = eval_resolution(gain, 0.20)
    assert large["resolves"] and large["detection_chance"] > 0.9
    assert resolution_line(gain, large).endswith(
        "this eval resolves a gain of 0.2 (a true one clears 0 in 98% of such evals)"
    )
    better = paired_difference([1.0] * 30 + [0.0] * 70, [0.0] * 100)
    assert ", above 0; " in resolution_line(better, eval_resolution(better, 0.10))


def test_a_paired_sd_measured_as_zero_is_not_taken_for_no_spread():
    # The reviewer's case: 8 tasks, each scored the same before and after. The eval's own SD is
    # 0, which would make its interval zero-wide and every gain "resolved".
    gain = paired_difference([0.0] * 8, [0.0] * 8)
    assert gain["sd"] == 0.0 and gain["difference_ci95"] == [0.0, 0.0]
    resolution = eval_resolution(gain, 0.10)
    assert resolution["sd_bounded"] and resolution["power_sd"] == PASS_FAIL_SD == 0.5
    half = 1.96 * 0.5 / math.sqrt(8)  # 0.346
    assert resolution["half_width"] == pytest.approx(half)
    assert not resolution["resolves"]
    assert resolution["detection_chance"] == pytest.approx(detection_chance(half, 0.10))
    assert resolution["detection_chance"] < 0.1
    assert resolution["eval_n_needed"] == tasks_to_resolve(0.5, 0.10) == 263
    line = resolution_line(gain, resolution)
    assert "resolves a gain" not in line
    assert line == (
        "held-out gain +0.000 over n=8 tasks, every task's difference the same (a paired SD of 0 "
        "measured on 8 tasks, not a spread of 0); at a per-task SD of 0.5, a pass/fail score's "
        f"largest, +- {half:.3f} (95%), not distinguishable from 0; this eval cannot resolve a "
        f"gain of 0.1 (a true one clears 0 in {resolution['detection_chance']:.0%} of such evals, "
        "under 90%); about 263 held-out tasks would (train.eval_n, at that SD of 0.5)"
    )


def test_a_zero_sd_gain_is_placed_against_zero_by_the_bounds_interval():
    everywhere = paired_difference([1.0] * 8, [0.0] * 8)  # +1 on every task: above 0 even so
    line = resolution_line(everywhere, eval_resolution(everywhere, 0.10))
    assert ", above 0; a true gain of 0.1 would clear 0 in only 8% of such evals" in line
    small = paired_difference([0.9] * 8, [0.8] * 8)  # +0.1 on every task: +-0.346 straddles 0
    assert "not distinguishable from 0" in resolution_line(small, eval_resolution(small, 0.10))
    # Enough tasks resolve a gain even at the bound; a measured spread is used as it is.
    many = paired_difference([0.0] * 400, [0.0] * 400)
    assert eval_resolution(many, 0.10)["resolves"]
    spread = paired_difference([1.0] + [0.0] * 7, [0.0] * 8)
    measured = eval_resolution(spread, 0.10)
    assert not measured["sd_bounded"] and measured["power_sd"] == spread["sd"]
