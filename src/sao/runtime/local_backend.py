"""The local backend: rollout side and learner in one process, making progress at the same time.

How the rollout side is driven is a scheduling policy chosen by `train.mode`:

- `async` (`ThreadedRollout`): the scheduler runs in a background thread (torch releases the GIL
  inside its kernels, so decoding and training overlap on the machine's cores); the learner, in
  the caller's thread, takes batches from the queue in completion order.
- `sync` (`InlineRollout`): no thread. Asking for a batch drives the scheduler until one batch is
  complete, then the learner trains while nothing generates: the baseline SAO improves on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import SAOConfig
from sao.runtime.builders import build_scheduler
from sao.runtime.protocols import LearnerHandle
from sao.runtime.run_dir import TrajectoryLog
from sao.runtime.scheduler import Scheduler
from sao.runtime.transport import LocalTrajectoryQueue, LocalWeightChannel
from sao.trajectory import Trajectory


class RolloutPolicy(Protocol):
    """When the scheduler runs relative to the learner."""

    def start(self) -> None: ...

    def fill(self, queue: LocalTrajectoryQueue, n: int) -> None:
        """Called before taking `n` trajectories from `queue`."""
        ...

    def after_publish(self) -> None: ...

    def raise_if_failed(self) -> None: ...

    def stop(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class ThreadedRollout:
    """Async: the scheduler ticks in a background thread until stopped."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._paused = threading.Event()
        self._idle = threading.Event()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sao-rollout", daemon=True)
        self._thread.start()

    def fill(self, queue: LocalTrajectoryQueue, n: int) -> None:
        self.raise_if_failed()

    def after_publish(self) -> None:
        """Nothing: the thread polls the weight channel between decode steps."""

    def raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"rollout thread failed: {self._error!r}") from self._error

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def pause(self) -> None:
        """Stop ticking, and return once the thread is between ticks (no decode step running)."""
        self._paused.set()
        if self._thread is not None and self._thread.is_alive():
            self._idle.wait(timeout=30)

    def resume(self) -> None:
        self._idle.clear()
        self._paused.clear()

    def _run(self) -> None:
        try:
            self.scheduler.run_until(self._stop, self._paused, self._idle)
        except BaseException as err:  # surfaced to the learner thread by raise_if_failed
            self._error = err


