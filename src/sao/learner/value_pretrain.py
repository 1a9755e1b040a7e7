"""Value pretraining (SAO_SPEC section 4, cold start): fit the critic alone before RL.

The trajectories come from the frozen initial policy. The critic regresses Monte-Carlo returns
(token GAE with lambda = 1, which needs no values) until its explained variance passes
`config.critic.pretrain.ev_threshold` or `max_steps` optimizer steps end. That explained variance
is measured on `holdout_trajectories` the critic never trains on, when there are any; without
them it is the training set's own, which a critic that memorises its trajectories passes
without predicting anything about new ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tqdm import tqdm

from sao.config import SAOConfig
from sao.core.advantages import token_gae
from sao.core.metrics import explained_variance
from sao.learner.chunking import PackingCost, packed_forward, packing_cost_for
from sao.learner.critic_update import critic_update
from sao.learner.optim import build_optimizer, trainable_parameters
from sao.learner.precision import (
    enable_gradient_checkpointing,
    mixed_precision_forward,
    recomputed_per_pass,
)
from sao.models.critic import ValueModel
from sao.models.lora import has_adapters
from sao.models.packed_attention import use_packed_attention
from sao.trajectory import Trajectory, collate


def monte_carlo_returns(trajectory: Trajectory, gamma: float) -> torch.Tensor:
    """`[T]` discounted reward-to-go on the trajectory's action tokens (0 elsewhere)."""
    batch = collate([trajectory])
    _, returns = token_gae(batch.rewards, torch.zeros_like(batch.rewards), batch.action_mask, gamma)
    return returns[0]


def pretrain_value(
    critic: ValueModel,
    trajectories: Sequence[Trajectory],
    config: SAOConfig,
    pad_token_id: int,
    progress: bool = True,
) -> list[dict[str, float]]:
    """Train `critic` on Monte-Carlo returns; return the curve, one dict per optimizer step.

    Every critic parameter trains here (with LoRA, every adapter and the head: the base is the
    policy's), whatever `config.critic.freeze` says (the freeze applies
    during RL, where `Learner` sets it). The value head starts near zero and must learn a new
    output the language-model features were never shaped for; the attention that reads the
    prompt is what predicts its return, so cold-start fitting uses the full model, while during
    RL frozen attention keeps the critic stable as the policy drifts. The parameters' previous
    `requires_grad` flags are restored on return. The forwards run over packed sequences, with
    the critic switched to segment-by-segment attention where it accepts it
    (`sao.models.packed_attention`), on the critic's device (the caller puts it on the learner's)
    in the learner's precision and with its gradient checkpointing and pass recomputation
    (`config.train`).

    Mini-batches of `config.critic.pretrain.batch_size` trajectories are drawn in shuffled epochs
    (seeded by `config.train.seed`). The explained variance over the training trajectories uses
    each one's values from the forward pass of its latest mini-batch, so it costs no extra pass;
    it counts only once every trajectory has been seen, and lags the weights by up to one epoch.
    From the second epoch on it is measured on trajectories already trained on.

    With `config.critic.pretrain.holdout_trajectories = H > 0`, `H` trajectories chosen at random
    (`split_holdout`) are held out: never trained on, run forward without a gradient after every
    epoch and at the last step, and the threshold is checked against their explained variance
    instead.

    Returns:
        One dict per step: `step` (1-based), `critic/vf_loss` (the mini-batch's),
        `critic/vf_explained_var` (over the training trajectories seen so far),
        `critic/grad_norm`, and on the steps that measure it `critic/vf_explained_var_heldout`.

    Raises:
        ValueError: if `trajectories` is empty or the holdout leaves none to train on.
    """
    if not trajectories:
        raise ValueError("pretrain_value: no trajectories")
    pretrain, algo = config.critic.pretrain, config.algo
    holdout = pretrain.holdout_trajectories
    if holdout >= len(trajectories):
        raise ValueError(
            f"pretrain_value: holdout_trajectories={holdout} leaves none of the "
            f"{len(trajectories)} trajectories to train on"
        )
    held_out, trajectories = split_holdout(trajectories, holdout, config.train.seed)
    device = next(critic.parameters()).device
    returns = [monte_carlo_returns(t, algo.gamma).to(device) for t in trajectories]
    masks = [torch.tensor(t.action_mask, device=device, dtype=torch.float) for t in trajectories]
    latest_values: list[torch.Tensor | None] = [None] * len(trajectories)
    use_packed_attention(critic)
    # Before the checkpointing switch, which marks the decoder layers as training (transformers
    # checkpoints only those); `eval()` after it would switch checkpointing off again.
    critic.eval()
    packing_cost = packing_cost_for(critic)
    if config.train.gradient_checkpointing:
        enable_gradient_checkpointing(critic)
    forward = mixed_precision_forward(
        lambda ids, pos: critic(ids, None, pos), config.train.learner_precision, device
    )
    if config.train.recompute_passes:
        forward = recomputed_per_pass(forward)

    was_trainable = {name: p.requires_grad for name, p in critic.named_parameters()}
    # A LoRA critic's base is the policy's own tensors: only its adapters and head may move.
    trained = trainable_parameters(critic) if has_adapters(critic) else list(critic.parameters())
    for param in trained:
        param.requires_grad_(True)
    optimizer = build_optimizer(trained, config.critic.optim)
    generator = torch.Generator().manual_seed(config.train.seed)
    batch_size = min(pretrain.batch_size, len(trajectories))
    steps_per_epoch = len(trajectories) // batch_size
    order: list[int] = []
    curve: list[dict[str, float]] = []
    bar = tqdm(total=pretrain.max_steps, desc="value pretraining", disable=not progress)
    try:
        for step in range(1, pretrain.max_steps + 1):
            if len(order) < batch_size:
                order = torch.randperm(len(trajectories), generator=generator).tolist()
            chosen, order = order[:batch_size], order[batch_size:]
            batch = collate([trajectories[i] for i in chosen], pad_token_id)
            values = packed_forward(
                forward,
                batch.input_ids.to(device),
                batch.attention_mask.to(device),
                config.train.micro_batch_tokens,
                packing_cost,
            )
            targets = torch.zeros_like(values)
            for row, i in enumerate(chosen):
                targets[row, : len(returns[i])] = returns[i]
                latest_values[i] = values[row, : len(returns[i])].detach()
            mask = batch.action_mask.to(device)
            update, _ = critic_update(
                values, targets, mask, optimizer, config.critic.optim.grad_clip, algo.agg
            )
            grad_norm, loss_value = update["critic/grad_norm"], update["critic/vf_loss"]

            ev = _explained_variance_seen(latest_values, returns, masks)
            row = {
                "step": float(step),
                "critic/vf_loss": loss_value,
                "critic/vf_explained_var": ev,
                "critic/grad_norm": grad_norm,
            }
            if held_out and (step % steps_per_epoch == 0 or step == pretrain.max_steps):
                row["critic/vf_explained_var_heldout"] = held_out_explained_variance(
                    critic, held_out, config, pad_token_id, packing_cost
                )
            curve.append(row)
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.4f}", ev=f"{ev:.3f}")
            if held_out:
                stop_ev = row.get("critic/vf_explained_var_heldout", math.nan)
            else:
                stop_ev = ev if all(v is not None for v in latest_values) else math.nan
            if math.isfinite(stop_ev) and stop_ev >= pretrain.ev_threshold:
                break
    finally:
        bar.close()
        for name, param in critic.named_parameters():
            param.requires_grad_(was_trainable[name])
    return curve


