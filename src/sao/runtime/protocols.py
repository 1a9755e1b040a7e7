"""The runtime's interfaces, and nothing else: what the learner loop sees of a learner and of a
backend. Implementations (`sao.runtime.local_backend`, `sao.runtime.ray_backend`) import this
module; the factory that picks one (`sao.runtime.backends.make_backend`) imports them, so the
imports run one way.

A backend owns the rollout side (engines, agent loops, scheduler), the trajectory queue and the
weight channel. Weight transfer is explicit: `publish_weights(learner)` moves the learner's
newest weights to the engines by the backend's own route (in-process reference locally; learner
actor -> weight store actor under Ray, never through the driver).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from transformers import PreTrainedModel

from sao.trajectory import Trajectory


class LearnerHandle(Protocol):
    """What the run loop uses of a learner (`sao.learner.step.Learner` or a remote proxy)."""

    @property
    def version(self) -> int: ...

    @property
    def policy(self) -> PreTrainedModel: ...

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]: ...

    def policy_state_dict(self) -> dict[str, torch.Tensor]: ...

    def state_dict(self, snapshot: bool = True) -> dict[str, Any]: ...


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

    def pause_rollout(self) -> None:
        """Stop generating (during a held-out eval) until `resume_rollout`; in-flight
        trajectories keep their state."""
        ...

    def resume_rollout(self) -> None:
        """Generate again after `pause_rollout`."""
        ...

    def rollout_stats(self) -> dict[str, Any]:
        """Counters: the engine's time shares (`ENGINE_SHARES`), `queued`, `in_flight`, ..."""
        ...

    def close(self) -> None:
        """Stop generating; in-flight trajectories are abandoned, never half-logged."""
        ...
