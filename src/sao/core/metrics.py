"""Diagnostics computed from batch tensors. Pure tensor math, no I/O."""

from __future__ import annotations

import math

import torch


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """`1 - Var(R - V) / Var(R)` over masked positions (the critic's `critic/vf_explained_var`).

    1 is a perfect critic, 0 is no better than predicting the mean return, negative is worse.
    Returns NaN when the returns have no variance (nothing to explain).
    """
    m = mask > 0
    if m.sum() < 2:
        return math.nan
    r = returns[m].double()
    v = values[m].double()
    var_r = r.var(unbiased=False)
    if var_r <= 0:
        return math.nan
    return float(1.0 - (r - v).var(unbiased=False) / var_r)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean of `x` over positions where `mask > 0` (0 when there are none)."""
    m = mask > 0
    return float(x[m].float().mean()) if m.any() else 0.0
