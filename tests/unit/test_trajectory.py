"""The Trajectory record: validation names the field, staleness, JSON round trip, collate."""

import pytest
import torch

from sao.trajectory import Trajectory, collate, split_stale


def make(**overrides):
    fields = dict(
        token_ids=[5, 6, 7, 8, 9],
        action_mask=[0, 1, 1, 0, 1],
        rollout_logprobs=[0.0, -0.5, -1.0, 0.0, -0.25],
        policy_versions=[-1, 3, 4, -1, 4],
        reward=1.0,
        turn_spans=[(1, 3), (4, 5)],
        turn_rewards=[0.5, 0.0],
        metadata={"task_id": "t1", "env": "calc"},
    )
    fields.update(overrides)
    return Trajectory(**fields)


def test_staleness_uses_the_oldest_action_version():
    traj = make()
    assert traj.min_version == 3
    assert traj.staleness(current_version=7) == 4
    assert traj.num_action_tokens == 3


def test_json_round_trip_is_exact():
    traj = make()
    assert Trajectory.from_json(traj.to_json()) == traj
    with pytest.raises(ValueError, match="unknown field"):
        Trajectory.from_dict({**traj.to_dict(), "extra": 1})


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"action_mask": [0, 1, 1, 0]}, "action_mask"),
        ({"rollout_logprobs": [0.0, -0.5]}, "rollout_logprobs"),
        ({"action_mask": [0, 2, 1, 0, 1]}, "action_mask"),
        ({"action_mask": [0, 0, 0, 0, 0], "turn_spans": [], "turn_rewards": None}, "no action"),
        ({"rollout_logprobs": [0.0, float("nan"), -1.0, 0.0, -0.25]}, r"rollout_logprobs\[1\]"),
        ({"rollout_logprobs": [0.0, 0.5, -1.0, 0.0, -0.25]}, r"rollout_logprobs\[1\]"),
        ({"policy_versions": [-1, -1, 4, -1, 4]}, r"policy_versions\[1\]"),
        ({"reward": float("inf")}, "reward"),
        ({"turn_spans": [(1, 3), (2, 5)]}, "turn_spans"),
        ({"turn_rewards": [1.0]}, "turn_rewards"),
    ],
)
def test_invalid_trajectories_name_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        make(**overrides)


def test_observation_tokens_may_carry_any_logprob_and_version():
    traj = make(rollout_logprobs=[0.0, -0.5, -1.0, 3.0, -0.25], policy_versions=[-1, 3, 4, -7, 4])
    assert traj.num_action_tokens == 3


def test_collate_pads_right_and_places_rewards():
    a = make()
    b = make(
        token_ids=[1, 2, 3],
        action_mask=[0, 1, 1],
        rollout_logprobs=[0.0, -0.1, -0.2],
        policy_versions=[-1, 0, 0],
        reward=0.0,
        turn_spans=[(1, 3)],
        turn_rewards=None,
    )
    batch = collate([a, b], pad_token_id=0)
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9], [1, 2, 3, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch.action_mask.tolist() == [[0, 1, 1, 0, 1], [0, 1, 1, 0, 0]]
    assert batch.policy_versions.tolist() == [[-1, 3, 4, -1, 4], [-1, 0, 0, -1, -1]]
    # Turn reward 0.5 on the first turn's last token, outcome 1.0 on the last action token.
    assert batch.rewards.tolist() == [[0, 0, 0.5, 0, 1.0], [0, 0, 0, 0, 0]]
    assert batch.scores.tolist() == [1.0, 0.0]
    # Sequence-level advantages compare the outcome and the turn rewards together.
    assert batch.episode_returns.tolist() == [1.5, 0.0]
    assert batch.padding_frac == pytest.approx(0.2)
    assert torch.equal(batch.rollout_logprobs[1], torch.tensor([0.0, -0.1, -0.2, 0.0, 0.0]))
    with pytest.raises(ValueError, match="no trajectories"):
        collate([])


def test_split_stale_keeps_what_the_bound_allows_in_order() -> None:
    def sampled_at(version: int) -> Trajectory:
        return Trajectory(
            token_ids=(1, 2, 3),
            action_mask=(0, 1, 1),
            rollout_logprobs=(0.0, -1.0, -1.0),
            policy_versions=(-1, version, version),
            reward=1.0,
            turn_spans=((1, 3),),
        )

    batch = [sampled_at(v) for v in (5, 1, 4, 2)]
    assert split_stale(batch, 5, bound=2) == ([0, 2], [1, 3])
    assert split_stale(batch, 5, bound=None) == ([0, 1, 2, 3], [])
    assert split_stale(batch, 5, bound=0) == ([0], [1, 2, 3])
