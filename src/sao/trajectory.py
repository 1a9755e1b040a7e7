"""The `Trajectory` record: the one thing that crosses every boundary (engine -> queue -> learner).

A trajectory is one token sequence `[prompt, a_0, o_0, a_1, o_1, ..., a_n]`. Every token carries
four aligned fields (SAO_SPEC section 1):

| field             | action token (sampled)          | prompt / observation token (inserted) |
|-------------------|---------------------------------|---------------------------------------|
| `token_ids`       | sampled id                      | inserted id                           |
| `action_mask`     | 1                               | 0                                     |
| `rollout_logprobs`| log-prob the engine sampled with| 0                                     |
| `policy_versions` | weight version that sampled it  | -1                                    |

Construction validates all of this and raises `ValueError` naming the offending field, so an
invalid record can never reach the learner.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class Trajectory:
    """One completed rollout, validated on construction.

    Attributes:
        token_ids: the whole sequence, prompt included.
        action_mask: 1 for tokens the policy sampled, 0 for prompt and observation tokens.
        rollout_logprobs: per-token log-prob of the sampling distribution (0 off actions).
        policy_versions: weight version that sampled each action token (-1 off actions).
        reward: the scalar outcome reward of the trajectory.
        turn_spans: `(start, end)` half-open spans of each action turn, in order.
        turn_rewards: optional per-turn rewards, one per span, attached to the span's last token.
        metadata: free-form JSON-able facts (task id, environment, timings, end reason ...).
    """

    token_ids: tuple[int, ...]
    action_mask: tuple[int, ...]
    rollout_logprobs: tuple[float, ...]
    policy_versions: tuple[int, ...]
    reward: float
    turn_spans: tuple[tuple[int, int], ...] = ()
    turn_rewards: tuple[float, ...] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Normalise containers so that lists (e.g. from JSON) and tuples behave the same.
        set_ = object.__setattr__
        set_(self, "token_ids", tuple(int(t) for t in self.token_ids))
        set_(self, "action_mask", tuple(int(m) for m in self.action_mask))
        set_(self, "rollout_logprobs", tuple(float(x) for x in self.rollout_logprobs))
        set_(self, "policy_versions", tuple(int(v) for v in self.policy_versions))
        set_(self, "turn_spans", tuple((int(s), int(e)) for s, e in self.turn_spans))
        if self.turn_rewards is not None:
            set_(self, "turn_rewards", tuple(float(r) for r in self.turn_rewards))
        set_(self, "reward", float(self.reward))
        self._validate()

    def _validate(self) -> None:
        n = len(self.token_ids)
        for name in ("action_mask", "rollout_logprobs", "policy_versions"):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"Trajectory.{name}: length {len(getattr(self, name))} != len(token_ids) {n}"
                )
        bad = [m for m in self.action_mask if m not in (0, 1)]
        if bad:
            raise ValueError(f"Trajectory.action_mask: values must be 0 or 1, got {bad[0]}")
        if not any(self.action_mask):
            raise ValueError("Trajectory.action_mask: no action token (the policy sampled nothing)")
        if any(t < 0 for t in self.token_ids):
            raise ValueError("Trajectory.token_ids: negative token id")
        for i, (m, lp, v) in enumerate(
            zip(self.action_mask, self.rollout_logprobs, self.policy_versions, strict=True)
        ):
            if not m:
                continue
            if not math.isfinite(lp) or lp > 0.0:
                raise ValueError(
                    f"Trajectory.rollout_logprobs[{i}]: action log-prob must be finite and <= 0, got {lp}"
                )
            if v < 0:
                raise ValueError(
                    f"Trajectory.policy_versions[{i}]: action token needs a version >= 0, got {v}"
                )
        if not math.isfinite(self.reward):
            raise ValueError(f"Trajectory.reward: must be finite, got {self.reward}")
        prev_end = 0
        for s, e in self.turn_spans:
            if not (prev_end <= s < e <= n):
                raise ValueError(
                    f"Trajectory.turn_spans: span ({s}, {e}) is empty, out of order or outside [0, {n}]"
                )
            prev_end = e
        if self.turn_rewards is not None:
            if len(self.turn_rewards) != len(self.turn_spans):
                raise ValueError(
                    f"Trajectory.turn_rewards: {len(self.turn_rewards)} rewards for "
                    f"{len(self.turn_spans)} turn_spans"
                )
            if not all(math.isfinite(r) for r in self.turn_rewards):
                raise ValueError("Trajectory.turn_rewards: must be finite")

    # ------------------------------------------------------------------ derived facts
    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_action_tokens(self) -> int:
        return sum(self.action_mask)

    @property
    def min_version(self) -> int:
        """Oldest weight version that sampled any action token."""
        return min(v for v, m in zip(self.policy_versions, self.action_mask, strict=True) if m)

    def staleness(self, current_version: int) -> int:
        """`learner_version - min(policy_version over action tokens)` (SAO_SPEC section 1)."""
        return current_version - self.min_version

    def reward_positions(self) -> list[tuple[int, float]]:
        """`(position, reward)` pairs: turn rewards on their span's last token, the outcome on the
        last action token."""
        out: list[tuple[int, float]] = []
        if self.turn_rewards is not None:
            out += [
                (e - 1, r) for (_, e), r in zip(self.turn_spans, self.turn_rewards, strict=True)
            ]
        last_action = max(i for i, m in enumerate(self.action_mask) if m)
        out.append((last_action, self.reward))
        return out

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["turn_spans"] = [list(s) for s in self.turn_spans]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"Trajectory: unknown field(s) {sorted(unknown)}")
        return cls(**d)

    @classmethod
    def from_json(cls, s: str) -> Trajectory:
        return cls.from_dict(json.loads(s))


@dataclass
class Batch:
    """Right-padded `[B, T]` tensors, token-aligned: column `t` describes token `t`.

    `rewards[b, t]` holds every reward attached to token `t` (outcome on the last action token,
    turn rewards on their turn's last token); `scores[b]` is the outcome reward alone.
    """

    input_ids: torch.Tensor  # [B, T] long
    attention_mask: torch.Tensor  # [B, T] long, 1 on real tokens
    action_mask: torch.Tensor  # [B, T] float 0/1
    rollout_logprobs: torch.Tensor  # [B, T] float
    policy_versions: torch.Tensor  # [B, T] long, -1 off actions and on padding
    rewards: torch.Tensor  # [B, T] float
    scores: torch.Tensor  # [B] float

    @property
    def padding_frac(self) -> float:
        return 1.0 - float(self.attention_mask.float().mean())

    @property
    def episode_returns(self) -> torch.Tensor:
        """`[B]` every reward of each row summed, the outcome and its turn rewards: what a
        sequence-level advantage (group, running mean) compares, so an environment's action
        rewards reach those presets as they reach GAE."""
        return self.rewards.sum(dim=1)


def split_stale(
    trajectories: Sequence[Trajectory], version: int, bound: int | None
) -> tuple[list[int], list[int]]:
    """`(kept, dropped)` positions in `trajectories`: those more than `bound` versions older
    than `version` (`rollout.max_staleness`; None keeps all) are dropped, in training and in a
    live service alike."""
    kept: list[int] = []
    dropped: list[int] = []
    for i, trajectory in enumerate(trajectories):
        too_old = bound is not None and trajectory.staleness(version) > bound
        (dropped if too_old else kept).append(i)
    return kept, dropped


def collate(trajectories: Sequence[Trajectory], pad_token_id: int = 0) -> Batch:
    """Stack trajectories into right-padded batch tensors the core functions take."""
    if not trajectories:
        raise ValueError("collate: no trajectories")
    bsz, t_max = len(trajectories), max(len(t) for t in trajectories)
    input_ids = torch.full((bsz, t_max), pad_token_id, dtype=torch.long)
    attention = torch.zeros((bsz, t_max), dtype=torch.long)
    mask = torch.zeros((bsz, t_max))
    logp = torch.zeros((bsz, t_max))
    versions = torch.full((bsz, t_max), -1, dtype=torch.long)
    rewards = torch.zeros((bsz, t_max))
    for b, traj in enumerate(trajectories):
        n = len(traj)
        input_ids[b, :n] = torch.tensor(traj.token_ids)
        attention[b, :n] = 1
        mask[b, :n] = torch.tensor(traj.action_mask, dtype=torch.float)
        logp[b, :n] = torch.tensor(traj.rollout_logprobs)
        versions[b, :n] = torch.tensor(traj.policy_versions)
        for pos, r in traj.reward_positions():
            rewards[b, pos] += r
    scores = torch.tensor([t.reward for t in trajectories])
    return Batch(input_ids, attention, mask, logp, versions, rewards, scores)
