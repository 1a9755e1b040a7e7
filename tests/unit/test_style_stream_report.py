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


def asked(style, requested, reward):
    """A reply to a prompt that requested (and so prefers) `requested`."""
    trajectory = traj(style, requested, reward)
    trajectory.metadata["info"]["requested_style"] = requested
    return trajectory


def test_step_metrics_read_the_policy_own_style_off_unrequested_prompts():
    batch = [
        traj("chuunibyou", "chuunibyou", 1.0),
        traj("cute", "chuunibyou", 0.0),
        traj("cute", "chuunibyou", 0.0),
        traj(None, "chuunibyou", 0.0, reply="the moon is bright"),
        asked("chuunibyou", "chuunibyou", 1.0),
        asked("cute", "chuunibyou", 0.0),
    ]
    m = step_metrics(batch)
    assert m["style/requested_share"] == pytest.approx(2 / 6)
    assert (m["style/reward_unrequested"], m["style/reward_requested"]) == (0.25, 0.5)
    assert m["style/request_followed"] == 0.5
    # Shares of the four unrequested replies only.
    assert (m["style/share_cute"], m["style/share_chuunibyou"], m["style/share_none"]) == (
        0.5,
        0.25,
        0.25,
    )
    # All requested: the shares fall back to every reply, and there is no unrequested reward.
    only = step_metrics([asked("cute", "cute", 1.0), asked("pirate", "cute", 0.0)])
    assert (only["style/share_cute"], only["style/request_followed"]) == (0.5, 0.5)
    assert "style/reward_unrequested" not in only


def test_step_metrics_without_requests_add_only_a_zero_share():
    batch = [traj("cute", "cute", 1.0), traj("pirate", "cute", 0.0)]
    m = step_metrics(batch)
    assert m["style/requested_share"] == 0.0
    assert not {"style/reward_unrequested", "style/reward_requested"} & set(m)
    assert m["style/share_cute"] == m["style/share_pirate"] == 0.5


def request_rows(requested_share):
    # Preference cute for steps 1-6, then chuunibyou. Requests for the new style are rewarded at
    # once, so the reward over every prompt is back within 2 steps; the unrequested reward
    # recovers at step 12.
    everything = [0.8] * 6 + [0.5, 0.7, 0.8, 0.8, 0.8, 0.8]
    unrequested = [0.8] * 6 + [0.0, 0.1, 0.3, 0.7, 0.8, 0.8]
    rows = []
    for step, (reward, own) in enumerate(zip(everything, unrequested, strict=True), start=1):
        row = {
            "step": step,
            "rollout/reward_mean": reward,
            "style/preferred_index": 0 if step <= 6 else 1,
            "style/share_cute": 0.5,
            "style/requested_share": requested_share,
        }
        if requested_share:
            row.update(
                {
                    "style/reward_unrequested": own,
                    "style/reward_requested": 1.0,
                    "style/request_followed": 0.9,
                }
            )
        rows.append(row)
    return rows


def test_report_reads_lags_off_the_unrequested_reward_when_there_are_requests(tmp_path):
    import json

    from sao.reproduce.readers import adaptation_lag_censored, after_first_switch_phase_end_reward

    report = run_report(request_rows(0.25))
    out = report.summary
    assert out["style_switch_steps"] == [7]
    assert out["style_adaptation_lag"] == [5]  # the reward over every prompt would give 2
    assert out["style_phase_end_reward"] == pytest.approx([0.8, (0.7 + 0.8 + 0.8) / 3])
    assert out["style_phase_end_reward_all"] == pytest.approx([0.8, 0.8])
    assert out["style_phase_end_reward_requested"] == pytest.approx([1.0, 1.0])
    assert out["style_phase_end_request_followed"] == pytest.approx([0.9, 0.9])
    assert out["style_reward_key"] == "style/reward_unrequested"
    assert out["style_requested_share"] == pytest.approx(0.25)
    assert list(report.panels) == ["style_requests.png"]
    # The claim (g) readers see the unrequested numbers.
    (tmp_path / "summary.json").write_text(json.dumps({**out, "steps": 12}))
    assert adaptation_lag_censored(tmp_path) == 5.0
    assert after_first_switch_phase_end_reward(tmp_path) == pytest.approx((0.7 + 0.8 + 0.8) / 3)


def test_report_without_requests_reads_the_whole_reward():
    report = run_report(request_rows(0.0))
    out = report.summary
    assert out["style_adaptation_lag"] == [2]
    assert out["style_phase_end_reward"] == pytest.approx([0.8, 0.8])
    assert not [key for key in out if "request" in key] and report.panels == {}
    # Rows logged before requests existed have no requested share at all.
    old = [{k: v for k, v in r.items() if k != "style/requested_share"} for r in request_rows(0.0)]
    assert run_report(old).summary == out
