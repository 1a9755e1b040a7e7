"""The algorithms by name: advantage estimators and policy losses, each registered with what it
needs (as verl's `register_adv_est` / `register_policy_loss` do).

The config checks `algo.advantage` and `algo.policy_loss` against these tables and derives its
cross-field checks from what each entry declares; the learner looks its two entries up once and
never compares algorithm names. The built-in entries are in `sao.core.algorithms`; adding one is
a decorated function (and, to name the variant, a preset line):

    @register_advantage("my_baseline", level="sequence")
    def my_baseline(inputs: AdvantageInputs, algo) -> Tensor:
        return inputs.episode_returns - inputs.episode_returns.mean()

Register before the config is loaded (import the module that does it first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from torch import Tensor

Level = Literal["token", "step", "sequence"]


@dataclass(frozen=True)
class AdvantageInputs:
    """What an estimator may read.

    Token tensors are `[n, T]`, the learner's rows of the batch (all of it with one rank);
    per-trajectory tensors are `[B]`, the whole batch, so that group statistics see every row.

    Attributes:
        rewards: `[n, T]` token rewards (the outcome on the last action token, turn rewards).
        values: `[n, T]` critic values, detached; None without a critic.
        action_mask: `[n, T]` 0/1.
        episode_returns: `[B]` each trajectory's outcome plus its turn rewards.
        group_ids: `[B]` group index per trajectory when the estimator `needs_groups`, else None.
        state: what the estimator's `make_state` built for this learner (None without one).
    """

    rewards: Tensor
    values: Tensor | None
    action_mask: Tensor
    episode_returns: Tensor
    group_ids: Tensor | None
    state: Any


class Stateful(Protocol):
    """Estimator state kept across steps and checkpointed with the learner."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class AdvantageEstimator:
    """A registered estimator.

    Attributes:
        fn: `fn(inputs, algo)` -> advantages: `[n, T]` for levels token and step, `[B]` (one
            score per trajectory, given to each of its action tokens) for level sequence.
            `algo` is the config's `algo` section.
        level: token (one advantage per action token), step (one per action segment: the
            critic's targets are then step-level too) or sequence (one per trajectory).
        needs_critic: whether it reads `values` (the config then requires `critic.enabled`).
        needs_groups: whether it reads `group_ids` (the config then requires
            `rollout.group_size >= 2`).
        adaptive_lambda: whether it takes `algo.adaptive_lambda_alpha` (a per-trajectory lambda);
            the config refuses that field for the others.
        make_state: `make_state(algo)` -> state kept across steps (checkpointed), or None.
    """

    name: str
    fn: Callable[[AdvantageInputs, Any], Tensor]
    level: Level
    needs_critic: bool = False
    needs_groups: bool = False
    adaptive_lambda: bool = False
    make_state: Callable[[Any], Stateful] | None = None


# `fn(logprobs, behaviour_logprobs, advantages, action_mask, eps_low=, eps_high=, agg=)`
# -> `(loss, metrics)`, all tensors `[n, T]` (`sao.core.losses`).
LossFn = Callable[..., tuple[Tensor, dict[str, float]]]


@dataclass(frozen=True)
class PolicyLoss:
    """A registered policy loss.

    Attributes:
        fn: the loss, against the behaviour log-probs named by `against`.
        against: rollout (the engine's log-probs: nothing recomputes an old policy) or old
            (log-probs the learner computes once, before the batch's first update).
        updates_metric: the metric counting its optimizer steps per batch.
    """

    name: str
    fn: LossFn
    against: Literal["rollout", "old"]
    updates_metric: str


ADVANTAGES: dict[str, AdvantageEstimator] = {}
POLICY_LOSSES: dict[str, PolicyLoss] = {}


def register_advantage(
    name: str,
    *,
    level: Level,
    needs_critic: bool = False,
    needs_groups: bool = False,
    adaptive_lambda: bool = False,
    make_state: Callable[[Any], Stateful] | None = None,
) -> Callable[[Callable[[AdvantageInputs, Any], Tensor]], Callable[[AdvantageInputs, Any], Tensor]]:
    """Decorator: register `fn` as the advantage estimator `name` (see `AdvantageEstimator`).

    Raises:
        ValueError: if another function already holds `name`.
    """

    def add(
        fn: Callable[[AdvantageInputs, Any], Tensor],
    ) -> Callable[[AdvantageInputs, Any], Tensor]:
        entry = AdvantageEstimator(
            name, fn, level, needs_critic, needs_groups, adaptive_lambda, make_state
        )
        _add(ADVANTAGES, name, entry, "advantage estimator")
        return fn

    return add


def register_policy_loss(
    name: str, *, against: Literal["rollout", "old"], updates_metric: str | None = None
) -> Callable[[LossFn], LossFn]:
    """Decorator: register `fn` as the policy loss `name` (see `PolicyLoss`).

    Raises:
        ValueError: if another function already holds `name`.
    """

    def add(fn: LossFn) -> LossFn:
        metric = updates_metric or f"actor/{name}_updates"
        _add(POLICY_LOSSES, name, PolicyLoss(name, fn, against, metric), "policy loss")
        return fn

    return add


def _add(table: dict[str, Any], name: str, entry: Any, what: str) -> None:
    held = table.get(name)
    # Importing a module twice (as a script and as a module) re-registers the same function.
    if held is not None and held.fn.__qualname__ != entry.fn.__qualname__:
        raise ValueError(f"{what} {name!r} is already registered ({held.fn.__qualname__})")
    table[name] = entry


def advantage_estimator(name: str) -> AdvantageEstimator:
    """The estimator registered as `name`; ValueError (one line, naming those there are)."""
    if name not in ADVANTAGES:
        raise ValueError(
            f"unknown advantage estimator {name!r}; registered: {', '.join(ADVANTAGES)}"
        )
    return ADVANTAGES[name]


def policy_loss(name: str) -> PolicyLoss:
    """The policy loss registered as `name`; ValueError (one line, naming those there are)."""
    if name not in POLICY_LOSSES:
        raise ValueError(f"unknown policy loss {name!r}; registered: {', '.join(POLICY_LOSSES)}")
    return POLICY_LOSSES[name]
