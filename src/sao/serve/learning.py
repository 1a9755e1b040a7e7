"""Learning live: the same `Learner` as `sao train`, fed by the feedback the service accepts.

A thread waits until `batch_size` rewarded completions are pending in the store, then takes one
pass of the learner loop `sao train` runs too (`sao.runtime.learner_loop`), this class being its
source and its sink:

    batch = oldest pending feedback (completion order of the rewards, late ones included)
    drop (and count) trajectories older than `max_staleness` versions, when a limit is set
    warm-up phase: critic-only updates on Monte-Carlo returns (the value-pretraining role)
    otherwise:     learner.step(batch) -> publish the new weights to the serving engine
    checkpoint file, then ONE store transaction: the checkpoint row + the feedback it trained

so after a kill the newest recorded checkpoint holds exactly the training of the feedback marked
trained, and everything else is still pending (see `sao.serve.store`).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from sao.core.advantages import token_gae
from sao.core.metrics import explained_variance
from sao.learner.step import Learner
from sao.runtime.learner_loop import LearnerLoop, LoopStep
from sao.serve.metrics import ServeMetrics
from sao.serve.store import Store
from sao.trajectory import Trajectory

log = logging.getLogger(__name__)

_KEEP_CHECKPOINT_FILES = 2


def critic_warmup_step(learner: Learner, trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """K critic updates towards Monte-Carlo returns, the actor untouched (no new version).

    Live traffic has no frozen initial policy to sample a pretraining set from beforehand, so the
    first batches of real feedback play that role. The updates are the learner's own
    (`Learner.critic_step`); the explained variance is of the values before them.
    """
    if learner.critic is None:
        raise ValueError("critic_warmup_step: the learner has no critic")
    batch = learner.to_device(trajectories)
    mask, rewards = batch.action_mask, batch.rewards
    gamma, k_updates = learner.config.algo.gamma, learner.config.critic.k_updates
    _, returns = token_gae(rewards, torch.zeros_like(rewards), mask, gamma, 1.0)
    values = learner.critic_values(batch, grad=k_updates > 0)
    losses = [
        learner.critic_step(batch, returns, values if k == 0 else None)["critic/vf_loss"]
        for k in range(k_updates)
    ]
    return {
        "critic/vf_loss": sum(losses) / len(losses) if losses else math.nan,
        "critic/vf_explained_var": explained_variance(values.detach(), returns, mask),
        "rollout/reward_mean": float(batch.scores.mean()),
    }


class LiveLearner:
    """Trains on accepted feedback in the background and publishes weights to the engine.

    Args:
        learner: the learner (already restored from the latest checkpoint, if any).
        store: the service's store.
        publish: `(weights, version) -> None`, e.g. `EngineWorker.publish`.
        checkpoint_dir: where checkpoint files go.
        batch_size: rewarded completions per learner step.
        warmup_batches: critic-only batches before the first actor update (0 without a critic).
        max_staleness: drop trajectories older than this many versions; None keeps all.
        metrics: the server's Prometheus metrics.
        seq: the latest checkpoint's sequence number (0 when starting fresh).
        warmup_done: warm-up batches already trained (from the latest checkpoint).
    """

    def __init__(
        self,
        learner: Learner,
        store: Store,
        publish: Callable[[Mapping[str, Tensor], int], None],
        checkpoint_dir: Path,
        batch_size: int,
        warmup_batches: int,
        max_staleness: int | None,
        metrics: ServeMetrics,
        seq: int = 0,
        warmup_done: int = 0,
    ) -> None:
        self.learner = learner
        self.store = store
        self.checkpoint_dir = Path(checkpoint_dir)
        self.batch_size = batch_size
        self.metrics = metrics
        self.seq = seq
        self.loop = LearnerLoop(
            learner,
            self,
            self,
            publish=lambda: publish(learner.policy_state_dict(), learner.version),
            batch_size=batch_size,
            max_staleness=max_staleness,
            warmup=(lambda batch: critic_warmup_step(learner, batch))
            if learner.critic is not None
            else None,
            warmup_batches=warmup_batches,
            warmup_done=warmup_done,
        )
        self.last_metrics: dict[str, float] = {}
        self.last_error: str | None = None
        self.training = False
        self.busy_s = 0.0  # seconds spent in learner steps since start
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sao-serve-learner", daemon=True)

    @property
    def version(self) -> int:
        return self.learner.version

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=120)

    def notify(self) -> None:
        """New feedback was stored; the thread checks whether a batch is ready."""
        self._wake.set()

    def status(self) -> dict[str, Any]:
        return {
            "checkpoint": self.seq,
            "warmup_batches_done": min(self.loop.warmup_done, self.loop.warmup_batches),
            "warmup_batches": self.loop.warmup_batches,
            "batch_size": self.batch_size,
            "training": self.training,
            "busy_s": self.busy_s,
            "last_error": self.last_error,
            "last_metrics": self.last_metrics,
        }

    # ------------------------------------------------------------------ the learner thread
    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=0.5)
            self._wake.clear()
            try:
                while not self._stop.is_set() and self.train_once():
                    pass
            except Exception as err:  # keep serving; the feedback stays pending for a retry
                self.last_error = f"{type(err).__name__}: {err}"
                log.exception("live learner step failed")
                self._stop.wait(5.0)

    def train_once(self) -> bool:
        """Train on one batch if one is ready; True when it did."""
        try:
            step = self.loop.step()
            if step is None:
                return False
            self.busy_s += step.metrics["time/learner_step"]
            self.metrics.learner_steps.labels(phase=step.phase).inc()
            self.metrics.learner_seconds.observe(step.metrics["time/learner_step"])
            self.metrics.policy_version.set(self.learner.version)
            self.metrics.set_counts(self.store.counts())
            self.last_error = None
            return True
        finally:
            self.training = False

    # ------------------------------------------------------------------ the loop's feeders
    def take(self, size: int) -> list[tuple[Hashable, Trajectory]] | None:
        """The loop's source: the oldest `size` rewarded completions, once that many wait."""
        pending = self.store.pending_batch(size)
        if len(pending) < size:
            return None
        self.training = True
        return list(pending)

    def record(self, step: LoopStep) -> None:
        """The loop's sink: the checkpoint file, then one store transaction."""
        step.metrics["rollout/dropped_stale"] = float(len(step.dropped))
        self.last_metrics = step.metrics
        trained, dropped = [str(k) for k, _ in step.kept], [str(k) for k, _ in step.dropped]
        self._checkpoint(trained, dropped, step.metrics)

    def _checkpoint(
        self, trained: list[str], dropped: list[str], metrics: dict[str, float]
    ) -> None:
        seq = self.seq + 1
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        path = self.checkpoint_dir / f"checkpoint_{seq:06d}.pt"
        tmp = path.with_suffix(".tmp")
        # Written before the next step, so the learner's own tensors, not a copy of them.
        state = {
            "learner": self.learner.state_dict(snapshot=False),
            "warmup_done": self.loop.warmup_done,
        }
        with tmp.open("wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        self.store.record_checkpoint(seq, self.learner.version, path, trained, dropped, metrics)
        self.seq = seq
        for old in self.store.checkpoint_paths()[:-_KEEP_CHECKPOINT_FILES]:
            old.unlink(missing_ok=True)


def load_checkpoint(path: Path, learner: Learner) -> int:
    """Restore `learner` from a checkpoint file; returns the warm-up batches it had done."""
    state = torch.load(path, weights_only=False)
    learner.load_state_dict(state["learner"])
    return int(state["warmup_done"])
