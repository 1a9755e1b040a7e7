"""Behaviour drift: endings per trajectory, shares per step, windows, and when the run warns."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sao.config import ConfigError, load_config
from sao.runtime.drift import (
    DriftMonitor,
    StepShares,
    compare_windows,
    drift_summary,
    drift_window,
    ending,
    ending_metrics,
    ending_shares,
    replay,
    step_shares,
    warning_line,
)
from sao.runtime.train import _watch_drift

ANSWER = {"end_reason": "answer", "info": {"format_error": None}}
OUT_OF_TURNS = {"end_reason": "max_turns", "info": {"format_error": None}}
MALFORMED_LAST = {"end_reason": "max_turns", "info": {"format_error": "no_tag"}}
OUT_OF_TOKENS = {"end_reason": "max_tokens", "info": {}}


def batch_with(stalled: int, n: int = 10) -> list[dict]:
    """`n` trajectories' metadata, `stalled` of them out of turns, the rest answered."""
    return [OUT_OF_TURNS] * stalled + [ANSWER] * (n - stalled)


def test_each_ending_is_named_from_the_metadata_the_agent_loop_records():
    assert ending(ANSWER) == "answer"
    assert ending(OUT_OF_TURNS) == "max_turns"
    # Out of turns on an action the environment could not parse is its own ending.
    assert ending(MALFORMED_LAST) == "malformed"
    assert ending(OUT_OF_TOKENS) == "max_tokens"
    assert ending({"end_reason": "eos"}) == "eos"
    assert ending({"end_reason": "env_error", "info": {}}) == "env_error"
    # A format error on an accepted answer (calc's answer_not_a_number) is still an answer.
    assert ending({"end_reason": "answer", "info": {"format_error": "answer_not_a_number"}}) == (
        "answer"
    )
    assert ending({"end_reason": "done"}) == "done"


def test_shares_count_every_ending_and_no_answer():
    metas = [ANSWER] * 5 + [OUT_OF_TURNS, MALFORMED_LAST, OUT_OF_TOKENS]
    assert ending_shares(metas) == {
        "answer": 0.625,
        "max_turns": 0.125,
        "max_tokens": 0.125,
        "malformed": 0.125,
        "eos": 0.0,
        "env_error": 0.0,
        "no_answer": 0.375,
    }
    odd = ending_shares([ANSWER, {"end_reason": "done"}])
    assert odd["done"] == 0.5 and odd["no_answer"] == 0.5
    assert ending_shares([]) == {}


def test_step_metrics_carry_the_count_and_the_shares_under_rollout_end():
    metrics = ending_metrics([ANSWER, OUT_OF_TOKENS])
    assert metrics["rollout/episodes"] == 2
    assert metrics["rollout/end_answer"] == 0.5
    assert metrics["rollout/end_max_tokens"] == 0.5
    assert metrics["rollout/end_no_answer"] == 0.5
    assert step_shares({"step": 3, "rollout/reward_mean": 0.5, **metrics}) == StepShares(
        3, 2, ending_shares([ANSWER, OUT_OF_TOKENS])
    )
    assert step_shares({"step": 0, "eval/accuracy": 0.5}) is None
    assert ending_metrics([]) == {}


@pytest.mark.parametrize(
    ("steps", "configured", "window"),
    [(0, None, 1), (2, None, 1), (6, None, 1), (20, None, 5), (60, None, 10), (60, 7, 7)],
)
def test_window_is_a_quarter_of_the_run_between_1_and_10_unless_configured(
    steps, configured, window
):
    assert drift_window(steps, configured) == window


def rows_of(stalled: list[int], n: int = 10) -> list[dict]:
    """Metric rows as `metrics.jsonl` holds them: an eval-only row at step 0, then one row per
    step of `n` episodes, `stalled[step - 1]` of them out of turns."""
    rows: list[dict] = [{"step": 0, "eval/accuracy": 0.25}]
    for step, k in enumerate(stalled, start=1):
        rows.append({"step": step, "rollout/reward_mean": 0.5, **ending_metrics(batch_with(k, n))})
    return rows


