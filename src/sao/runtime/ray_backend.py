"""The Ray backend: rollout worker, learner, trajectory queue and weight store as Ray actors.

Same interface and same rollout code as `LocalBackend` (the actor builds its scheduler with
`sao.runtime.builders`), so both pass the same integration test. `train.ray_address` joins an
existing cluster; otherwise a local Ray starts with the machine's CPUs. Actors ask for no CPU
reservation (`num_cpus=0`) so they fit on a 2-core laptop; `rollout.ray_resources` and
`train.ray_learner_resources` ask for custom resources, which places the rollout worker and the
learner on the nodes that offer them (e.g. `ray start --resources '{"engine": 1}'`).

Across nodes, nothing needs a shared disk and no weights pass through the driver:
- weights travel learner actor -> weight store actor -> rollout actor (the driver sends only the
  order to publish);
- the driver owns the run directory: a thread of its own drains the trajectory queue actor the
  moment trajectories arrive and logs them (fsynced) before the learner can see them. Workers
  write nothing. `ray_nodes.json` in the run directory records which node ran what.
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
from sao.plumbing.durable import atomic_write_json
from sao.runtime.run_dir import TrajectoryLog
from sao.runtime.transport import LocalTrajectoryQueue
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

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


class _RemoteQueue:
    """`TrajectoryQueue` over a Ray queue actor (used inside the rollout actor)."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def put(self, items: list[Trajectory]) -> None:
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
    ) -> None:
        from sao.runtime.builders import build_scheduler

        torch.set_num_threads(1)
        self.scheduler = build_scheduler(
            config,
            policy,
            tokenizer,
            _RemoteQueue(queue),
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

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


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

    def state_dict(self, snapshot: bool = True) -> dict[str, Any]:
        return self.learner.state_dict(snapshot)

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


class RemoteLearner:
    """The driver's view of a `LearnerActor`, with the methods `train()` uses of a `Learner`.

    `policy` is the driver's local copy, fetched from the actor only when the actor's version
    has moved past the copy's (held-out evals read it; most steps never do). The version is
    tracked on the driver: only `step` advances it.
    """

    def __init__(self, local: Any, resources: dict[str, float]) -> None:
        self._local = local
        self._version = int(local.version)
        self._local_version = self._version
        self.actor = LearnerActor.options(resources=resources).remote(local)

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

    def state_dict(self, snapshot: bool = True) -> dict[str, Any]:
        return ray.get(self.actor.state_dict.remote(snapshot))


PLACEMENT_TIMEOUT_S = 120.0
"""How long an actor may wait for a node offering its resources before the run stops."""


class _Drain:
    """A driver thread moving trajectories from the queue actor to a local queue, logging each
    (fsynced) before the learner can take it: the driver's process owns the run directory."""

    def __init__(
        self, source: Queue, log: TrajectoryLog | None, sink: LocalTrajectoryQueue
    ) -> None:
        self.source, self.log, self.sink = source, log, sink
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sao-ray-drain", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, then log what the (stopped) rollout side left in the queue actor,
        so every trajectory that completed is in the run directory."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        try:
            if self.error is None:
                self._move([])
        finally:
            if self.log is not None:
                self.log.close()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    first = self.source.get(timeout=0.5)
                except Empty:
                    continue
                self._move([first])
        except BaseException as err:  # surfaced to the learner's thread by next_batch
            self.error = err

    def _move(self, taken: list[dict]) -> None:
        # This thread is the only consumer, so everything counted is there to take.
        waiting = self.source.qsize()
        rest = self.source.get_nowait_batch(waiting) if waiting else []
        items = [Trajectory.from_dict(d) for d in (*taken, *rest)]
        if items:
            if self.log is not None:
                self.log.append(items)
            self.sink.put(items)


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
        self.log_dir = log_dir
        self.queue = Queue(actor_options=_ACTOR)
        self.store = WeightStore.remote(version)
        self.worker = RolloutWorker.options(resources=config.rollout.ray_resources).remote(
            config, policy, tokenizer, self.queue, self.store, version, start_index, abandoned
        )
        self.ready = LocalTrajectoryQueue()
        log = TrajectoryLog(log_dir) if log_dir is not None else None
        self.drain = _Drain(self.queue, log, self.ready)
        self.learner_actor: Any = None

    def attach_learner(self, learner: Any) -> RemoteLearner:
        """Move the learner into its actor (on a node offering `train.ray_learner_resources`);
        the driver keeps a handle with the same methods. Records where each actor runs."""
        remote = RemoteLearner(learner, self.config.train.ray_learner_resources)
        self.learner_actor = remote.actor
        placement = self.placement()
        if self.log_dir is not None:
            atomic_write_json(self.log_dir / "ray_nodes.json", placement)
        return remote

    def placement(self) -> dict[str, Any]:
        """The Ray node id of the driver and of each actor, and each live node's resources
        (`nodes`: node id -> resource totals).

        Raises:
            RuntimeError: naming the actor and the resources it asked for, when no node offered
                them within `PLACEMENT_TIMEOUT_S`.
        """
        actors = {
            "rollout": (self.worker, self.config.rollout.ray_resources),
            "weight_store": (self.store, {}),
        }
        if self.learner_actor is not None:
            actors["learner"] = (self.learner_actor, self.config.train.ray_learner_resources)
        out: dict[str, Any] = {"driver": ray.get_runtime_context().get_node_id()}
        for name, (actor, resources) in actors.items():
            try:
                out[name] = ray.get(actor.node_id.remote(), timeout=PLACEMENT_TIMEOUT_S)
            except ray.exceptions.GetTimeoutError:
                raise RuntimeError(
                    f"ray: the {name} actor was not placed within {PLACEMENT_TIMEOUT_S:.0f} s; "
                    f"no node offers resources {resources}"
                ) from None
        out["nodes"] = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
        return out

    def start(self) -> None:
        self.drain.start()
        self.worker.run.remote()

    def requeue(self, trajectories: list[Trajectory]) -> None:
        """Already-logged trajectories go straight to the learner's side (never logged twice)."""
        self.ready.put(trajectories)

    def next_batch(self, n: int, timeout: float | None = None) -> list[Trajectory]:
        deadline = None if timeout is None else time.monotonic() + timeout
        out: list[Trajectory] = []
        while len(out) < n:
            out += self.ready.get_batch(n - len(out), timeout=1.0)
            if len(out) >= n:
                break
            if self.drain.error is not None:
                raise RuntimeError(f"trajectory drain failed: {self.drain.error!r}")
            error = ray.get(self.worker.stats.remote())["error"]
            if error:
                raise RuntimeError(f"rollout actor failed: {error}")
            if deadline is not None and time.monotonic() > deadline:
                break
        return out

    def publish_weights(self, learner: RemoteLearner) -> None:
        """The learner actor sends its weights to the weight store itself."""
        ray.get(learner.actor.publish_to.remote(self.store))

    def pause_rollout(self) -> None:
        """Not offered: the config refuses `train.eval_every_s`, its only caller, under Ray."""
        raise NotImplementedError("the ray backend cannot pause its rollouts")

    def resume_rollout(self) -> None:
        raise NotImplementedError("the ray backend cannot pause its rollouts")

    def rollout_stats(self) -> dict[str, Any]:
        stats = ray.get(self.worker.stats.remote())
        stats["queued"] = self.ready.qsize() + self.queue.size()
        return stats

    def close(self) -> None:
        try:
            ray.get(self.worker.stop.remote(), timeout=30)
        finally:
            self.drain.stop()
            # The learner actor outlives the backend: the run's report reads its final policy.
            for actor in (self.worker, self.store, self.queue.actor):
                ray.kill(actor)
