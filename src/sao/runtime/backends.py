"""The runtime backend interface, and `make_backend` choosing one by `train.backend`.

A backend owns the rollout side (engines, agent loops, scheduler), the trajectory queue and the
weight channel; the driver's loop sees only this interface. Weight transfer is explicit:
`publish_weights(learner)` moves the learner's newest weights to the engines by the backend's own
route (in-process reference locally; learner actor -> weight store actor under Ray, never through
the driver).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import SAOConfig
from sao.trajectory import Trajectory


class LearnerHandle(Protocol):
    """What the run loop uses of a learner (`sao.learner.step.Learner` or a remote proxy)."""

    @property
    def version(self) -> int: ...

    @property
    def policy(self) -> PreTrainedModel: ...

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]: ...

    def policy_state_dict(self) -> dict[str, torch.Tensor]: ...

    def state_dict(self) -> dict[str, Any]: ...


class Backend(Protocol):
    """The rollout side as the run loop sees it."""

    def attach_learner(self, learner: Any) -> LearnerHandle:
        """Place the learner where this backend trains it; returns the handle to use."""
        ...

    def requeue(self, trajectories: list[Trajectory]) -> None:
        """Put already-logged, untrained trajectories (of a resumed run) first in line."""
        ...

    def start(self) -> None:
        """Start generating."""
        ...

    def next_batch(self, n: int, timeout: float | None = None) -> list[Trajectory]:
        """The first `n` completed trajectories (fewer only if `timeout` passes)."""
        ...

    def publish_weights(self, learner: LearnerHandle) -> None:
        """Make the learner's current weights (at `learner.version`) the engines' next ones."""
        ...

    def rollout_stats(self) -> dict[str, Any]:
        """Counters: the engine's time shares (`ENGINE_SHARES`), `queued`, `in_flight`, ..."""
        ...

    def close(self) -> None:
        """Stop generating; in-flight trajectories are abandoned, never half-logged."""
        ...


def make_backend(
    config: SAOConfig,
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    version: int = 0,
    start_index: int = 0,
    abandoned: int = 0,
    log_dir: Path | None = None,
) -> Backend:
    """A `LocalBackend` or a `RayBackend`, starting its task stream at `start_index`.

    Args:
        abandoned: trajectory indices below `start_index` that will never complete (in flight
            when an earlier invocation was killed); see `sao.runtime.scheduler`.
    """
    kwargs = {
        "version": version,
        "start_index": start_index,
        "abandoned": abandoned,
        "log_dir": log_dir,
    }
    if config.train.backend == "local":
        from sao.runtime.local_backend import LocalBackend

        return LocalBackend.build(config, policy, tokenizer, **kwargs)
    from sao.runtime.ray_backend import RayBackend

    return RayBackend(config, policy, tokenizer, **kwargs)