def steps_of(stalled: list[int], n: int = 10) -> list[StepShares]:
    return [s for s in map(step_shares, rows_of(stalled, n)) if s is not None]


# 20 steps of 10 episodes: none stall for 10 steps, then one more each step up to 8 of 10.
STALLING = [0] * 10 + [1, 2, 3, 4, 5, 6, 7, 8, 8, 8]


def no_answer_steps(shares: list[float], n: int) -> list[StepShares]:
    """One step per share, `n` episodes each, the no-answer ones out of turns."""
    return [
        StepShares(step, n, {"answer": 1 - p, "max_turns": p, "no_answer": p})
        for step, p in enumerate(shares, start=1)
    ]


def test_a_stalling_run_warns_once_when_the_latest_window_crosses():
    monitor = DriftMonitor(window=5, warn_rise=0.10)
    crossings = []
    for step in steps_of(STALLING):
        check = monitor.observe(step)
        if check is not None:
            crossings.append((step.step, check))
    # Step 11: steps 7-11 average 0.02; step 12: 0.06; step 13: (0.1+0.2+0.3)/5 = 0.12 > 0.10,
    # and above the noise: 2 * sqrt(0.12 * 0.88 / 50) = 0.0919 (the first window has none).
    assert [step for step, _ in crossings] == [13]
    check = crossings[0][1]
    assert check.first_steps == (1, 5) and check.last_steps == (9, 13)
    assert check.first_episodes == check.last_episodes == 50
    assert check.first["no_answer"] == 0.0
    assert check.last["no_answer"] == pytest.approx(0.12, abs=1e-12)
    assert check.noise == pytest.approx(2 * (0.12 * 0.88 / 50) ** 0.5, abs=1e-12)
    assert warning_line(check, 0.10) == (
        "sao train: behaviour drift: episodes ending without an answer rose from 0% "
        "(steps 1-5, 50 episodes) to 12% (steps 9-13, 50 episodes), most of it max_turns "
        "(0% -> 12%); more than train.drift_warn_rise=0.1"
    )
    assert monitor.warned_at == [13]


def test_a_healthy_run_with_flat_shares_never_warns():
    monitor = DriftMonitor(window=5, warn_rise=0.10)
    assert all(monitor.observe(step) is None for step in steps_of([3] * 40))
    final = compare_windows(monitor.history, 5, 0.10)
    assert final is not None and final.rise == 0.0 and not final.drifted
    assert final.first["no_answer"] == final.last["no_answer"] == pytest.approx(0.3)


def test_a_rise_equal_to_the_threshold_does_not_warn_and_a_larger_one_does():
    def crossed(before: float, after: float, n: int = 10_000) -> bool:
        monitor = DriftMonitor(window=1, warn_rise=0.10)
        return [monitor.observe(s) for s in no_answer_steps([before, after], n)][-1] is not None

    assert not crossed(0.0, 0.1)
    assert not crossed(0.2, 0.3)  # 0.3 - 0.2 is 0.09999999999999998 in floats
    assert crossed(0.0, 0.125)
    assert not crossed(0.5, 0.0)  # a fall is not drift


def test_a_rise_within_the_noise_of_few_episodes_does_not_warn():
    def crossed(n: int) -> bool:
        monitor = DriftMonitor(window=1, warn_rise=0.10)
        return [monitor.observe(s) for s in no_answer_steps([0.0, 0.125], n)][-1] is not None

    # One episode of 8: noise 2 * sqrt(0.125 * 0.875 / 8) = 0.234 > 0.125.
    assert not crossed(8)
    # 16 of 128: noise 2 * sqrt(0.125 * 0.875 / 128) = 0.058 < 0.125.
    assert crossed(128)
    # Every episode stalls: nothing to doubt, even in a batch of 2.
    monitor = DriftMonitor(window=1, warn_rise=0.10)
    assert [monitor.observe(s) for s in no_answer_steps([0.0, 1.0], 2)][-1] is not None