class InlineRollout:
    """Sync: the scheduler runs only inside `fill`, so generating and training alternate."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def start(self) -> None:
        """Nothing: generation happens when a batch is asked for."""

    def fill(self, queue: LocalTrajectoryQueue, n: int) -> None:
        while queue.qsize() < n:
            failed_resets = self.scheduler.stats.dropped
            if self.scheduler.tick() == 0 and self.scheduler.num_in_flight == 0:
                if self.scheduler.stats.dropped > failed_resets:
                    # Episodes whose reset raised: the caller counts them before asking again.
                    return
                raise RuntimeError("sync rollout made no progress: nothing in flight")

    def after_publish(self) -> None:
        """Swap the new weights in now, before the next batch starts."""
        self.scheduler.poll_weights()

    def raise_if_failed(self) -> None:
        """Nothing: errors surface in `fill` directly."""

    def stop(self) -> None:
        """Nothing to stop."""

    def pause(self) -> None:
        """Nothing: the rollout side runs only inside `fill`."""

    def resume(self) -> None:
        """Nothing to resume."""


class LocalBackend:
    """Owns the queue, the weight channel and the rollout side; the learner stays with the caller.

    Args:
        config: the run's config (`train.mode` chooses the rollout policy).
        scheduler: the rollout side; its `out` must be an `ObservedQueue`.
        weights: the channel the scheduler polls.
        log: the durable trajectory log, closed with the backend.
    """

    def __init__(
        self,
        config: SAOConfig,
        scheduler: Scheduler,
        weights: LocalWeightChannel,
        log: TrajectoryLog | None = None,
    ) -> None:
        self.config = config
        self.scheduler = scheduler
        self.queue: ObservedQueue = scheduler.out
        self.weights = weights
        self._log = log
        self.rollout: RolloutPolicy = (
            InlineRollout(scheduler) if config.train.mode == "sync" else ThreadedRollout(scheduler)
        )
        self._started_at = time.perf_counter()
        self._paused_at: float | None = None

    @classmethod
    def build(
        cls,
        config: SAOConfig,
        policy: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        version: int = 0,
        start_index: int = 0,
        abandoned: int = 0,
        log_dir: Path | None = None,
    ) -> LocalBackend:
        """The backend `sao train` uses: a real engine over a copy of `policy`.

        Args:
            version: the policy's current weight version.
            start_index: first trajectory index (to resume a task stream).
            abandoned: indices below `start_index` that will never complete.
            log_dir: if given, every completed trajectory is appended to
                `log_dir/trajectories.jsonl` the moment it reaches the queue.
        """
        log = TrajectoryLog(log_dir) if log_dir is not None else None
        queue = ObservedQueue(log.append if log is not None else None)
        weights = LocalWeightChannel(version)
        scheduler = build_scheduler(
            config,
            policy,
            tokenizer,
            queue,
            weights,
            version=version,
            start_index=start_index,
            abandoned=abandoned,
        )
        return cls(config, scheduler, weights, log)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start generating (see the rollout policies above)."""
        self._started_at = time.perf_counter()
        self.rollout.start()

    def close(self) -> None:
        """Stop the rollout side (in-flight trajectories are abandoned, never half-queued)."""
        self.rollout.stop()
        self.scheduler.close()
        if self._log is not None:
            self._log.close()

    def attach_learner(self, learner: LearnerHandle) -> LearnerHandle:
        """The learner stays in this process; returned as is."""
        return learner

    def requeue(self, trajectories: list[Trajectory]) -> None:
        """Put completed-but-untrained trajectories (from a resumed run) first in line."""
        self.queue.put_silently(trajectories)

    # ------------------------------------------------------------------ learner side
    def next_batch(self, n: int, timeout: float | None = None) -> list[Trajectory]:
        """The first `n` completed trajectories (fewer only if `timeout` passes)."""
        self.rollout.fill(self.queue, n)
        batch: list[Trajectory] = []
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(batch) < n:
            self.rollout.raise_if_failed()
            wait = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if wait <= 0:
                break
            batch += self.queue.get_batch(n - len(batch), timeout=wait)
        return batch

    def publish_weights(self, learner: LearnerHandle) -> None:
        """Hand the learner's weights to the rollout side (applied between its decode steps)."""
        self.weights.publish(learner.policy_state_dict(), learner.version)
        self.rollout.after_publish()

    def pause_rollout(self) -> None:
        """Stop generating (e.g. during a held-out eval) until `resume_rollout`; in-flight
        trajectories keep their state, and the paused time does not count as the engine's, nor
        does it run down the latency overlay's waits."""
        self.rollout.pause()
        self.scheduler.loop.pause_waits()
        self._paused_at = time.perf_counter()

    def resume_rollout(self) -> None:
        if self._paused_at is not None:
            self.scheduler.stats.paused_s += time.perf_counter() - self._paused_at
            self._paused_at = None
        self.scheduler.loop.resume_waits()
        self.rollout.resume()

    def rollout_stats(self) -> dict[str, Any]:
        """Counters and the engine's idle fraction since `start`."""
        return {**self.scheduler.snapshot(self._started_at), "queued": self.queue.qsize()}


class ObservedQueue(LocalTrajectoryQueue):
    """A local queue that reports each arrival (for the durable trajectory log)."""

    def __init__(self, on_complete: Callable[[list[Trajectory]], None] | None) -> None:
        super().__init__()
        self._on_complete = on_complete

    def put(self, items: list[Trajectory]) -> None:
        if self._on_complete is not None:
            self._on_complete(items)
        super().put(items)

    def put_silently(self, items: list[Trajectory]) -> None:
        """Enqueue without reporting (the items were already logged)."""
        super().put(items)
