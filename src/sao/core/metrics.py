"""Diagnostics computed from batch tensors. Pure tensor math, no I/O."""

from __future__ import annotations

import math

import torch

_MIN_RETURN_VARIANCE = 1e-10


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """`1 - Var(R - V) / Var(R)` over masked positions (the critic's `critic/vf_explained_var`).

    1 is a perfect critic, 0 is no better than predicting the mean return, negative is worse.
    Returns NaN when the returns have no variance (nothing to explain); float32 round-off in
    `R = A + V` leaves ~1e-20 of variance on constant returns, hence a small floor, not zero.
    """
    m = mask > 0
    if m.sum() < 2:
        return math.nan
    r = returns[m].double()
    v = values[m].double()
    var_r = r.var(unbiased=False)
    if var_r <= _MIN_RETURN_VARIANCE:
        return math.nan
    return float(1.0 - (r - v).var(unbiased=False) / var_r)


def masked_variance(x: torch.Tensor, mask: torch.Tensor) -> float:
    """Population variance of `x` over positions where `mask > 0`, each position weighted equally
    (NaN when there are fewer than 2): the denominator of `explained_variance`, logged beside it
    as `critic/returns_var` so that `(1 - EV) * Var(R)`, the critic's error variance, can be
    followed across steps whose returns spread differently."""
    m = mask > 0
    if m.sum() < 2:
        return math.nan
    return float(x[m].double().var(unbiased=False))


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean of `x` over positions where `mask > 0` (0 when there are none)."""
    m = mask > 0
    return float(x[m].float().mean()) if m.any() else 0.0
