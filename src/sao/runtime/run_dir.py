"""A run directory: resolved config, metrics (JSONL + TensorBoard), the trajectory log, checkpoints.

Layout of `RUN_DIR/`:

    config.yaml           the resolved config
    metrics.jsonl         one JSON object per logged step (stable metric names)
    tb/                   TensorBoard events of the same metrics
    trajectories.jsonl    every completed trajectory, appended the moment it reaches the learner side
    value_pretrain.jsonl  the critic's value-pretraining curve
    sessions.json         one entry per invocation (`sao train`, then each `--resume`): wall time
    checkpoints/step_N/   learner state + the `RunRecord` needed to resume (`sao.runtime.checkpoints`)
    policy/               the trained policy, saved like a warm start
    plots/*.png           written at the end
    summary.json          initial/final held-out accuracy with intervals, wall time, counts,
                          behaviour drift (`sao.runtime.drift`)

Logs are appended durably and a torn last line is cut off before the next append
(`sao.plumbing.durable`); on resume, metric rows of steps the checkpoint does not cover are
removed, so `metrics.jsonl` steps keep increasing.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from sao.config import ConfigError
from sao.plumbing.durable import (
    atomic_write_json,
    iter_jsonl,
    open_jsonl_for_append,
    read_jsonl,
    rewrite_jsonl,
    strict_dumps,
)
from sao.trajectory import Trajectory

# Any of these in a directory means it already holds (part of) a run.
RUN_FILES = (
    "config.yaml",
    "metrics.jsonl",
    "trajectories.jsonl",
    "value_pretrain.jsonl",
    "sessions.json",
    "summary.json",
    "checkpoints",
    "tb",
    "policy",
)


def existing_run_files(run_dir: Path) -> list[str]:
    """The run files already in `run_dir` (empty for a new or empty directory)."""
    return [name for name in RUN_FILES if (run_dir / name).exists()]


def check_writable(directory: Path, what: str) -> None:
    """Create `directory` if needed and prove a file can be written there.

    Raises:
        ConfigError: one line naming `what` and the reason, before any work is done.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".sao-write-probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ConfigError(f"{what} {directory} is not writable ({err.strerror})") from None


class MetricsLogger:
    """Appends metric dicts to `metrics.jsonl` and mirrors scalars to TensorBoard.

    Args:
        keep_through: on resume, the step the checkpoint covers: rows (and TensorBoard events)
            after it are removed; -1 removes all; None (a fresh run) keeps everything.
    """

    def __init__(
        self, run_dir: Path, tensorboard: bool = True, keep_through: int | None = None
    ) -> None:
        self.path = run_dir / "metrics.jsonl"
        if keep_through is not None and self.path.exists():
            rows = read_metrics(run_dir)
            kept = [row for row in rows if row["step"] <= keep_through]
            if len(kept) != len(rows):
                rewrite_jsonl(self.path, kept)
        self._file = open_jsonl_for_append(self.path)
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = None if keep_through is None else keep_through + 1
            self._tb = SummaryWriter(str(run_dir / "tb"), purge_step=purge)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Record `metrics` at learner step `step`."""
        self._file.write(strict_dumps({"step": step, **metrics}) + "\n")
        self._file.flush()
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, int | float) and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)

    def close(self) -> None:
        """Flush and close both sinks."""
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """All complete rows of `metrics.jsonl`."""
    return read_jsonl(run_dir / "metrics.jsonl")


class TrajectoryLog:
    """Durable, append-only record of completed trajectories (survives a kill)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "trajectories.jsonl"
        self._file = open_jsonl_for_append(self.path)

    def append(self, trajectories: list[Trajectory]) -> None:
        """Write and fsync, so a trajectory that completed is never lost to a crash."""
        for traj in trajectories:
            self._file.write(strict_dumps(traj.to_dict()) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def read_trajectories(run_dir: Path) -> list[Trajectory]:
    """Every complete record of the trajectory log (an unterminated last line is skipped)."""
    return [Trajectory.from_dict(row) for row in iter_jsonl(run_dir / "trajectories.jsonl")]


class RunClock:
    """Wall time of a run across invocations, in `sessions.json`.

    Each invocation adds one entry and refreshes its `wall_s` at every `beat()`; a killed
    invocation therefore counts up to its last beat (at most one learner step short).
    """

    def __init__(self, run_dir: Path) -> None:
        import json

        self.path = run_dir / "sessions.json"
        self.sessions: list[dict[str, Any]] = []
        if self.path.exists():
            self.sessions = json.loads(self.path.read_text())["sessions"]
        self._t0 = time.monotonic()
        self.sessions.append(
            {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "wall_s": 0.0}
        )
        self.beat()

    def beat(self) -> None:
        """Record the time spent so far by this invocation."""
        self.sessions[-1]["wall_s"] = round(time.monotonic() - self._t0, 3)
        atomic_write_json(self.path, {"sessions": self.sessions})

    def total_s(self) -> float:
        """Wall seconds of every invocation so far, this one included."""
        self.beat()
        return round(sum(s["wall_s"] for s in self.sessions), 3)
