"""SAO's math: advantage estimators, losses and metrics on plain tensors (no I/O, no runtime),
and the registry that names them (importing this package registers the built-in ones)."""

from sao.core import algorithms as _builtin_algorithms  # noqa: F401  (registers them)
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
from sao.core.registry import (
    AdvantageInputs,
    advantage_estimator,
    policy_loss,
    register_advantage,
    register_policy_loss,
)

__all__ = [
    "AdvantageInputs",
    "RunningMeanBaseline",
    "adaptive_lambda",
    "advantage_estimator",
    "broadcast_to_tokens",
    "dis_policy_loss",
    "explained_variance",
    "group_advantages",
    "policy_loss",
    "ppo_clip_policy_loss",
    "register_advantage",
    "register_policy_loss",
    "step_gae",
    "token_gae",
    "value_loss",
    "whiten",
]
