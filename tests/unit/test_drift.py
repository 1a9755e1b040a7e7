"""Behaviour drift: endings per trajectory, shares per step, windows, and when the run warns."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sao.config import ConfigError, load_config
from sao.runtime.drift import (
    DriftMonitor,
    compare_windows,
    drift_summary,
    drift_window,
    ending,
    ending_metrics,
    ending_shares,
    replay,
    shares_in_row,
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


def test_step_metrics_carry_the_shares_under_rollout_end():
    metrics = ending_metrics(ending_shares([ANSWER, OUT_OF_TOKENS]))
    assert metrics["rollout/end_answer"] == 0.5
    assert metrics["rollout/end_max_tokens"] == 0.5
    assert metrics["rollout/end_no_answer"] == 0.5
    assert shares_in_row({"step": 3, **metrics}) == ending_shares([ANSWER, OUT_OF_TOKENS])
    assert shares_in_row({"step": 0, "eval/accuracy": 0.5}) is None


@pytest.mark.parametrize(
    ("steps", "configured", "window"),
    [(0, None, 1), (2, None, 1), (6, None, 1), (20, None, 5), (60, None, 10), (60, 7, 7)],
)
def test_window_is_a_quarter_of_the_run_between_1_and_10_unless_configured(
    steps, configured, window
):
    assert drift_window(steps, configured) == window


def stalling_stream() -> list[dict[str, float]]:
    """20 steps of 10 episodes: none stall for 10 steps, then one more each step up to 8."""
    stalled = [0] * 10 + [1, 2, 3, 4, 5, 6, 7, 8, 8, 8]
    return [ending_shares(batch_with(k)) for k in stalled]


def test_a_stalling_run_warns_once_when_the_latest_window_crosses():
    monitor = DriftMonitor(window=5, warn_rise=0.10)
    crossings = []
    for step, shares in enumerate(stalling_stream(), start=1):
        check = monitor.observe(step, shares)
        if check is not None:
            crossings.append((step, check))
    # Step 11: steps 7-11 average 0.02; step 12: 0.06; step 13: (0.1+0.2+0.3)/5 = 0.12 > 0.10.
    assert [step for step, _ in crossings] == [13]
    check = crossings[0][1]
    assert check.first_steps == (1, 5) and check.last_steps == (9, 13)
    assert check.first["no_answer"] == 0.0
    assert check.last["no_answer"] == pytest.approx(0.12, abs=1e-12)
    assert warning_line(check, 0.10) == (
        "sao train: behaviour drift: episodes ending without an answer rose from 0% "
        "(steps 1-5) to 12% (steps 9-13), most of it max_turns (0% -> 12%); more than "
        "train.drift_warn_rise=0.1"
    )
    assert monitor.warned_at == [13]


def test_a_healthy_run_with_flat_shares_never_warns():
    monitor = DriftMonitor(window=5, warn_rise=0.10)
    flat = ending_shares(batch_with(3))
    assert all(monitor.observe(step, flat) is None for step in range(1, 41))
    final = compare_windows(monitor.history, 5, 0.10)
    assert final is not None and final.rise == 0.0 and not final.drifted
    assert final.first["no_answer"] == final.last["no_answer"] == pytest.approx(0.3)


def test_a_rise_equal_to_the_threshold_does_not_warn_and_a_larger_one_does():
    def crossed(before: float, after: float) -> bool:
        history_shares = [{"answer": 1 - before, "no_answer": before}]
        history_shares.append({"answer": 1 - after, "no_answer": after})
        monitor = DriftMonitor(window=1, warn_rise=0.10)
        return [monitor.observe(s, x) for s, x in enumerate(history_shares, 1)][-1] is not None

    assert not crossed(0.0, 0.1)
    assert not crossed(0.2, 0.3)  # 0.3 - 0.2 is 0.09999999999999998 in floats
    assert crossed(0.0, 0.125)
    assert not crossed(0.5, 0.0)  # a fall is not drift


def test_warns_again_only_after_the_rise_fell_to_half_the_threshold():
    no_answer = [0.0, 0.5, 0.06, 0.5, 0.04, 0.5]
    monitor = DriftMonitor(window=1, warn_rise=0.10)
    for step, share in enumerate(no_answer, start=1):
        monitor.observe(step, {"answer": 1 - share, "max_turns": share, "no_answer": share})
    # Step 3's rise of 0.06 is above 0.05, so step 4 does not warn again; step 5's 0.04 re-arms.
    assert monitor.warned_at == [2, 6]


def rows_of(stream: list[dict[str, float]]) -> list[dict]:
    """Metric rows as `metrics.jsonl` holds them: an eval-only row at step 0, then one per step."""
    rows: list[dict] = [{"step": 0, "eval/accuracy": 0.25}]
    for step, shares in enumerate(stream, start=1):
        rows.append({"step": step, "rollout/reward_mean": 0.5, **ending_metrics(shares)})
    return rows


def test_summary_of_a_stalled_run_has_first_and_last_shares_and_the_warning():
    entry = drift_summary(rows_of(stalling_stream()), window=5, warn_rise=0.10)
    assert entry["checked"] and entry["warned"] and entry["drifted_at_end"]
    assert entry["warned_at_steps"] == [13]
    assert entry["window_steps"] == 5 and entry["steps_with_shares"] == 20
    assert entry["first_steps"] == [1, 5] and entry["last_steps"] == [16, 20]
    # Steps 16-20 stall 6, 7, 8, 8, 8 of 10: a mean of 0.74.
    assert entry["last"]["max_turns"] == pytest.approx(0.74)
    assert entry["last"]["no_answer"] == pytest.approx(0.74)
    assert entry["last"]["answer"] == pytest.approx(0.26)
    assert entry["first"]["max_turns"] == 0.0 and entry["first"]["answer"] == 1.0
    assert entry["no_answer_rise"] == pytest.approx(0.74)


def test_summary_of_a_healthy_run_and_of_one_too_short_to_compare():
    healthy = drift_summary(rows_of([ending_shares(batch_with(2))] * 12), 3, 0.10)
    assert healthy["checked"] and not healthy["warned"] and not healthy["drifted_at_end"]
    assert healthy["no_answer_rise"] == 0.0 and healthy["warned_at_steps"] == []
    short = drift_summary(rows_of([ending_shares(batch_with(9))]), 1, 0.10)
    assert short == {
        "window_steps": 1,
        "warn_rise": 0.10,
        "steps_with_shares": 1,
        "checked": False,
        "warned": False,
        "warned_at_steps": [],
    }


def test_a_resumed_run_seeded_with_its_rows_warns_as_one_uninterrupted_run():
    stream = stalling_stream()
    rows = rows_of(stream)
    resumed = replay(rows[:16], window=5, warn_rise=0.10)  # killed after step 15
    for step, shares in enumerate(stream[15:], start=16):
        assert resumed.observe(step, shares) is None, "warned again after the resume"
    assert resumed.warned_at == replay(rows, 5, 0.10).warned_at == [13]


def test_the_run_prints_one_line_on_stderr_per_crossing(capsys):
    config = SimpleNamespace(train=SimpleNamespace(drift_warn_rise=0.10))
    run = SimpleNamespace(config=config, drift=DriftMonitor(window=5, warn_rise=0.10))
    for step, shares in enumerate(stalling_stream(), start=1):
        _watch_drift(run, step, shares)
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
