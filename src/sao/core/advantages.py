"""Advantage estimators (SAO_SPEC sections 5 and 6). Pure tensor math, no I/O.

Conventions: tensors are `[B, T]`, right-padded, token-aligned; `action_mask` is 0/1 and marks
the tokens the policy sampled. Positions that are not action tokens get advantage 0 and return 0.
Every estimator over tokens returns `(advantages, returns)`.
"""

from __future__ import annotations

from collections import deque

import torch


def move_rewards_to_actions(rewards: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """Give each reward sitting on a non-action position to the nearest preceding action token.

    A reward placed before a row's first action token (on the prompt) goes to that first action
    token, the nearest one there is. Rows without any action token keep no reward.
    """
    mask = action_mask > 0
    positions = torch.arange(rewards.shape[1], device=rewards.device).expand_as(rewards)
    last_action = torch.cummax(torch.where(mask, positions, -1), dim=1).values
    first_action = torch.where(mask, positions, rewards.shape[1]).min(dim=1, keepdim=True).values
    target = torch.where(last_action >= 0, last_action, first_action)
    has_action = mask.any(dim=1, keepdim=True)
    target = torch.where(has_action, target, 0)
    moved = torch.zeros_like(rewards).scatter_add_(1, target, rewards)
    return moved * mask


def token_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    action_mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float | torch.Tensor = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Skip-observation token-level GAE.

    The successor of an action token is the next *action* token, across any observation between
    them; the last action token is terminal:

        delta_j = r_{t_j} + gamma * V(t_{j+1}) - V(t_j)      (V(t_{M+1}) = 0)
        A_j     = delta_j + gamma * lam * A_{j+1}            (A_{M+1} = 0)
        R_j     = A_j + V(t_j)

    Values on observation tokens are never read, so they cannot change any advantage.

    Args:
        rewards: `[B, T]`, rewards attached to tokens (on observations they move back first).
        values: `[B, T]`, critic values per token.
        action_mask: `[B, T]` 0/1.
        lam: a float, or `[B]` per-trajectory lambdas (see `adaptive_lambda`).
    Returns:
        `(advantages, returns)`, both `[B, T]`, zero off action tokens.
    """
    mask = action_mask > 0
    rewards = move_rewards_to_actions(rewards, action_mask)
    values = values.detach()
    advantages = torch.zeros_like(values)
    next_value = torch.zeros_like(values[:, 0])
    next_advantage = torch.zeros_like(values[:, 0])
    for t in reversed(range(values.shape[1])):
        is_action = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantage = delta + gamma * lam * next_advantage
        advantages[:, t] = torch.where(is_action, advantage, 0.0)
        # Off action tokens the carried successor passes through unchanged: that is the skip.
        next_value = torch.where(is_action, values[:, t], next_value)
        next_advantage = torch.where(is_action, advantage, next_advantage)
    returns = torch.where(mask, advantages + values, 0.0)
    return advantages, returns


def action_steps(action_mask_row: torch.Tensor) -> list[tuple[int, int]]:
    """Half-open `(start, end)` spans of the maximal runs of consecutive action tokens in a row."""
    steps: list[tuple[int, int]] = []
    start = None
    for t, m in enumerate(action_mask_row.tolist()):
        if m and start is None:
            start = t
        elif not m and start is not None:
            steps.append((start, t))
            start = None
    if start is not None:
        steps.append((start, len(action_mask_row)))
    return steps


def step_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    action_mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
    step_value: str = "mean",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-level GAE (SAO_SPEC section 5, ablation): each action segment is one step.

    A step's value is the mean of its tokens' values (`"mean"`) or the value at its last token
    (`"last"`); its reward is the sum of the rewards on its tokens (after moving observation
    rewards back). GAE runs over steps; a step's advantage and return go to all of its tokens.
    """
    if step_value not in ("mean", "last"):
        raise ValueError(f"step_gae: step_value must be 'mean' or 'last', got {step_value!r}")
    rewards = move_rewards_to_actions(rewards, action_mask)
    values = values.detach()
    advantages = torch.zeros_like(values)
    returns = torch.zeros_like(values)
    for b in range(values.shape[0]):
        steps = action_steps(action_mask[b] > 0)
        next_value, next_advantage = 0.0, 0.0
        for start, end in reversed(steps):
            v = values[b, start:end].mean() if step_value == "mean" else values[b, end - 1]
            r = rewards[b, start:end].sum()
            advantage = r + gamma * next_value - v + gamma * lam * next_advantage
            advantages[b, start:end] = advantage
            returns[b, start:end] = advantage + v
            next_value, next_advantage = v, advantage
    return advantages, returns


def group_advantages(
    scores: torch.Tensor,
    group_ids: torch.Tensor,
    eps: float = 1e-6,
    normalize_std: bool = True,
) -> torch.Tensor:
    """GRPO: `(R - mean_g) / (std_g + eps)` within each group (`std` unbiased, as in GRPO).

    A group of one has no peer to compare with and gets advantage 0.

    Args:
        scores: `[B]` outcome rewards.
        group_ids: `[B]` integer group of each trajectory (one prompt, G rollouts).
    Returns:
        `[B]` advantages; broadcast over each trajectory's action tokens by the caller.
    """
    if scores.shape != group_ids.shape or scores.dim() != 1:
        raise ValueError(
            f"group_advantages: scores {tuple(scores.shape)} and group_ids "
            f"{tuple(group_ids.shape)} must be equal 1-D shapes"
        )
    out = torch.zeros_like(scores, dtype=torch.float)
    for g in torch.unique(group_ids):
        members = group_ids == g
        group = scores[members].float()
        if group.numel() < 2:
            continue
        centred = group - group.mean()
        scale = group.std() + eps
        # A group without spread is centred to exactly 0; dividing would only add NaN.
        out[members] = centred / scale if normalize_std and scale > 0 else centred
    return out


class RunningMeanBaseline:
    """Baseline `R - mean(last W rewards)` for single-rollout training without a critic.

    `advantages(scores)` subtracts the mean of the last `window` scores seen *before* this call
    (0 when none), then records the new scores.
    """

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError(f"RunningMeanBaseline: window must be >= 1, got {window}")
        self.window = window
        self._history: deque[float] = deque(maxlen=window)

    @property
    def mean(self) -> float:
        return sum(self._history) / len(self._history) if self._history else 0.0

    def advantages(self, scores: torch.Tensor) -> torch.Tensor:
        """`[B]` scores -> `[B]` advantages against the history before this batch."""
        baseline = self.mean
        self._history.extend(float(s) for s in scores.flatten())
        return scores.float() - baseline

    def state_dict(self) -> dict:
        return {"window": self.window, "history": list(self._history)}

    def load_state_dict(self, state: dict) -> None:
        self._history = deque(state["history"], maxlen=self.window)


def adaptive_lambda(num_action_tokens: torch.Tensor | int, alpha: float) -> torch.Tensor:
    """Length-adaptive GAE lambda `1 - 1 / (alpha * L)` (VAPO), clamped to `[0, 1]`."""
    if alpha <= 0:
        raise ValueError(f"adaptive_lambda: alpha must be > 0, got {alpha}")
    length = torch.as_tensor(num_action_tokens, dtype=torch.float).clamp(min=1.0)
    return (1.0 - 1.0 / (alpha * length)).clamp(0.0, 1.0)


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Normalise `x` to zero mean, unit variance over masked positions; zero elsewhere."""
    m = mask > 0
    n = m.sum()
    if n == 0:
        return torch.zeros_like(x)
    mean = x[m].mean()
    var = ((x[m] - mean) ** 2).mean()
    return torch.where(m, (x - mean) * torch.rsqrt(var + eps), 0.0)


def broadcast_to_tokens(per_sequence: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """`[B]` per-trajectory advantages -> `[B, T]`, on action tokens only."""
    return per_sequence[:, None].float() * (action_mask > 0)
