"""The actor's update on one batch (SAO_SPEC sections 3 and 6).

- DIS (`sao` and its ablations, `grpo_dis`, `running_mean`): every update is against the rollout
  log-probs, which are the behaviour policy; nothing recomputes an old policy. One update per
  batch unless `algo.dis_minibatches` splits the batch into contiguous slices, one optimizer step
  each (`sao_mb4`): the later slices then meet weights the earlier ones moved, and the DIS window
  masks what moved too far, exactly as it does for a stale trajectory.
- PPO clip (`grpo`, `vapo_nodis`): the learner computes the old log-probs once, with the weights
  before the first update, then takes `ppo_epochs` passes over `ppo_minibatches` contiguous slices
  of the batch, one optimizer step each, all against those old log-probs (verl's GRPO). From the
  second update on the ratio moves off 1 and the clip acts. Rollout log-probs never enter the loss;
  they are only compared with the old log-probs for the staleness diagnostics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import Tensor

from sao.config import AlgoConfig
from sao.core.losses import dis_policy_loss, dis_window_fractions, ppo_clip_policy_loss
from sao.learner.data_parallel import RankGroup
from sao.learner.optim import apply_gradients
from sao.trajectory import Batch

# Used when a PPO-clip config leaves them unset (see `AlgoConfig.ppo_minibatches`).
DEFAULT_PPO_MINIBATCHES = 4
DEFAULT_PPO_EPOCHS = 1
# The DIS window of SAO_SPEC section 3, used to report what DIS would mask in a PPO run.
_DIS_WINDOW = (
    AlgoConfig.model_fields["eps_low"].default,
    AlgoConfig.model_fields["eps_high"].default,
)

# `(logprobs, entropy)`, both `[n, T]`, of the tempered policy on a batch's rows.
PolicyForward = Callable[[Batch], tuple[Tensor, Tensor]]


@dataclasses.dataclass
class ActorResult:
    """What an actor update did: its metrics and how many optimizer steps were skipped."""

    metrics: dict[str, float]
    skipped: int
    per_update: list[dict[str, float]]
    """Loss metrics of each optimizer step in order (one entry for DIS)."""


def dis_update(
    forward: PolicyForward,
    batch: Batch,
    advantages: Tensor,
    optimizer: torch.optim.Optimizer,
    algo: AlgoConfig,
    grad_clip: float,
    updates: list[list[int]],
    ranks: RankGroup,
) -> ActorResult:
    """DIS updates against the rollout log-probs, one optimizer step per entry of `updates`
    (this rank's rows of each mini-batch; one entry holding all of them by default).

    Metrics are means over the updates (`actor/dis_updates` counts them); each update's own
    are in `per_update`. With one update this is the single step of SAO_SPEC section 3.
    """
    per_update: list[dict[str, float]] = []
    skipped = 0
    for rows in updates:
        index = torch.tensor(rows, dtype=torch.long, device=advantages.device)
        part = _rows(batch, index) if len(updates) > 1 else batch
        part_advantages = advantages[index] if len(updates) > 1 else advantages
        logprobs, entropy = forward(part)
        loss, metrics = dis_policy_loss(
            logprobs,
            part.rollout_logprobs,
            part_advantages,
            part.action_mask,
            eps_low=algo.eps_low,
            eps_high=algo.eps_high,
            agg=algo.agg,
        )
        metrics = ranks.mean_metrics(metrics, part.action_mask, algo.agg)
        loss = ranks.scale_loss(loss, part.action_mask, algo.agg)
        metrics["actor/grad_norm"], applied = apply_gradients(optimizer, loss, grad_clip)
        metrics["actor/entropy"] = ranks.masked_mean(entropy.detach(), part.action_mask)
        skipped += not applied
        per_update.append(metrics)
    summary = _mean_over_updates(per_update)
    summary["actor/dis_updates"] = float(len(per_update))
    return ActorResult(summary, skipped=skipped, per_update=per_update)


def update_rows(algo: AlgoConfig, batch_size: int) -> list[list[int]]:
    """The batch rows of each actor update: `algo.dis_minibatches` contiguous slices for DIS
    (all rows once by default), `ppo_schedule` for PPO; capped at one row per update."""
    if algo.policy_loss == "dis":
        return [rows.tolist() for rows in _slices(algo.dis_minibatches, batch_size)]
    return [rows.tolist() for rows in ppo_schedule(algo, batch_size)]


def ppo_schedule(algo: AlgoConfig, batch_size: int) -> list[Tensor]:
    """Row indices of each PPO update in order: `epochs` passes over contiguous mini-batches.

    The mini-batch count is capped at the batch size, so a small batch still trains every row.
    """
    minibatches = algo.ppo_minibatches or DEFAULT_PPO_MINIBATCHES
    epochs = algo.ppo_epochs or DEFAULT_PPO_EPOCHS
    return _slices(minibatches, batch_size) * epochs


def _slices(count: int, batch_size: int) -> list[Tensor]:
    """`count` contiguous slices of the batch's row indices, at most one per row."""
    return list(torch.arange(batch_size).tensor_split(min(count, batch_size)))


def _mean_over_updates(per_update: list[dict[str, float]]) -> dict[str, float]:
    return {key: sum(m[key] for m in per_update) / len(per_update) for key in per_update[0]}


def ppo_update(
    forward: PolicyForward,
    batch: Batch,
    advantages: Tensor,
    optimizer: torch.optim.Optimizer,
    algo: AlgoConfig,
    grad_clip: float,
    updates: list[list[int]],
    ranks: RankGroup,
) -> ActorResult:
    """PPO clip in mini-batches against old log-probs taken once, before the first update.

    `updates` holds the rows of `batch` each update trains (this rank's part of each
    mini-batch of `ppo_schedule`); losses and metrics are the whole mini-batch's (`ranks`).

    With a single update the old log-probs are that update's own forward, detached (the same
    weights, so the same numbers), which saves a pass; the ratio is then exactly 1.

    Metrics: `actor/pg_loss`, `actor/pg_clipfrac`, `actor/ratio_mean` and `actor/grad_norm` are
    means over the updates; `actor/ppo_updates` counts them; `actor/rollout_ratio_mean` and
    `actor/dis_would_mask_low` / `_high` compare the old log-probs with the rollout's (what DIS
    with its default window would have masked; this loss masks nothing).
    """
    mask = batch.action_mask
    schedule = [torch.tensor(rows, dtype=torch.long) for rows in updates]
    window = {"eps_low": algo.eps_low, "eps_high": algo.eps_high, "agg": algo.agg}
    old_logprobs: Tensor | None = None
    entropy: Tensor | None = None
    if len(schedule) > 1:
        with torch.no_grad():
            old_logprobs, entropy = forward(batch)

    per_update: list[dict[str, float]] = []
    skipped = 0
    for rows in schedule:
        part = _rows(batch, rows) if len(schedule) > 1 else batch
        logprobs, part_entropy = forward(part)
        if old_logprobs is None:
            old_logprobs, entropy = logprobs.detach(), part_entropy
        loss, metrics = ppo_clip_policy_loss(
            logprobs, old_logprobs[rows], advantages[rows], part.action_mask, **window
        )
        metrics = ranks.mean_metrics(metrics, part.action_mask, algo.agg)
        loss = ranks.scale_loss(loss, part.action_mask, algo.agg)
        metrics["actor/grad_norm"], applied = apply_gradients(optimizer, loss, grad_clip)
        skipped += not applied
        per_update.append(metrics)

    assert old_logprobs is not None and entropy is not None
    summary = _mean_over_updates(per_update)
    summary["actor/ppo_updates"] = float(len(per_update))
    summary["actor/entropy"] = ranks.masked_mean(entropy.detach(), mask)
    # Clamped like the losses' ratios, so a diverged token cannot make the metric inf.
    log_ratio = (old_logprobs - batch.rollout_logprobs).clamp(-20.0, 20.0)
    summary["actor/rollout_ratio_mean"] = ranks.masked_mean(torch.exp(log_ratio), mask)
    low, high = dis_window_fractions(old_logprobs, batch.rollout_logprobs, mask, *_DIS_WINDOW)
    fractions = {"actor/dis_would_mask_low": low, "actor/dis_would_mask_high": high}
    summary |= ranks.mean_metrics(fractions, mask, algo.agg)
    return ActorResult(summary, skipped=skipped, per_update=per_update)


def _rows(batch: Batch, rows: Tensor) -> Batch:
    index = rows.to(batch.input_ids.device)
    return Batch(**{f.name: getattr(batch, f.name)[index] for f in dataclasses.fields(batch)})
