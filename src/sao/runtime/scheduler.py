"""The rollout side's scheduler: keeps C trajectories in flight and hands each one over on completion.

One `tick()` = pick up newer weights if published -> admit new prompts into free slots -> one
engine decode step -> route completed trajectories to the queue. With `group_size = 1` (SAO) a
trajectory enters the queue the moment it completes. With `group_size = G` (GRPO) a prompt is
submitted G times and its group is released only when all G are done: the barrier SAO removes.

Admission is bounded so the rollout side cannot run arbitrarily far ahead of the learner: the
k-th trajectory (0-based) may start only while `k < (engine_version + 1 + ahead) * batch_size`.
With `ahead = 0` the engine samples exactly one batch per weight version and then waits, which is
synchronous training; asynchronous training with `max_staleness = 0` is therefore exactly sync.
A resumed run shifts the bound by the indices it `abandoned` (in flight at the kill, never to
arrive, or logged but set aside), so those count neither as admitted nor as owed to the learner.

An episode whose environment raised is never trained (`sao.runtime.env_errors`), so the bound
widens by a replacement for it: one slot per errored trajectory or failed `reset` without groups;
with groups, a group with an errored member is marked set aside whole and a whole group replaces
it. Without errors the bound is the one above.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sao.envs.base import Task
from sao.rollout.agent_loop import AgentLoop
from sao.runtime.env_errors import is_env_error, with_group_error
from sao.runtime.transport import TrajectoryQueue, WeightChannel
from sao.trajectory import Trajectory

_IDLE_SLEEP_S = 0.002

ENGINE_SHARES = ("engine_decode_frac", "engine_env_frac", "engine_swap_frac", "engine_idle_frac")
"""How `Scheduler.snapshot` splits the engine's time (logged as `perf/...`; they add up to 1)."""


@dataclass
class SchedulerStats:
    """Counters the runtime reports (`perf/...`, `rollout/...`)."""

    admitted: int = 0
    completed: int = 0
    dropped: int = 0
    """Episodes whose environment's `reset` raised (no trajectory)."""
    replaced: int = 0
    """Admission slots added to replace trajectories set aside for an environment error."""
    busy_s: float = 0.0
    """Seconds inside the agent loop's step: decoding, or stepping and waiting on environments."""
    swap_s: float = 0.0
    """Seconds loading newer weights into the engine."""
    paused_s: float = 0.0
    """Seconds the rollout side was paused on purpose (an eval on the training clock's time)."""
    weight_swaps: int = 0
    end_reasons: dict[str, int] = field(default_factory=dict)


