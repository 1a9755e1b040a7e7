"""The learner loop, one for `sao train` and `sao serve`: what happens to every batch.

    batch = source.take(batch_size)       # training: the rollout backend; serving: the feedback
                                          # store (None: no batch ready)
    kept, dropped = split_stale(batch)    # only with rollout.max_staleness
    critic warm-up  or  learner.step(kept) -> publish()
    sink.record(step)                     # training: log, eval, checkpoint; serving: the
                                          # checkpoint and its store transaction

The two feeders differ only in the source and the sink. Each item of a batch is `(key,
trajectory)`, the key being what the sink records as trained or dropped (a trajectory's index
in training, a feedback id in serving). Warm-up batches (serving's value pretraining: live
traffic has no frozen initial policy to sample from beforehand) train the critic alone and
publish nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sao.runtime.protocols import LearnerHandle
from sao.trajectory import Trajectory, split_stale

Item = tuple[Hashable, Trajectory]


@dataclass
class LoopStep:
    """What one pass of the loop did.

    Attributes:
        kept: the items trained on, in batch order.
        dropped: the items dropped as too stale.
        metrics: the learner's (or the warm-up's) metrics, with `time/learner_step` (the
            seconds of that update alone, publishing excluded; 0 when all were dropped).
        phase: `actor_critic` (a learner step, weights published), `critic_warmup` or
            `all_dropped`.
    """

    kept: list[Item]
    dropped: list[Item]
    metrics: dict[str, float] = field(default_factory=dict)
    phase: str = "actor_critic"

    def trajectories(self) -> list[Trajectory]:
        """The trajectories trained on."""
        return [t for _, t in self.kept]


class StepSource(Protocol):
    """Where batches come from."""

    def take(self, size: int) -> Sequence[Item] | None:
        """The next batch of `size` items (possibly fewer: some may be set aside), or None when
        none is ready."""
        ...


class StepSink(Protocol):
    """Where a step's outcome goes."""

    def record(self, step: LoopStep) -> None:
        """Record the step (metrics, trained and dropped keys, a checkpoint)."""
        ...


class LearnerLoop:
    """One batch at a time from `source` into `learner`, the outcome into `sink`.

    Args:
        learner: the learner (a `Learner`, its ranks, or a remote one).
        source: the batch source.
        sink: the step sink.
        publish: hands the learner's new weights to the engine(s).
        batch_size: items per batch.
        max_staleness: drop trajectories older than this many versions (None keeps all).
        warmup: a critic-only update on a batch's trajectories (see the module docstring); None
            without a critic.
        warmup_batches: batches the warm-up takes before the first learner step.
        warmup_done: warm-up batches already taken (from a checkpoint).
    """

    def __init__(
        self,
        learner: LearnerHandle,
        source: StepSource,
        sink: StepSink,
        publish: Callable[[], None],
        batch_size: int,
        max_staleness: int | None,
        warmup: Callable[[list[Trajectory]], dict[str, float]] | None = None,
        warmup_batches: int = 0,
        warmup_done: int = 0,
    ) -> None:
        self.learner = learner
        self.source = source
        self.sink = sink
        self.publish = publish
        self.batch_size = batch_size
        self.max_staleness = max_staleness
        self.warmup = warmup
        self.warmup_batches = warmup_batches if warmup is not None else 0
        self.warmup_done = warmup_done

    def step(self) -> LoopStep | None:
        """Take one batch and train on it; None when the source had none ready."""
        batch = self.source.take(self.batch_size)
        if batch is None:
            return None
        keep, drop = split_stale([t for _, t in batch], self.learner.version, self.max_staleness)
        step = LoopStep([batch[i] for i in keep], [batch[i] for i in drop])
        started = time.perf_counter()
        if not step.kept:
            step.phase = "all_dropped"
        elif self.warmup is not None and self.warmup_done < self.warmup_batches:
            step.metrics = self.warmup(step.trajectories())
            step.phase = "critic_warmup"
            self.warmup_done += 1
        else:
            step.metrics = self.learner.step(step.trajectories())
        step.metrics["time/learner_step"] = time.perf_counter() - started
        if step.phase == "actor_critic":
            self.publish()
        self.sink.record(step)
        return step
