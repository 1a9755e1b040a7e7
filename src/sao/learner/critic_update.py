"""One critic-only update: the critic's values regressed towards fixed returns, one optimizer step.

Every place the critic trains takes this step (SAO_SPEC sections 4 and 5): the K updates of each
learner step (`Learner.critic_step`), value pretraining's mini-batches
(`sao.learner.value_pretrain`) and a live service's warm-up batches (`sao.serve.learning`). They
differ only in what they feed it: the returns (GAE targets or Monte-Carlo returns), the
optimizer (the learner's, or value pretraining's own over every critic parameter) and whether
the loss is clipped around the values the advantages used.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from sao.core.losses import value_loss
from sao.learner.data_parallel import RankGroup
from sao.learner.optim import apply_gradients


def critic_update(
    values: Tensor,
    returns: Tensor,
    mask: Tensor,
    optimizer: torch.optim.Optimizer,
    grad_clip: float,
    agg: str,
    old_values: Tensor | None = None,
    value_clip: float | None = None,
    ranks: RankGroup | None = None,
    on_gradients: Callable[[], dict[str, float]] | None = None,
) -> tuple[dict[str, float], bool]:
    """One optimizer step of `value_loss(values, returns)` over `mask`'s tokens.

    Args:
        values: `[B, T]` critic values with their graph (the forward the step backpropagates).
        returns: `[B, T]` targets (detached inside the loss).
        mask: `[B, T]` action tokens.
        optimizer: whose parameters move.
        grad_clip: the global gradient-norm clip.
        agg: the loss aggregation (`algo.agg`).
        old_values: the values before this step, for `value_clip`.
        value_clip: PPO-style value clipping around `old_values` (None: none).
        ranks: with several learner ranks, the loss and metrics are the whole batch's.
        on_gradients: measures the raw gradients after the backward pass; its metrics join the
            result (they are absent when the loss was not finite and nothing ran backward).

    Returns:
        `(metrics, applied)`: `critic/vf_loss` (and `critic/vf_clipfrac` when clipping),
        `critic/grad_norm` (NaN when skipped) and whether the optimizer stepped.
    """
    loss, metrics = value_loss(values, returns, mask, old_values, value_clip, agg)
    if ranks is not None:
        metrics = ranks.mean_metrics(metrics, mask, agg)
        loss = ranks.scale_loss(loss, mask, agg)
    measured: dict[str, float] = {}
    hook = None if on_gradients is None else (lambda: measured.update(on_gradients()))
    metrics["critic/grad_norm"], applied = apply_gradients(optimizer, loss, grad_clip, hook)
    return metrics | measured, applied