class Scheduler:
    """Drives an `AgentLoop` from a task stream into a `TrajectoryQueue`.

    Args:
        agent_loop: the episodes' driver (owns the engine).
        tasks: endless stream of training tasks; task k is the k-th prompt admitted.
        out: where completed trajectories (or whole groups) go.
        weights: polled between decode steps for newer weights.
        concurrency: C, trajectories in flight at most.
        batch_size: B, trajectories per learner step (for the admission bound).
        group_size: G, rollouts per prompt (1: no group, no barrier).
        ahead: how many batches beyond the current version may be admitted.
        start_index: index of the first trajectory (to resume a run's task stream).
        abandoned: indices below `start_index` that will never reach the learner (a resumed
            run's trajectories that were in flight when it was killed, or were set aside).
    """

    def __init__(
        self,
        agent_loop: AgentLoop,
        tasks: Iterator[Task],
        out: TrajectoryQueue,
        weights: WeightChannel,
        *,
        concurrency: int,
        batch_size: int,
        group_size: int = 1,
        ahead: int = 1,
        start_index: int = 0,
        abandoned: int = 0,
    ) -> None:
        if concurrency < group_size:
            raise ValueError(
                f"rollout.concurrency ({concurrency}) must be >= rollout.group_size ({group_size})"
            )
        self.loop = agent_loop
        self.tasks = tasks
        self.out = out
        self.weights = weights
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.group_size = group_size
        self.ahead = ahead
        self.next_index = start_index
        self.abandoned = abandoned
        self.stats = SchedulerStats()
        self._groups: dict[int, list[Trajectory]] = {}
        self._group_expected: dict[int, int] = {}
        # Groups with a member whose `reset` raised: set aside whole when released.
        self._tainted: set[int] = set()

    @property
    def version(self) -> int:
        return self.loop.engine.version

    def admission_limit(self) -> int:
        """Trajectories that may have started by now (see module docstring)."""
        bound = (self.version + 1 + self.ahead) * self.batch_size
        return bound + self.abandoned + self.stats.replaced

    @property
    def num_in_flight(self) -> int:
        """Trajectories started and not yet finished."""
        return self.loop.num_in_flight

    def poll_weights(self) -> bool:
        """Swap in newer published weights; in-flight trajectories continue under them."""
        if self.weights.latest_version() <= self.version:
            return False
        t0 = time.perf_counter()
        state, version = self.weights.fetch()
        if state is None or version <= self.version:
            return False
        self.loop.engine.update_weights(state, version)
        self.stats.weight_swaps += 1
        self.stats.swap_s += time.perf_counter() - t0
        return True

    def admit(self) -> int:
        """Start new prompts (G episodes each) while slots and the admission bound allow."""
        started = 0
        limit = self.admission_limit()
        while (
            self.num_in_flight + self.group_size <= self.concurrency
            and self.next_index + self.group_size <= limit
        ):
            task = next(self.tasks)
            group_id = self.next_index // self.group_size
            self._group_expected[group_id] = self.group_size
            for _ in range(self.group_size):
                index = self.next_index
                meta = {"index": index, "group_id": group_id, "admitted_version": self.version}
                self.loop.start(f"traj-{index}", task, meta)
                self.next_index += 1
                started += 1
        self.stats.admitted += started
        return started

    def tick(self) -> int:
        """One scheduling round; returns the number of trajectories handed to the queue."""
        self.poll_weights()
        self.admit()
        handed = self._account_dropped()  # a `reset` that raised ends its episode at once
        if self.num_in_flight == 0:
            return handed
        t0 = time.perf_counter()
        completed = self.loop.step()
        self.stats.busy_s += time.perf_counter() - t0
        handed += self._account_dropped()
        return handed + self._route(completed)

    def run_until(
        self,
        stop: threading.Event,
        paused: threading.Event | None = None,
        idle: threading.Event | None = None,
    ) -> None:
        """Tick until `stop` is set; with nothing in flight (admission bound reached, i.e. the
        learner is behind) wait briefly for new weights instead of spinning. While `paused` is
        set, tick nothing and set `idle` (cleared again before the next tick), so the caller can
        wait until no decode step is under way."""
        while not stop.is_set():
            if paused is not None and paused.is_set():
                if idle is not None:
                    idle.set()
                time.sleep(_IDLE_SLEEP_S)
                continue
            if idle is not None:
                idle.clear()
            self.tick()
            if self.num_in_flight == 0:
                time.sleep(_IDLE_SLEEP_S)

    def snapshot(self, started_at: float) -> dict[str, Any]:
        """Counters, and how the engine spent its time since `started_at` (a perf_counter time),
        paused time left out. The four shares add up to 1: decoding; stepping environments or
        waiting on them (tool calls, the latency overlay) with nothing to decode; loading new
        weights; idle (nothing in flight: the admission bound waits for the learner). Beside them,
        `engine_batch_mean`: episodes with a request at the engine per decode step (the rest of
        those in flight are on their environments)."""
        s = self.stats
        wall = max(1e-9, time.perf_counter() - started_at - s.paused_s)
        decode = min(1.0, self.loop.decode_s / wall)
        env = min(1.0 - decode, max(0.0, s.busy_s - self.loop.decode_s) / wall)
        swap = min(1.0 - decode - env, s.swap_s / wall)
        return {
            "admitted": s.admitted,
            "completed": s.completed,
            "dropped": s.dropped,
            "weight_swaps": s.weight_swaps,
            "busy_s": s.busy_s,
            "engine_decode_frac": decode,
            "engine_env_frac": env,
            "engine_swap_frac": swap,
            "engine_idle_frac": 1.0 - decode - env - swap,
            "engine_batch_mean": self.loop.decoding_sum / max(1, self.loop.decode_steps),
            "next_index": self.next_index,
            "end_reasons": dict(s.end_reasons),
            "in_flight": self.num_in_flight,
        }

    def close(self) -> None:
        """Release the agent loop's environment threads."""
        self.loop.close()

    # ------------------------------------------------------------------ internals
    def _route(self, completed: list[Trajectory]) -> int:
        handed = 0
        for traj in completed:
            self.stats.completed += 1
            reason = str(traj.metadata.get("end_reason"))
            self.stats.end_reasons[reason] = self.stats.end_reasons.get(reason, 0) + 1
            if self.group_size == 1:
                self.stats.replaced += int(is_env_error(traj))
                self.out.put([traj])
                handed += 1
                continue
            group_id = int(traj.metadata["group_id"])
            self._groups.setdefault(group_id, []).append(traj)
            handed += self._release_if_complete(group_id)
        return handed

    def _account_dropped(self) -> int:
        handed = 0
        for meta in self.loop.dropped:
            self.stats.dropped += 1
            if self.group_size == 1:
                self.stats.replaced += 1
                continue
            group_id = int(meta["group_id"])
            self._group_expected[group_id] -= 1
            self._tainted.add(group_id)
            handed += self._release_if_complete(group_id)
        self.loop.dropped.clear()
        return handed

    def _release_if_complete(self, group_id: int) -> int:
        members = self._groups.get(group_id, [])
        if len(members) < self._group_expected.get(group_id, self.group_size):
            return 0
        self._groups.pop(group_id, None)
        self._group_expected.pop(group_id, None)
        if group_id in self._tainted or any(is_env_error(t) for t in members):
            self._tainted.discard(group_id)
            self.stats.replaced += self.group_size
            members = [with_group_error(t) for t in members]
        if members:
            self.out.put(members)
        return len(members)
