"""A run directory: resolved config, metrics (JSONL + TensorBoard), the trajectory log, checkpoints.

Layout of `RUN_DIR/`:

    config.yaml           the resolved config
    metrics.jsonl         one JSON object per logged step (stable metric names)
    tb/                   TensorBoard events of the same metrics
    trajectories.jsonl    every completed trajectory, appended the moment it reaches the learner side
    checkpoints/step_N/   learner state + the bookkeeping needed to resume
    plots/*.png           written at the end
    summary.json          initial/final held-out accuracy with intervals, wall time, counts
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import torch

from sao.trajectory import Trajectory


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsLogger:
    """Appends metric dicts to `metrics.jsonl` and mirrors scalars to TensorBoard."""

    def __init__(self, run_dir: Path, tensorboard: bool = True) -> None:
        self.path = run_dir / "metrics.jsonl"
        self._file = self.path.open("a")
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(run_dir / "tb"))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Record `metrics` at learner step `step`."""
        row = {"step": step, **{k: _finite_or_none(v) for k, v in metrics.items()}}
        self._file.write(json.dumps(row) + "\n")
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
    """All rows of `metrics.jsonl`."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class TrajectoryLog:
    """Durable, append-only record of completed trajectories (survives a kill)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "trajectories.jsonl"
        self._file = self.path.open("a")

    def append(self, trajectories: list[Trajectory]) -> None:
        """Write and fsync, so a trajectory that completed is never lost to a crash."""
        for traj in trajectories:
            self._file.write(traj.to_json() + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def read_trajectories(run_dir: Path) -> list[Trajectory]:
    """Every complete line of the trajectory log (a line cut by a kill is skipped)."""
    path = run_dir / "trajectories.jsonl"
    if not path.exists():
        return []
    out: list[Trajectory] = []
    for line in path.read_text().splitlines():
        try:
            out.append(Trajectory.from_json(line))
        except (ValueError, json.JSONDecodeError):
            continue
    return out


def save_checkpoint(run_dir: Path, step: int, learner_state: dict, bookkeeping: dict) -> Path:
    """Write `checkpoints/step_N/` atomically (a temp dir renamed), then point `latest` at it."""
    root = run_dir / "checkpoints"
    final = root / f"step_{step}"
    tmp = root / f".step_{step}.tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    torch.save(learner_state, tmp / "learner.pt")
    (tmp / "bookkeeping.json").write_text(json.dumps(bookkeeping))
    if final.exists():
        for child in final.iterdir():
            child.unlink()
        final.rmdir()
    tmp.rename(final)
    (root / "latest").write_text(final.name)
    return final


def load_latest_checkpoint(run_dir: Path) -> tuple[dict, dict] | None:
    """`(learner_state, bookkeeping)` of the newest checkpoint, or None if there is none."""
    pointer = run_dir / "checkpoints" / "latest"
    if not pointer.exists():
        return None
    path = run_dir / "checkpoints" / pointer.read_text().strip()
    state = torch.load(path / "learner.pt", weights_only=False)
    bookkeeping = json.loads((path / "bookkeeping.json").read_text())
    return state, bookkeeping
