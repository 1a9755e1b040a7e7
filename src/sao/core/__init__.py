"""SAO's math: advantage estimators, losses and metrics on plain tensors (no I/O, no runtime)."""

from sao.core.advantages import (
    RunningMeanBaseline,
    adaptive_lambda,
    broadcast_to_tokens,
    group_advantages,
    step_gae,
    token_gae,
    whiten,
)
from sao.core.losses import dis_policy_loss, ppo_clip_policy_loss, value_loss
from sao.core.metrics import explained_variance

__all__ = [
    "RunningMeanBaseline",
    "adaptive_lambda",
    "broadcast_to_tokens",
    "dis_policy_loss",
    "explained_variance",
    "group_advantages",
    "ppo_clip_policy_loss",
    "step_gae",
    "token_gae",
    "value_loss",
    "whiten",
]
