"""The training clock and the run's throughput counters (`time/...`, `perf/...`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sao.runtime.record import RunRecord
from sao.runtime.run_dir import read_metrics
from sao.runtime.scheduler import ENGINE_SHARES

T = TypeVar("T")


class Pace:
    """Throughput and idle-time counters of this invocation (`perf/...`, `time/...`), and the
    training clock: wall seconds of the RL loop with every eval taken out (`time/train_s`),
    continued across resumes from the last kept row."""

    def __init__(self, train_s_offset: float = 0.0, sampled_offset: int = 0) -> None:
        self.t0 = time.perf_counter()
        self.wait = 0.0  # the latest batch's wait
        self.waited = 0.0
        self.trained = 0
        self.eval_s = 0.0
        self.train_s_offset = train_s_offset
        self.sampled_offset = sampled_offset
        self.next_eval_s: float | None = None

    @classmethod
    def resumed(cls, run_dir: Path, sampled: int) -> Pace:
        """A pace whose clock continues the run's last logged `time/train_s` and whose sample
        count starts from the `sampled` trajectories already logged."""
        rows = [r for r in read_metrics(run_dir) if "time/train_s" in r]
        offset = float(rows[-1]["time/train_s"]) if rows else 0.0
        return cls(offset, sampled)

    def train_s(self) -> float:
        """Training seconds so far (evals excluded)."""
        return self.train_s_offset + self.active_s()

    def active_s(self) -> float:
        """Training seconds of this invocation (evals excluded): what per-second rates divide by."""
        return max(1e-9, time.perf_counter() - self.t0 - self.eval_s)

    def eval_due(self, every_s: float | None) -> bool:
        """Whether a point of `train.eval_every_s` has passed since the last eval."""
        if every_s is None:
            return False
        if self.next_eval_s is None:
            self.next_eval_s = (self.train_s_offset // every_s + 1) * every_s
        return self.train_s() >= self.next_eval_s

    def eval_done(self, seconds: float, every_s: float | None) -> None:
        """Take an eval's `seconds` off the clock; the next time point is the first one ahead."""
        self.eval_s += seconds
        if every_s is not None:
            self.next_eval_s = (self.train_s() // every_s + 1) * every_s

    def timed(self, fetch: Callable[[int], T], n: int) -> tuple[T, float]:
        """`fetch(n)` and the seconds it waited (added to the idle time)."""
        t = time.perf_counter()
        batch = fetch(n)
        wait = time.perf_counter() - t
        self.waited += wait
        return batch, wait

    def metrics(
        self, wait: float, trained: int, stats: dict[str, Any], record: RunRecord
    ) -> dict[str, float]:
        """The step's `time/`, `perf/` and trajectory counts (`trained`: this step's batch)."""
        self.trained += trained
        active = self.active_s()
        return {
            "time/wait_for_batch": wait,
            "time/train_s": self.train_s(),
            "rollout/trajectories_sampled": self.sampled_offset + int(stats.get("completed", 0)),
            "rollout/trajectories_trained": len(record.trained_indices),
            "perf/trajectories_per_s": self.trained / active,
            **{f"perf/{k}": stats[k] for k in ENGINE_SHARES},
            "perf/engine_batch_mean": stats["engine_batch_mean"],
            "perf/learner_idle_frac": self.waited / active,
            "rollout/dropped_stale": len(record.dropped_indices),
            "rollout/queued": stats["queued"],
        }
