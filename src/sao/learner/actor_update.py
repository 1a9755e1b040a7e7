"""The actor's update on one batch (SAO_SPEC sections 3 and 6): one loop for every policy loss.

- A loss against the rollout log-probs (DIS: `sao` and its ablations, `grpo_dis`,
  `running_mean`): every update is against the rollout log-probs, which are the behaviour policy;
  nothing recomputes an old policy. One update per batch unless `algo.dis_minibatches` splits the
  batch into contiguous slices, one optimizer step each (`sao_mb4`): the later slices then meet
  weights the earlier ones moved, and the DIS window masks what moved too far, exactly as it does
  for a stale trajectory.
- A loss against old log-probs (PPO clip: `grpo`, `vapo_nodis`): the learner computes the old
  log-probs once, with the weights before the first update, then takes `ppo_epochs` passes over
  `ppo_minibatches` contiguous slices of the batch, one optimizer step each, all against those
  old log-probs (verl's GRPO). From the second update on the ratio moves off 1 and the clip acts.
  Rollout log-probs never enter the loss; they are only compared with the old log-probs for the
  staleness diagnostics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import Tensor

from sao.config import AlgoConfig
from sao.core.losses import DIS_EPS_HIGH, DIS_EPS_LOW, dis_window, importance_ratio
from sao.core.registry import PolicyLoss, policy_loss
from sao.learner.data_parallel import RankGroup
from sao.learner.optim import apply_gradients
from sao.trajectory import Batch

# Used when a PPO-clip config leaves them unset (see `AlgoConfig.ppo_minibatches`).
DEFAULT_PPO_MINIBATCHES = 4
DEFAULT_PPO_EPOCHS = 1

# `(logprobs, entropy)`, both `[n, T]`, of the tempered policy on a batch's rows.
PolicyForward = Callable[[Batch], tuple[Tensor, Tensor]]


@dataclasses.dataclass
class ActorResult:
    """What an actor update did: its metrics and how many optimizer steps were skipped."""

    metrics: dict[str, float]
    skipped: int
    per_update: list[dict[str, float]]
    """Loss metrics of each optimizer step in order (one entry for DIS)."""


def actor_update(
    forward: PolicyForward,
    batch: Batch,
    advantages: Tensor,
    optimizer: torch.optim.Optimizer,
    loss: PolicyLoss,
    algo: AlgoConfig,
    grad_clip: float,
    updates: list[list[int]],
    ranks: RankGroup,
) -> ActorResult:
    """One optimizer step of `loss` per entry of `updates` (this rank's rows of each mini-batch;
    one entry holding all of them by default); losses and metrics are the whole mini-batch's
    (`ranks`).

    The behaviour log-probs are the rollout's, or, for a loss `against` old log-probs, the
    learner's own taken once before the first update (with a single update, that update's own
    forward, detached: the same weights, so the same numbers, and a pass saved; the ratio is then
    exactly 1).

    Metrics are means over the updates (`loss.updates_metric` counts them); each update's own are
    in `per_update`. `actor/entropy` is that of the pass that took the old log-probs, or else the
    mean over the updates' passes. Against old log-probs, `actor/rollout_ratio_mean` and
    `actor/dis_would_mask_low` / `_high` compare them with the rollout's (what DIS with its
    default window would have masked; this loss masks nothing).
    """
    many = len(updates) > 1
    against_old = loss.against == "old"
    behaviour: Tensor | None = None if against_old else batch.rollout_logprobs
    entropy: Tensor | None = None
    if against_old and many:
        with torch.no_grad():
            behaviour, entropy = forward(batch)

    per_update: list[dict[str, float]] = []
    skipped = 0
    for rows in updates:
        index = torch.tensor(rows, dtype=torch.long, device=advantages.device)
        part = _rows(batch, index) if many else batch
        logprobs, part_entropy = forward(part)
        if behaviour is None:
            behaviour, entropy = logprobs.detach(), part_entropy
        value, metrics = loss.fn(
            logprobs,
            behaviour[index] if many else behaviour,
            advantages[index] if many else advantages,
            part.action_mask,
            eps_low=algo.eps_low,
            eps_high=algo.eps_high,
            agg=algo.agg,
        )
        metrics = ranks.mean_metrics(metrics, part.action_mask, algo.agg)
        value = ranks.scale_loss(value, part.action_mask, algo.agg)
        metrics["actor/grad_norm"], applied = apply_gradients(optimizer, value, grad_clip)
        if not against_old:
            metrics["actor/entropy"] = ranks.masked_mean(part_entropy.detach(), part.action_mask)
        skipped += not applied
        per_update.append(metrics)

    summary = _mean_over_updates(per_update)
    summary[loss.updates_metric] = float(len(per_update))
    if against_old:
        assert behaviour is not None and entropy is not None
        mask = batch.action_mask
        summary["actor/entropy"] = ranks.masked_mean(entropy.detach(), mask)
        ratio = importance_ratio(behaviour, batch.rollout_logprobs)
        summary["actor/rollout_ratio_mean"] = ranks.masked_mean(ratio, mask)
        below, above = dis_window(ratio, mask, DIS_EPS_LOW, DIS_EPS_HIGH)
        n = (mask > 0).sum().clamp(min=1)
        fractions = {
            "actor/dis_would_mask_low": float(below.sum() / n),
            "actor/dis_would_mask_high": float(above.sum() / n),
        }
        summary |= ranks.mean_metrics(fractions, mask, algo.agg)
    return ActorResult(summary, skipped=skipped, per_update=per_update)


def update_rows(algo: AlgoConfig, batch_size: int) -> list[list[int]]:
    """The batch rows of each actor update: `algo.dis_minibatches` contiguous slices for a loss
    against the rollout (all rows once by default), `ppo_schedule` for one against old
    log-probs; capped at one row per update."""
    if policy_loss(algo.policy_loss).against == "rollout":
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


def _rows(batch: Batch, rows: Tensor) -> Batch:
    index = rows.to(batch.input_ids.device)
    return Batch(**{f.name: getattr(batch, f.name)[index] for f in dataclasses.fields(batch)})
