"""Where the rollout side and the learner meet: a trajectory queue one way, weights the other.

The learner never calls the engine and the engine never calls the learner. These in-process
implementations are the default; `sao.runtime.ray_backend` provides the same interface over Ray.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping
from typing import Protocol

import torch

from sao.trajectory import Trajectory


class TrajectoryQueue(Protocol):
    """Completed trajectories in completion order."""

    def put(self, items: list[Trajectory]) -> None: ...

    def get_batch(self, n: int, timeout: float | None = None) -> list[Trajectory]: ...

    def qsize(self) -> int: ...


class WeightChannel(Protocol):
    """The latest published policy weights and their version."""

    def publish(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None: ...

    def latest_version(self) -> int: ...

    def fetch(self) -> tuple[dict[str, torch.Tensor] | None, int]: ...


class LocalTrajectoryQueue:
    """A thread-safe FIFO of trajectories."""

    def __init__(self) -> None:
        self._q: queue.Queue[Trajectory] = queue.Queue()

    def put(self, items: list[Trajectory]) -> None:
        """Append trajectories (a released group goes in together)."""
        for item in items:
            self._q.put(item)

    def get_batch(self, n: int, timeout: float | None = None) -> list[Trajectory]:
        """The first `n` trajectories, waiting for them; fewer only if `timeout` passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        out: list[Trajectory] = []
        while len(out) < n:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                out.append(self._q.get(timeout=remaining))
            except queue.Empty:
                break
        return out

    def qsize(self) -> int:
        """Trajectories waiting."""
        return self._q.qsize()


class LocalWeightChannel:
    """Holds the newest weights for the one reader beside the writer, which takes them.

    Taking (rather than reading) lets the channel drop its reference once the engine has the
    weights: a published copy left in the channel would be one more copy of the policy held for
    the whole run (0.5 GB on a 135M model), idle after the engine has copied it in.
    """

    def __init__(self, version: int = 0) -> None:
        self._lock = threading.Lock()
        self._state: dict[str, torch.Tensor] | None = None
        self._version = version
        self._published = False

    def publish(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Make `state_dict` (already a detached copy) the latest weights at `version`."""
        with self._lock:
            if version <= self._version and self._published:
                raise ValueError(f"publish: version {version} is not newer than {self._version}")
            self._state, self._version = dict(state_dict), version
            self._published = True

    def latest_version(self) -> int:
        """Version of the newest weights."""
        with self._lock:
            return self._version

    def fetch(self) -> tuple[dict[str, torch.Tensor] | None, int]:
        """`(state_dict, version)` of the newest weights, handed over: a second fetch gets `None`
        until the next publish (as does one before the first)."""
        with self._lock:
            state, self._state = self._state, None
            return state, self._version