def split_holdout(
    trajectories: Sequence[Trajectory], holdout: int, seed: int
) -> tuple[list[Trajectory], list[Trajectory]]:
    """`(held_out, rest)`: `holdout` trajectories drawn by a seeded permutation, and the others in
    their given order. Drawn, not the first ones: an agent loop returns its episodes in the order
    they finished, so the first are the shortest (quick answers, early submits)."""
    if not 0 <= holdout < len(trajectories):
        raise ValueError(
            f"split_holdout: holdout must be in [0, {len(trajectories)}), got {holdout}"
        )
    chosen = set(
        torch.randperm(len(trajectories), generator=torch.Generator().manual_seed(seed))[
            :holdout
        ].tolist()
    )
    held_out = [t for i, t in enumerate(trajectories) if i in chosen]
    rest = [t for i, t in enumerate(trajectories) if i not in chosen]
    return held_out, rest


def held_out_explained_variance(
    critic: ValueModel,
    trajectories: Sequence[Trajectory],
    config: SAOConfig,
    pad_token_id: int,
    packing_cost: PackingCost,
) -> float:
    """The critic's explained variance of Monte-Carlo returns on `trajectories`, no gradient."""
    batch = collate(list(trajectories), pad_token_id)
    device = next(critic.parameters()).device
    with torch.no_grad():
        values = packed_forward(
            lambda ids, pos: critic(ids, None, pos),
            batch.input_ids.to(device),
            batch.attention_mask.to(device),
            config.train.micro_batch_tokens,
            packing_cost,
        )
    mask = batch.action_mask.to(device)
    _, returns = token_gae(
        batch.rewards.to(device), torch.zeros_like(values), mask, config.algo.gamma
    )
    return explained_variance(values, returns, mask)


def _explained_variance_seen(
    values: list[torch.Tensor | None], returns: list[torch.Tensor], masks: list[torch.Tensor]
) -> float:
    seen = [(v, r, m) for v, r, m in zip(values, returns, masks, strict=True) if v is not None]
    return explained_variance(
        torch.cat([v for v, _, _ in seen]),
        torch.cat([r for _, r, _ in seen]),
        torch.cat([m for _, _, m in seen]),
    )
