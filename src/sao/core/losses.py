"""Policy and value losses (SAO_SPEC sections 3, 4, 6). Pure tensor math, no I/O.

Every loss takes `[B, T]` token-aligned tensors and returns `(loss, metrics)`, where `metrics`
maps stable metric names to floats. `agg` chooses the normaliser `Z`:

- `"token-mean"`: mean over all action tokens of the batch (default);
- `"seq-mean-token-mean"`: mean over each trajectory's action tokens, then over trajectories.
"""

from __future__ import annotations

import torch

AGG_MODES = ("token-mean", "seq-mean-token-mean")
# exp() of a log-ratio beyond this is out of any sensible window; clamping keeps it finite.
_MAX_LOG_RATIO = 20.0
# SAO_SPEC section 3's window `[1 - eps_low, 1 + eps_high]` = `[0.7, 6.0]` (the ports' values).
DIS_EPS_LOW, DIS_EPS_HIGH = 0.3, 5.0


def aggregate(per_token: torch.Tensor, action_mask: torch.Tensor, agg: str) -> torch.Tensor:
    """Reduce a `[B, T]` per-token loss over action tokens with the chosen normaliser."""
    mask = action_mask > 0
    masked = torch.where(mask, per_token, 0.0)
    if agg == "token-mean":
        return masked.sum() / mask.sum().clamp(min=1)
    if agg == "seq-mean-token-mean":
        per_seq_count = mask.sum(dim=1)
        has_tokens = per_seq_count > 0
        per_seq = masked.sum(dim=1) / per_seq_count.clamp(min=1)
        return per_seq[has_tokens].sum() / has_tokens.sum().clamp(min=1)
    raise ValueError(f"agg must be one of {AGG_MODES}, got {agg!r}")


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    return float(torch.where(mask, x, 0.0).sum() / mask.sum().clamp(min=1))


def importance_ratio(logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor) -> torch.Tensor:
    """`[B, T]` ratio `exp(logprobs - behaviour_logprobs)`, its log clamped to stay finite."""
    return torch.exp((logprobs - behaviour_logprobs).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))


def dis_window(
    ratio: torch.Tensor, action_mask: torch.Tensor, eps_low: float, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """`(below, above)` `[B, T]` booleans: the action tokens whose ratio lies below
    `1 - eps_low` or above `1 + eps_high`, which DIS masks (SAO_SPEC section 3)."""
    mask = action_mask > 0
    return mask & (ratio < 1.0 - eps_low), mask & (ratio > 1.0 + eps_high)


def dis_policy_loss(
    logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    eps_low: float = DIS_EPS_LOW,
    eps_high: float = DIS_EPS_HIGH,
    agg: str = "token-mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """DIS: direct double-sided importance sampling with a strict token mask.

        r_t = exp(logpi_theta(a_t|s_t) - rollout_logprob_t)
        m_t = 1 if 1 - eps_low <= r_t <= 1 + eps_high else 0
        L   = -(1/Z) * sum_t action_mask_t * m_t * r_t * A_t

    Out-of-window tokens get exactly zero gradient whatever the sign of `A_t`; inside the window
    the gradient is `r_t * A_t * grad logpi_theta` (since `d r_t = r_t * d logpi_theta`).

    Args:
        logprobs: `[B, T]` current policy log-probs (carry the gradient).
        rollout_logprobs: `[B, T]` log-probs the engine sampled with (the behaviour policy).
        advantages: `[B, T]`.
        action_mask: `[B, T]` 0/1.
    Returns:
        `(loss, metrics)` with `actor/pg_loss`, `actor/dis_masked_low`, `actor/dis_masked_high`,
        `actor/ratio_mean` (fractions over action tokens).
    """
    mask = action_mask > 0
    ratio = importance_ratio(logprobs, rollout_logprobs)
    below, above = dis_window(ratio, action_mask, eps_low, eps_high)
    inside = mask & ~below & ~above
    per_token = torch.where(inside, -ratio * advantages.detach(), 0.0)
    # Z counts every action token, masked ones included: masking removes a token's gradient, it
    # does not re-weight the others.
    loss = aggregate(per_token, action_mask, agg)
    n = mask.sum().clamp(min=1)
    metrics = {
        "actor/pg_loss": float(loss.detach()),
        "actor/dis_masked_low": float(below.sum() / n),
        "actor/dis_masked_high": float(above.sum() / n),
        "actor/ratio_mean": _masked_mean(ratio.detach(), mask),
    }
    return loss, metrics


def dis_window_fractions(
    logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    action_mask: torch.Tensor,
    eps_low: float = DIS_EPS_LOW,
    eps_high: float = DIS_EPS_HIGH,
) -> tuple[float, float]:
    """Fractions of action tokens whose ratio `exp(logprobs - rollout_logprobs)` lies below
    `1 - eps_low` and above `1 + eps_high`: what `dis_policy_loss` masks with this window."""
    below, above = dis_window(
        importance_ratio(logprobs, rollout_logprobs), action_mask, eps_low, eps_high
    )
    n = (action_mask > 0).sum().clamp(min=1)
    return float(below.sum() / n), float(above.sum() / n)


def ppo_clip_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    agg: str = "token-mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's clipped surrogate (asymmetric clip-higher window), for the GRPO/VAPO baselines.

        L = -(1/Z) * sum_t max-loss( r_t * A_t, clip(r_t, 1 - eps_low, 1 + eps_high) * A_t )

    Returns `(loss, metrics)` with `actor/pg_loss`, `actor/pg_clipfrac`, `actor/ratio_mean`.
    """
    mask = action_mask > 0
    ratio = importance_ratio(logprobs, old_logprobs)
    adv = advantages.detach()
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    per_token = torch.maximum(unclipped, clipped)
    loss = aggregate(per_token, action_mask, agg)
    metrics = {
        "actor/pg_loss": float(loss.detach()),
        "actor/pg_clipfrac": _masked_mean((clipped > unclipped).float(), mask),
        "actor/ratio_mean": _masked_mean(ratio.detach(), mask),
    }
    return loss, metrics


def value_loss(
    values: torch.Tensor,
    returns: torch.Tensor,
    action_mask: torch.Tensor,
    old_values: torch.Tensor | None = None,
    clip: float | None = None,
    agg: str = "token-mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """`0.5 * (V_t - R_t)^2` over action tokens, with optional PPO-style value clipping.

    With `clip` set (and `old_values` given), the loss per token is the larger of the unclipped
    error and the error of `old + clamp(V - old, -clip, clip)`.

    Returns `(loss, metrics)` with `critic/vf_loss` (and `critic/vf_clipfrac` when clipping).
    """
    mask = action_mask > 0
    returns = returns.detach()
    per_token = 0.5 * (values - returns) ** 2
    metrics: dict[str, float] = {}
    if clip is not None:
        if old_values is None:
            raise ValueError("value_loss: clip needs old_values")
        old = old_values.detach()
        clipped_values = old + (values - old).clamp(-clip, clip)
        clipped_loss = 0.5 * (clipped_values - returns) ** 2
        metrics["critic/vf_clipfrac"] = _masked_mean((clipped_loss > per_token).float(), mask)
        per_token = torch.maximum(per_token, clipped_loss)
    loss = aggregate(per_token, action_mask, agg)
    metrics["critic/vf_loss"] = float(loss.detach())
    return loss, metrics
