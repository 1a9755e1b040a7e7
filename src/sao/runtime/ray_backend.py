"""The Ray backend: rollout worker, learner, trajectory queue and weight store as Ray actors.

Same interface and same rollout code as `LocalBackend` (the actor builds its scheduler with
`sao.runtime.builders`), so both pass the same integration test. `train.ray_address` joins an
existing cluster; otherwise a local Ray starts with the machine's CPUs. Actors ask for no CPU
reservation (`num_cpus=0`) so they fit on a 2-core laptop; on a cluster, give them resources via
Ray's usual options.

Weights travel learner actor -> weight store actor (the driver only sends the order); the
trajectory log is written by the rollout actor (on a multi-node cluster, put the run directory on
a shared filesystem).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import ray
import torch
from ray.util.queue import Empty, Queue
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import SAOConfig
from sao.runtime.run_dir import TrajectoryLog
from sao.trajectory import Trajectory

_ACTOR = {"num_cpus": 0}


def _init_ray(address: str | None) -> None:
    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)


@ray.remote(**_ACTOR)
class WeightStore:
    """Holds the newest policy weights and their version."""

    def __init__(self, version: int) -> None:
        self.state: dict[str, torch.Tensor] | None = None
        self.version = version

    def publish(self, state: dict[str, torch.Tensor], version: int) -> None:
        self.state, self.version = state, version

    def latest_version(self) -> int:
        return self.version

    def fetch(self) -> tuple[dict[str, torch.Tensor] | None, int]:
        return self.state, self.version


class _RemoteQueue:
    """`TrajectoryQueue` over a Ray queue actor (used inside the rollout actor)."""

    def __init__(self, queue: Queue, log_dir: str | None) -> None:
        self.queue = queue
        self.log = TrajectoryLog(Path(log_dir)) if log_dir else None

    def put(self, items: list[Trajectory]) -> None:
        if self.log is not None:
            self.log.append(items)
        self.queue.put_nowait_batch([t.to_dict() for t in items])


class _RemoteWeights:
    """`WeightChannel` over the weight store actor (used inside the rollout actor)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def latest_version(self) -> int:
        return ray.get(self.store.latest_version.remote())

    def fetch(self) -> tuple[dict[str, torch.Tensor] | None, int]:
        return ray.get(self.store.fetch.remote())


@ray.remote(max_concurrency=2, **_ACTOR)
class RolloutWorker:
    """Engine + agent loop + scheduler, ticking in a thread of its own inside the actor."""

    def __init__(
        self,
        config: SAOConfig,
        policy: PreTrainedModel,
        tokenizer: Any,
        queue: Queue,
        store: Any,
        version: int,
        start_index: int,
        abandoned: int,
        log_dir: str | None,
    ) -> None:
        from sao.runtime.builders import build_scheduler

        torch.set_num_threads(1)
        self.scheduler = build_scheduler(
            config,
            policy,
            tokenizer,
            _RemoteQueue(queue, log_dir),
            _RemoteWeights(store),
            version=version,
            start_index=start_index,
            abandoned=abandoned,
        )
        self.stop_event = threading.Event()
        self.error: str | None = None
        self.started_at = time.perf_counter()

    def run(self) -> None:
        self.started_at = time.perf_counter()
        try:
            self.scheduler.run_until(self.stop_event)
        except Exception as err:  # reported through stats() to the driver
            self.error = repr(err)

    def stop(self) -> None:
        self.stop_event.set()
        self.scheduler.close()

    def stats(self) -> dict[str, Any]:
        return {**self.scheduler.snapshot(self.started_at), "error": self.error}


@ray.remote(**_ACTOR)
class LearnerActor:
    """Hosts a `sao.learner.step.Learner`."""

    def __init__(self, learner: Any) -> None:
        torch.set_num_threads(1)
        self.learner = learner

    def step(self, batch: list[dict]) -> dict[str, float]:
        return self.learner.step([Trajectory.from_dict(d) for d in batch])

    def version(self) -> int:
        return self.learner.version

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        return self.learner.policy_state_dict()

    def publish_to(self, store: Any) -> None:
        """Send the current weights straight to the weight store actor."""
        ray.get(store.publish.remote(self.learner.policy_state_dict(), self.learner.version))

    def state_dict(self) -> dict[str, Any]:
        return self.learner.state_dict()


class RemoteLearner:
    """The driver's view of a `LearnerActor`, with the methods `train()` uses of a `Learner`.

    `policy` is the driver's local copy, fetched from the actor only when the actor's version
    has moved past the copy's (held-out evals read it; most steps never do). The version is
    tracked on the driver: only `step` advances it.
    """

    def __init__(self, local: Any) -> None:
        self._local = local
        self._version = int(local.version)
        self._local_version = self._version
        self.actor = LearnerActor.remote(local)

    @property
    def version(self) -> int:
        return self._version

    @property
    def policy(self) -> PreTrainedModel:
        if self._local_version != self._version:
            self._local.policy.load_state_dict(self.policy_state_dict())
            self._local_version = self._version
        return self._local.policy

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        metrics = ray.get(self.actor.step.remote([t.to_dict() for t in trajectories]))
        self._version += 1
        return metrics

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        return ray.get(self.actor.policy_state_dict.remote())

    def state_dict(self) -> dict[str, Any]:
        return ray.get(self.actor.state_dict.remote())


class RayBackend:
    """Driver-side handle implementing `sao.runtime.backends.Backend`."""

    def __init__(
        self,
        config: SAOConfig,
        policy: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        version: int = 0,
        start_index: int = 0,
        abandoned: int = 0,
        log_dir: Path | None = None,
    ) -> None:
        if config.train.mode != "async":
            raise ValueError("train.mode: the ray backend runs async only; use --backend local")
        _init_ray(config.train.ray_address)
        self.config = config
        self.queue = Queue(actor_options=_ACTOR)
        self.store = WeightStore.remote(version)
        self.worker = RolloutWorker.remote(
            config,
            policy,
            tokenizer,
            self.queue,
            self.store,
            version,
            start_index,
            abandoned,
            str(log_dir) if log_dir is not None else None,
        )
        self._started_at = time.perf_counter()

    def attach_learner(self, learner: Any) -> RemoteLearner:
        """Move the learner into its actor; the driver keeps a handle with the same methods."""
        return RemoteLearner(learner)

    def start(self) -> None:
        self._started_at = time.perf_counter()
        self.worker.run.remote()

    def requeue(self, trajectories: list[Trajectory]) -> None:
        if trajectories:
            self.queue.put_nowait_batch([t.to_dict() for t in trajectories])

    def next_batch(self, n: int, timeout: float | None = None) -> list[Trajectory]:
        deadline = None if timeout is None else time.monotonic() + timeout
        out: list[Trajectory] = []
        while len(out) < n:
            try:
                out.append(Trajectory.from_dict(self.queue.get(timeout=1.0)))
            except Empty:
                error = ray.get(self.worker.stats.remote())["error"]
                if error:
                    raise RuntimeError(f"rollout actor failed: {error}") from None
                if deadline is not None and time.monotonic() > deadline:
                    break
        return out

    def publish_weights(self, learner: RemoteLearner) -> None:
        """The learner actor sends its weights to the weight store itself."""
        ray.get(learner.actor.publish_to.remote(self.store))

    def rollout_stats(self) -> dict[str, Any]:
        stats = ray.get(self.worker.stats.remote())
        stats["queued"] = self.queue.size()
        return stats

    def close(self) -> None:
        try:
            ray.get(self.worker.stop.remote(), timeout=30)
        finally:
            for actor in (self.worker, self.store, self.queue.actor):
                ray.kill(actor)
