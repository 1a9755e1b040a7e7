"""A two-token trajectory carrying only a reward and metadata, for per-batch metric tests."""

from typing import Any

from sao.trajectory import Trajectory


def stub_trajectory(reward: float, metadata: dict[str, Any]) -> Trajectory:
    """One prompt token and one sampled token; what matters is `reward` and `metadata`."""
    return Trajectory(
        token_ids=[1, 5],
        action_mask=[0, 1],
        rollout_logprobs=[0.0, -1.0],
        policy_versions=[-1, 0],
        reward=reward,
        metadata=metadata,
    )