def test_warns_again_only_after_the_rise_fell_to_half_the_threshold():
    monitor = DriftMonitor(window=1, warn_rise=0.10)
    for step in no_answer_steps([0.0, 0.5, 0.06, 0.5, 0.04, 0.5], 10_000):
        monitor.observe(step)
    # Step 3's rise of 0.06 is above 0.05, so step 4 does not warn again; step 5's 0.04 re-arms.
    assert monitor.warned_at == [2, 6]


def test_summary_of_a_stalled_run_has_first_and_last_shares_and_the_warning():
    entry = drift_summary(rows_of(STALLING), window=5, warn_rise=0.10)
    assert entry["checked"] and entry["warned"] and entry["drifted_at_end"]
    assert entry["warned_at_steps"] == [13]
    assert entry["window_steps"] == 5 and entry["steps_with_shares"] == 20
    assert entry["first_steps"] == [1, 5] and entry["last_steps"] == [16, 20]
    assert entry["first_episodes"] == entry["last_episodes"] == 50
    # Steps 16-20 stall 6, 7, 8, 8, 8 of 10: a mean of 0.74.
    assert entry["last"]["max_turns"] == pytest.approx(0.74)
    assert entry["last"]["no_answer"] == pytest.approx(0.74)
    assert entry["last"]["answer"] == pytest.approx(0.26)
    assert entry["first"]["max_turns"] == 0.0 and entry["first"]["answer"] == 1.0
    assert entry["no_answer_rise"] == pytest.approx(0.74)
    assert entry["noise"] == pytest.approx(2 * (0.74 * 0.26 / 50) ** 0.5)


def test_summary_of_a_healthy_run_and_of_one_too_short_to_compare():
    healthy = drift_summary(rows_of([2] * 12), 3, 0.10)
    assert healthy["checked"] and not healthy["warned"] and not healthy["drifted_at_end"]
    assert healthy["no_answer_rise"] == 0.0 and healthy["warned_at_steps"] == []
    short = drift_summary(rows_of([9]), 1, 0.10)
    assert short == {
        "window_steps": 1,
        "warn_rise": 0.10,
        "steps_with_shares": 1,
        "checked": False,
        "warned": False,
        "warned_at_steps": [],
    }


def test_a_resumed_run_seeded_with_its_rows_warns_as_one_uninterrupted_run():
    rows = rows_of(STALLING)
    resumed = replay(rows[:16], window=5, warn_rise=0.10)  # killed after step 15
    for step in steps_of(STALLING)[15:]:
        assert resumed.observe(step) is None, "warned again after the resume"
    assert resumed.warned_at == replay(rows, 5, 0.10).warned_at == [13]


def test_the_run_prints_one_line_on_stderr_per_crossing(capsys):
    config = SimpleNamespace(train=SimpleNamespace(drift_warn_rise=0.10))
    run = SimpleNamespace(config=config, drift=DriftMonitor(window=5, warn_rise=0.10))
    for row in rows_of(STALLING):
        _watch_drift(run, row)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("sao train: behaviour drift: episodes ending without an answer rose")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.drift_warn_rise=0"], "train.drift_warn_rise: Input should be greater than 0"),
        (["train.drift_warn_rise=1.5"], "train.drift_warn_rise: Input should be less than"),
        (["train.drift_window=0"], "train.drift_window: Input should be greater than"),
        (
            ["train.steps=6", "train.drift_window=4"],
            "train.drift_window: two windows of 4 steps must fit in train.steps (6)",
        ),
    ],
)
def test_drift_settings_that_cannot_be_honoured_are_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as info:
        load_config("sao", None, overrides)
    assert message in str(info.value) and "\n" not in str(info.value)
