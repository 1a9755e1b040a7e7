"""`sao inspect windows`: metrics averaged over step windows, pooled over runs."""

import math

import pytest

from sao.analysis import step_windows


def test_windows_parse_as_inclusive_ranges_and_bad_ones_are_named():
    assert step_windows.parse_windows("41-50, 51-60") == [(41, 50), (51, 60)]
    with pytest.raises(ValueError, match="'60-51'"):
        step_windows.parse_windows("41-50,60-51")
    with pytest.raises(ValueError, match="'x'"):
        step_windows.parse_windows("x")


def test_each_run_is_averaged_over_its_window_then_runs_are_averaged():
    first = [{"step": s, "m": float(s)} for s in range(1, 11)]  # 1..10: window 1-4 mean 2.5
    second = [{"step": 1, "m": 10.0}, {"step": 5, "m": 99.0}, {"step": 2, "m": float("nan")}]
    assert step_windows.window_mean(first, "m", (1, 4)) == pytest.approx(2.5)
    assert step_windows.window_mean(second, "m", (1, 4)) == pytest.approx(10.0)
    assert step_windows.pooled([first, second], "m", (1, 4)) == pytest.approx(6.25)


def test_a_key_no_run_logs_in_the_window_is_nan():
    rows = [{"step": 1, "m": 1.0}, {"step": 0, "other": 2.0}]
    assert math.isnan(step_windows.pooled([rows], "other", (1, 5)))
    assert math.isnan(step_windows.window_mean(rows, "m", (2, 3)))
