"""style_stream in a run: per-batch style shares, and the adaptation lag read off logged rows."""

import pytest
from stub_trajectories import stub_trajectory

from sao.envs.style_stream.metrics import phase_end_levels
from sao.envs.style_stream.report import run_report, step_metrics
from sao.envs.style_stream.styles import STYLES


def traj(style, preferred, reward, reply="a reply"):
    info = {"style": style, "preferred_style": preferred, "judge_error": None}
    if reply is not None:  # the environment sets `reply` only when there was an answer
        info["reply"] = reply
    return stub_trajectory(reward, {"info": info})


def test_step_metrics_count_styles_and_the_preferred_one():
    batch = [
        traj("cute", "cute", 1.0),
        traj("cute", "cute", 1.0),
        traj(None, "cute", 0.0),
        traj("classical", "cute", 0.0),
    ]
    m = step_metrics(batch)
    assert m["style/share_cute"] == 0.5
    assert m["style/share_classical"] == 0.25
    assert m["style/share_none"] == 0.25
    assert m["style/share_mixed"] == m["style/share_no_answer"] == 0.0
    assert m["style/preferred_index"] == STYLES.index("cute")
    assert m["style/judge_errors"] == 0.0


def test_step_metrics_tell_apart_the_replies_without_a_style():
    batch = [
        traj(None, "cute", 0.0, reply="the moon, thou abyss"),  # a tie of two styles' markers
        traj(None, "cute", 0.0, reply="the moon is bright"),  # no marker
        traj(None, "cute", 0.0, reply=None),  # a format error: nothing was judged
        traj(None, "cute", 0.0, reply=None),
    ]
    m = step_metrics(batch)
    assert (m["style/share_mixed"], m["style/share_none"], m["style/share_no_answer"]) == (
        0.25,
        0.25,
        0.5,
    )


def test_report_finds_switches_and_lags(tmp_path):
    # Preference cute (0) for steps 1-6, then chuunibyou (1): reward collapses, then recovers.
    rewards = [0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.0, 0.1, 0.3, 0.7, 0.8, 0.8]
    rows = []
    for step, reward in enumerate(rewards, start=1):
        rows.append(
            {
                "step": step,
                "rollout/reward_mean": reward,
                "style/preferred_index": 0 if step <= 6 else 1,
                **{f"style/share_{s}": 0.25 for s in ("cute", "chuunibyou", "pirate")},
                "style/share_none": 0.0 if step <= 6 else 0.25,
            }
        )
    report = run_report(rows)
    out = report.summary
    assert out["style_switch_steps"] == [7]
    # Back to 80% of 0.8 once the mean of the 3 steps ending at t reaches 0.64: at t = 11 it is
    # (0.3 + 0.7 + 0.8) / 3 = 0.6, at t = 12 it is 0.77, so the lag is 12 - 7.
    assert out["style_adaptation_lag"] == [5]
    # Closing levels: steps 4-6 of the first phase, steps 10-12 of the second.
    assert out["style_phase_end_reward"] == pytest.approx([0.8, (0.7 + 0.8 + 0.8) / 3])
    # Closing shares of each kind logged (and only those): `none` rose in the second phase.
    assert out["style_phase_end_shares"] == [
        {"cute": 0.25, "chuunibyou": 0.25, "pirate": 0.25, "none": 0.0},
        {"cute": 0.25, "chuunibyou": 0.25, "pirate": 0.25, "none": 0.25},
    ]
    assert list(report.figures) == ["style_shares.png"]
    assert run_report([{"step": 1, "rollout/reward_mean": 0.5}]).summary == {}


def test_phase_end_levels_cover_every_phase_and_empty_ones():
    rewards = {1: 0.1, 2: 0.2, 3: 0.3, 4: 0.4, 9: 0.9}
    assert phase_end_levels(rewards, [3], window=2) == pytest.approx([0.15, (0.4 + 0.9) / 2])
    assert phase_end_levels(rewards, [5, 6], window=2)[1] is None
    with pytest.raises(ValueError, match="window"):
        phase_end_levels(rewards, [3], window=0)
