"""Environment errors are not the policy's failures: set aside, counted, and too many stop the run.

An episode whose environment raised ends with `end_reason = "env_error"` and the message in
`metadata["error"]` (`sao.rollout.agent_loop`). Trained as a failure, a bug in a tool would teach
the policy to avoid whatever triggered it, so such a trajectory is kept in `trajectories.jsonl`
like any other and never trained:

- **The batch is filled with good trajectories.** The learner takes the first `B` completed
  trajectories that are not set aside (`take_batch`), and the scheduler samples a replacement for
  each one set aside (`sao.runtime.scheduler`: it widens its admission bound by one slot per
  errored trajectory, and per episode whose `reset` raised). So every step still trains `B`
  trajectories, and a synchronous run still samples each batch under the weights that train on it
  (staleness 0); a run whose environment never raises takes exactly the batches it took before.
  Training on fewer instead would change the batch size, and a batch that errored whole would
  leave nothing to train and the rollout side waiting on the learner.
- **With groups (`rollout.group_size` G > 1), a group with an errored member is set aside whole**
  and a whole group replaces it: its other members are logged with `metadata["group_env_error"]`
  and not trained. GRPO's group advantage then always compares G rollouts of one prompt, and the
  learner's batches stay whole groups. The cost is G - 1 good trajectories per errored group
  (at 1% of episodes erroring, about 8% of groups of 8).
- **Counted.** `rollout/env_errors` in each step's metrics is the episodes whose environment
  raised since the previous step (reset failures, which leave no trajectory, included);
  `summary.json` adds them up (`env_errors`) and counts the trajectories set aside
  (`trajectories_set_aside`).
- **Too many stop the run.** Over the latest `train.env_error_window` episodes the learner has
  taken (default 100; judged only once that many have been seen, so one early error in a small
  batch cannot stop a run), a share of errors above `train.max_env_error_rate` (default 0.1)
  stops the run with one line (`RunStopped`). A window of nothing but errors stops it whatever
  the rate, since nothing could ever train. A resumed run starts the window from the episodes its
  checkpoint settled.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol

from sao.plumbing.stopped import RunStopped
from sao.rollout.agent_loop import END_ENV_ERROR
from sao.trajectory import Trajectory

GROUP_ENV_ERROR = "group_env_error"
"""Metadata flag of a trajectory set aside because another member of its group errored."""

POLL_S = 1.0
"""How long `take_batch` waits for trajectories before looking at the counters again (reset
failures arrive as counts, not trajectories)."""


def is_env_error(trajectory: Trajectory) -> bool:
    """Whether the trajectory's own environment raised."""
    return trajectory.metadata.get("end_reason") == END_ENV_ERROR


def is_set_aside(trajectory: Trajectory) -> bool:
    """Whether the learner must not train on the trajectory: its environment raised, or another
    member of its group's did."""
    return is_env_error(trajectory) or bool(trajectory.metadata.get(GROUP_ENV_ERROR))


def with_group_error(trajectory: Trajectory) -> Trajectory:
    """The trajectory marked as a member of a group set aside for another member's error."""
    if is_env_error(trajectory):
        return trajectory
    return dataclasses.replace(trajectory, metadata={**trajectory.metadata, GROUP_ENV_ERROR: True})


class EnvErrorWatch:
    """Counts environment errors among the episodes the learner takes, and says when to stop.

    Args:
        window: episodes the error share is judged over (`train.env_error_window`).
        max_rate: the share above which the run stops (`train.max_env_error_rate`).
        recent: earlier episodes' error flags, oldest first (a resumed run's).
    """

    def __init__(self, window: int, max_rate: float, recent: Iterable[bool] = ()) -> None:
        self.window = window
        self.max_rate = max_rate
        self._recent: deque[bool] = deque(recent, maxlen=window)
        self._since_step = 0
        self._resets_seen = 0

    def observe(self, trajectories: Iterable[Trajectory]) -> None:
        """Record episodes taken from the queue, in order."""
        for trajectory in trajectories:
            errored = is_env_error(trajectory)
            self._recent.append(errored)
            self._since_step += int(errored)

    def observe_reset_failures(self, total: int) -> None:
        """Record episodes whose `reset` raised, from the rollout side's running count."""
        new = max(0, total - self._resets_seen)
        self._resets_seen = max(total, self._resets_seen)
        self._recent.extend([True] * new)
        self._since_step += new

    def step_count(self) -> int:
        """Errors seen since the last call (the step's `rollout/env_errors`)."""
        count, self._since_step = self._since_step, 0
        return count

    def stop_reason(self) -> str | None:
        """Why the run must stop now, or None (see the module docstring)."""
        if len(self._recent) < self.window:
            return None
        errors = sum(self._recent)
        share = errors / self.window
        if share <= self.max_rate and errors < self.window:
            return None
        why = (
            f"more than train.max_env_error_rate={self.max_rate:g}"
            if share > self.max_rate
            else "so nothing is left to train on"
        )
        return (
            f"{errors} of the last {self.window} episodes ended in an environment error "
            f"({share:.0%}), {why}"
        )


class BatchSource(Protocol):
    """What `take_batch` uses of a backend."""

    def next_batch(self, n: int, timeout: float | None = None) -> list[Trajectory]: ...

    def rollout_stats(self) -> dict[str, Any]: ...


def take_batch(
    backend: BatchSource, n: int, watch: EnvErrorWatch, where: str, poll_s: float = POLL_S
) -> tuple[list[Trajectory], list[Trajectory]]:
    """The first `n` completed trajectories that are not set aside, and those set aside on the
    way, in completion order.

    Raises:
        RunStopped: one line, when `watch` says the errors are too many; `where` says where the
            errored trajectories are kept.
    """
    good: list[Trajectory] = []
    aside: list[Trajectory] = []
    while len(good) < n:
        taken = backend.next_batch(n - len(good), timeout=poll_s)
        watch.observe(taken)
        good += [t for t in taken if not is_set_aside(t)]
        aside += [t for t in taken if is_set_aside(t)]
        if len(good) < n:
            watch.observe_reset_failures(int(backend.rollout_stats().get("dropped", 0)))
        reason = watch.stop_reason()
        if reason is not None:
            raise RunStopped(f"{reason}; the errored trajectories are kept, untrained, in {where}")
    return good, aside
