"""Optimizers for the learner and the one guarded way to apply a gradient step."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import nn

from sao.config import OptimConfig
from sao.learner.sharding import global_norm_value


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters of `model` that require a gradient (frozen ones are left out)."""
    return [p for p in model.parameters() if p.requires_grad]


def build_optimizer(params: Iterable[nn.Parameter], config: OptimConfig) -> torch.optim.AdamW:
    """AdamW over `params` with the learning rate and weight decay of `config`.

    Raises:
        ValueError: if `params` is empty (every parameter frozen leaves nothing to train).
    """
    params = list(params)
    if not params:
        raise ValueError("build_optimizer: no trainable parameters (is every parameter frozen?)")
    return torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)


def gradient_norm(params: Sequence[nn.Parameter]) -> float:
    """The L2 norm of the gradients of `params`; a parameter without a gradient counts as 0.
    Over the whole parameters when they are sharded (a collective then: every rank must call)."""
    grads = [p.grad.detach() for p in params if p.grad is not None]
    return global_norm_value(torch.nn.utils.get_total_norm(grads)) if grads else 0.0


def apply_gradients(
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    max_grad_norm: float,
    on_gradients: Callable[[], None] | None = None,
) -> tuple[float, bool]:
    """Backpropagate `loss`, clip the global gradient norm and step, unless anything is non-finite.

    A non-finite loss or gradient norm skips the step: gradients are cleared and no parameter or
    optimizer state moves, so one bad batch cannot poison the weights or Adam's moments.
    `on_gradients`, if given, runs after the backward pass and before clipping (to measure the raw
    gradients); it does not run when the loss is not finite.

    Returns:
        `(grad_norm, applied)`: the norm before clipping (NaN when the loss was not finite) and
        whether the optimizer stepped.
    """
    optimizer.zero_grad(set_to_none=True)
    if not torch.isfinite(loss.detach()).all():
        return math.nan, False
    loss.backward()
    if on_gradients is not None:
        on_gradients()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    grad_norm = global_norm_value(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
    applied = math.isfinite(grad_norm)
    if applied:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm, applied
