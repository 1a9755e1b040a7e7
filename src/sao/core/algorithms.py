"""The built-in algorithms, registered by name (`sao.core.registry`): SAO_SPEC sections 3-6.

Each entry adapts one equation of `sao.core.advantages` / `sao.core.losses` to the registry's
signature; the presets (`sao.presets`) name them.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from sao.core.advantages import (
    RunningMeanBaseline,
    adaptive_lambda,
    group_advantages,
    step_gae,
    token_gae,
)
from sao.core.losses import dis_policy_loss, ppo_clip_policy_loss
from sao.core.registry import (
    AdvantageEstimator,
    AdvantageInputs,
    register_advantage,
    register_policy_loss,
)


@register_advantage("token_gae", level="token", needs_critic=True, adaptive_lambda=True)
def token_gae_advantages(inputs: AdvantageInputs, algo: Any) -> Tensor:
    """Skip-observation token GAE at `lambda_actor`, or `1 - 1/(alpha L)` per trajectory."""
    lam: float | Tensor = algo.lambda_actor
    if algo.adaptive_lambda_alpha is not None:
        lam = adaptive_lambda(inputs.action_mask.sum(dim=1), algo.adaptive_lambda_alpha)
    values = _need(inputs.values)
    advantages, _ = token_gae(inputs.rewards, values, inputs.action_mask, algo.gamma, lam)
    return advantages


@register_advantage("step_gae", level="step", needs_critic=True)
def step_gae_advantages(inputs: AdvantageInputs, algo: Any) -> Tensor:
    """Step-level GAE at `lambda_actor`, a step's value from `algo.step_value`."""
    values = _need(inputs.values)
    advantages, _ = step_gae(
        inputs.rewards, values, inputs.action_mask, algo.gamma, algo.lambda_actor, algo.step_value
    )
    return advantages


@register_advantage("group", level="sequence", needs_groups=True)
def group_normalised(inputs: AdvantageInputs, algo: Any) -> Tensor:
    """GRPO: each episode return against its group's mean and std (`[B]`)."""
    assert inputs.group_ids is not None
    return group_advantages(inputs.episode_returns, inputs.group_ids)


@register_advantage(
    "running_mean",
    level="sequence",
    make_state=lambda algo: RunningMeanBaseline(algo.running_mean_window),
)
def running_mean(inputs: AdvantageInputs, algo: Any) -> Tensor:
    """Each episode return against the mean of the last W returns before this batch (`[B]`)."""
    return inputs.state.advantages(inputs.episode_returns)


register_policy_loss("dis", against="rollout")(dis_policy_loss)
register_policy_loss("ppo_clip", against="old", updates_metric="actor/ppo_updates")(
    ppo_clip_policy_loss
)


def value_targets(
    estimator: AdvantageEstimator, rewards: Tensor, values: Tensor, mask: Tensor, algo: Any
) -> Tensor:
    """`[n, T]` critic targets at `lambda_critic`: step-level for a step-level estimator (its
    values are steps' values), token-level GAE for every other."""
    if estimator.level == "step":
        _, returns = step_gae(
            rewards, values, mask, algo.gamma, algo.lambda_critic, algo.step_value
        )
    else:
        _, returns = token_gae(rewards, values, mask, algo.gamma, algo.lambda_critic)
    return returns


def _need(values: Tensor | None) -> Tensor:
    if values is None:
        raise ValueError("GAE advantages need critic values (config.critic.enabled=true)")
    return values
