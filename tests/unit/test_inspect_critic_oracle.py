"""`sao inspect critic-ceiling oracle`: the explained variance a perfect critic reaches, from the return
variance left at probed prefixes."""

import math
import random

import pytest
import torch

from sao.analysis import critic_oracle as value_oracle
from sao.trajectory import Trajectory

Probe = value_oracle.Probe


def test_sample_variance_is_unbiased_and_needs_two_values():
    assert value_oracle.sample_variance([0.0, 1.0]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least 2"):
        value_oracle.sample_variance([1.0])


def test_outcomes_decided_at_every_probe_give_one():
    returns = [[1.0] * 5, [0.0] * 5]
    probes = [Probe(0, 0, (1.0, 1.0)), Probe(1, 3, (0.0, 0.0, 0.0))]
    result = value_oracle.oracle_explained_variance(returns, probes)
    assert result["ev_oracle"] == pytest.approx(1.0)
    assert result["by_quarter"]["0-25%"] == pytest.approx(1.0)
    assert result["by_quarter"]["25-50%"] != result["by_quarter"]["25-50%"]  # no probe: NaN


def test_coin_flips_decided_only_at_the_end_give_the_decided_share():
    # Each trajectory's outcome is a fair coin flipped after its first half: a perfect critic
    # explains nothing over the first half and everything over the second, 0.5 pooled.
    rng = random.Random(0)
    returns, probes = [], []
    for i in range(3000):
        outcome = float(rng.random() < 0.5)
        returns.append([outcome] * 8)
        probes.append(Probe(i, 0, tuple(float(rng.random() < 0.5) for _ in range(8))))
        probes.append(Probe(i, 3, (outcome,) * 8))
    result = value_oracle.oracle_explained_variance(returns, probes)
    assert result["ev_oracle"] == pytest.approx(0.5, abs=0.03)
    assert result["by_quarter"]["0-25%"] == pytest.approx(0.0, abs=0.05)
    assert result["by_quarter"]["75-100%"] == pytest.approx(1.0)


def test_longer_trajectories_weigh_more_in_the_pooled_error():
    # Trajectory 0 (1 token) is decided, trajectory 1 (3 tokens) is not at all: error 3/4 of
    # its residual variance 0.5, over a pooled return variance of 0.25 (one 1, three 0s: 3/16).
    returns = [[1.0], [0.0, 0.0, 0.0]]
    probes = [Probe(0, 0, (1.0, 1.0)), Probe(1, 0, (0.0, 1.0))]
    result = value_oracle.oracle_explained_variance(returns, probes)
    assert result["error_var"] == pytest.approx(0.375)
    assert result["ev_oracle"] == pytest.approx(1.0 - 0.375 / (3 / 16))


def test_the_interval_brackets_the_estimate():
    rng = random.Random(1)
    returns, probes = [], []
    for i in range(200):
        outcome = float(rng.random() < 0.5)
        returns.append([outcome] * 4)
        probes.append(Probe(i, 1, (outcome, float(rng.random() < 0.5))))
    estimate = value_oracle.oracle_explained_variance(returns, probes)["ev_oracle"]
    low, high = value_oracle.bootstrap_interval(returns, probes, resamples=200)
    assert low < estimate < high


def test_no_probe_is_refused():
    with pytest.raises(ValueError, match="no probes"):
        value_oracle.oracle_explained_variance([[1.0, 0.0]], [])


def test_openings_are_grouped_with_their_outcome_and_the_critics_later_values():
    def trajectory(ids: list[int], reward: float) -> Trajectory:
        mask = [0] + [1] * (len(ids) - 1)
        return Trajectory(ids, mask, [-0.1] * len(ids), [0] * len(ids), reward)

    trajectories = [trajectory([5, 7, 8, 9], 1.0), trajectory([5, 6, 8], 0.0)]
    trajectories.append(trajectory([5, 7, 9, 9], 0.0))
    values = torch.tensor([[0.0, 0.5, 0.6, 0.8], [0.0, 0.5, 0.1, 0.0], [0.0, 0.5, 0.4, 0.6]])
    groups = value_oracle.by_first_action_token(trajectories, values, lambda t: f"tok{t}")
    assert list(groups) == ["tok7", "tok6"]
    assert groups["tok7"]["n"] == 2
    assert groups["tok7"]["reward_mean"] == pytest.approx(0.5)
    assert groups["tok7"]["critic_value_mean"] == pytest.approx((0.7 + 0.5) / 2)
    assert groups["tok6"]["critic_value_mean"] == pytest.approx(0.1)


def test_the_replay_gap_is_zero_when_endings_return_what_the_recording_did():
    endings = {(0, 0, 3): [1.0, 0.0], (1, 0, 5): [1.0, 1.0], (2, 1, 4): [0.0, 0.0]}
    recorded = {(0, 0, 3): 0.5, (1, 0, 5): 1.0, (2, 1, 4): 0.0}
    gap = value_oracle.replay_gap(endings, recorded, [4, 6, 5])
    assert gap["replay_gap"] == 0.0
    low, high = gap["replay_gap_95"]
    # Only the first recording's prefix had an open outcome: its endings' spread, 0.5 for the
    # recording and 0.5 / 2 for their mean, weighed by its 4 tokens over the 15.
    assert high == pytest.approx(-low) == pytest.approx(1.96 * math.sqrt(16 * 0.75) / 15)


def test_recordings_that_lack_an_outcome_the_endings_see_do_not_fail_the_check():
    # 20 recordings all succeeded where one ending in eight fails: a draw that happens one time
    # in 14. The gaps are all -0.125, so their measured spread is 0, and an interval from it
    # alone would exclude 0; the spread the endings imply for a recording does not.
    endings = {(i, 0, 2): [1.0] * 7 + [0.0] for i in range(20)}
    recorded = {key: 1.0 for key in endings}
    gap = value_oracle.replay_gap(endings, recorded, [4] * 20)
    assert gap["replay_gap"] == pytest.approx(-0.125)
    low, high = gap["replay_gap_95"]
    half = 1.96 * math.sqrt((0.125 + 0.125 / 8) / 20)
    assert (low, high) == (pytest.approx(-0.125 - half), pytest.approx(-0.125 + half))
    assert low < 0 < high


def _null_draw(rng: random.Random, success: float) -> tuple[dict, dict, list[int]]:
    """64 recordings whose endings are drawn as they were: each succeeds (return 1, 10 action
    tokens) or fails (return 0, 20 tokens: a failure runs on), its outcome decided at a random
    one of its first 10 tokens; 4 tokens probed with 8 endings each."""
    endings, recorded, tokens = {}, {}, []
    for i in range(64):
        outcome = 1.0 if rng.random() < success else 0.0
        length, decided = (10 if outcome else 20), rng.randrange(10)
        tokens.append(length)
        for quarter, cut in enumerate(sorted(rng.sample(range(length), 4))):
            key = (i, quarter, cut)
            if cut >= decided:
                endings[key] = [outcome] * 8
            else:
                endings[key] = [float(rng.random() < success) for _ in range(8)]
            recorded[key] = outcome
    return endings, recorded, tokens


@pytest.mark.parametrize("success", [0.9, 0.97])
def test_the_replay_check_passes_about_95_in_100_null_draws_with_rare_failures(success):
    # The gaps' measured spread alone covered 0 in 88% (at 0.9) and 67% (at 0.97) of these draws.
    rng = random.Random(5)
    covered = 0
    for _ in range(300):
        low, high = value_oracle.replay_gap(*_null_draw(rng, success))["replay_gap_95"]
        covered += low <= 0 <= high
    assert covered / 300 >= 0.93


def test_the_null_variance_bounds_a_shared_ending_by_the_probes_mean_deviation():
    # One probe before the outcome was decided (s2 0.25), one after (s2 0): the recording's mean
    # deviates by at most (0.5 + 0) / 2, and the first probe's 4 endings add 0.25 / 4 / 2**2.
    assert value_oracle.null_variance([(0.25, 4), (0.0, 4)]) == pytest.approx(0.0625 + 0.25 / 16)
    assert value_oracle.null_variance([(0.0, 8)]) == 0.0


def test_the_replay_gap_pools_tokens_so_a_future_that_decides_length_shows_no_gap():
    # From the first action token, half the episodes answer at once and succeed (1 token,
    # return 1), half run a second token and fail (return 0): V(s_0) = 0.5, V(s_1) = 0, and
    # the endings estimate both exactly. Each long recording is probed at one of its 2 tokens,
    # uniformly: one at token 0, one at token 1. Equal weight per trajectory would read
    # (-0.5 - 0.5 + 0.5 + 0) / 4 = -0.125, a gap made by the recorded endings' lengths alone.
    endings = {
        (0, 0, 0): [1.0, 0.0],
        (1, 0, 0): [0.0, 1.0],
        (2, 0, 0): [1.0, 0.0],
        (3, 2, 1): [0.0],
    }
    recorded = {(0, 0, 0): 1.0, (1, 0, 0): 1.0, (2, 0, 0): 0.0, (3, 2, 1): 0.0}
    gap = value_oracle.replay_gap(endings, recorded, [1, 1, 2, 2])
    assert gap["replay_gap"] == pytest.approx(0.0)
    low, high = gap["replay_gap_95"]
    assert low < 0 < high


def test_endings_that_fail_where_the_recording_succeeded_fail_the_check_in_the_table():
    from sao.analysis.critic_run import table

    endings = {(i, 0, 2): [0.0, 1.0, 0.0, 0.0] for i in range(6)}
    recorded = {key: 1.0 for key in endings}
    gap = value_oracle.replay_gap(endings, recorded, [3, 5, 4, 4, 6, 2])
    assert gap["replay_gap"] == pytest.approx(-0.75)
    row = {
        "step": 60,
        "logged_ev": 0.1,
        "critic_ev": 0.5,
        "ceiling_ev": -1.0,
        "ceiling_ev_95": [-2.0, 0.0],
        "reward_mean": 1.0,
        **gap,
    }
    lines = table([row], window=5).splitlines()
    # Each trajectory's endings spread 0.25: half-width 1.96 * sqrt(106 * 0.3125) / 24 = 0.470.
    assert lines[2].endswith("| -0.750 (-1.220 to -0.280) |")
    assert lines[-1].startswith("Replay check failed at step 60:")
    assert "Replay check" not in table([{**row, "replay_gap_95": [-0.1, 0.1]}], window=5)


def test_tool_errors_are_counted_per_tool_call():
    def trajectory(calls: int, errors: int) -> Trajectory:
        meta = {"tool_calls": calls, "tool_errors": errors}
        return Trajectory([5, 6], [0, 1], [0.0, -0.1], [-1, 0], 1.0, metadata=meta)

    assert value_oracle.tool_errors_per_call([trajectory(3, 1), trajectory(1, 0)]) == 0.25
    assert math.isnan(value_oracle.tool_errors_per_call([trajectory(0, 0)]))
