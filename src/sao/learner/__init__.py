"""The learner: the actor/critic update step and value pretraining."""

from sao.learner.optim import apply_gradients, build_optimizer, trainable_parameters
from sao.learner.step import Learner, group_id_tensor, rollout_metrics
from sao.learner.value_pretrain import monte_carlo_returns, pretrain_value

__all__ = [
    "Learner",
    "apply_gradients",
    "build_optimizer",
    "group_id_tensor",
    "monte_carlo_returns",
    "pretrain_value",
    "rollout_metrics",
    "trainable_parameters",
]
