"""`sao.core.windows`: first and last windows of steps, step ranges, means of the finite values."""

import math

import pytest

from sao.core.windows import ends, finite_mean, in_steps


def test_ends_are_the_first_and_last_window_overlapping_when_short():
    assert ends([1, 2, 3, 4, 5], 2) == ([1, 2], [4, 5])
    assert ends([1, 2, 3], 2) == ([1, 2], [2, 3])
    assert ends([1], 10) == ([1], [1])


def test_a_window_below_one_is_refused_not_read_as_every_item():
    with pytest.raises(ValueError, match="window: must be >= 1, got 0"):
        ends([1, 2, 3], 0)


def test_the_mean_leaves_out_what_is_not_a_finite_number():
    assert finite_mean([1, 2.0, None, math.nan, math.inf, "x", 3]) == pytest.approx(2.0)
    assert math.isnan(finite_mean([None, math.nan]))
    assert math.isnan(finite_mean([]))


def test_step_ranges_include_both_ends_and_skip_rows_without_a_step():
    rows = [{"step": s} for s in range(1, 8)] + [{"eval/accuracy": 0.5}, {"step": "3"}]
    assert [r["step"] for r in in_steps(rows, 3, 5)] == [3, 4, 5]
