"""Learner checkpoints of a run: written atomically, loaded newest-intact-first, pruned.

`RUN_DIR/checkpoints/step_N/` holds `learner.pt` (the `Learner.state_dict()`) and `record.json`
(the `RunRecord`: which trajectories were trained, the evals so far). A checkpoint is assembled in
a hidden temporary directory, every file fsynced, and renamed into place, so a kill during a
write leaves the previous checkpoints as they were. `latest` names the newest one for people;
loading does not trust it: it tries `step_N` directories from the highest N down and falls back,
with one warning line, past any that cannot be read.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sao.plumbing.durable import atomic_write_text, fsync_dir, strict_dumps
from sao.plumbing.faults import pause_point
from sao.runtime.record import RunRecord

if TYPE_CHECKING:
    import torch

_PREFIX = "step_"
_DISK_FULL_BYTES = 64 * 2**20


def checkpoint_root(run_dir: Path) -> Path:
    """`RUN_DIR/checkpoints`."""
    return run_dir / "checkpoints"


def checkpoint_steps(run_dir: Path) -> list[int]:
    """Steps of the checkpoint directories present, newest first."""
    root = checkpoint_root(run_dir)
    if not root.is_dir():
        return []
    steps = []
    for child in root.iterdir():
        suffix = child.name.removeprefix(_PREFIX)
        if child.is_dir() and child.name.startswith(_PREFIX) and suffix.isdigit():
            steps.append(int(suffix))
    return sorted(steps, reverse=True)


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def save_checkpoint(
    run_dir: Path, step: int, learner_state: dict[str, Any], record: RunRecord, keep: int
) -> Path:
    """Write `checkpoints/step_N/` atomically, point `latest` at it, prune older ones.

    Args:
        keep: how many of the newest checkpoints to keep (see `prune_checkpoints`).
    """
    root = checkpoint_root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{_PREFIX}{step}"
    tmp = root / f".{_PREFIX}{step}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    import torch  # here, not above: the CLI checks a run's checkpoints before torch loads

    try:
        torch.save(learner_state, tmp / "learner.pt")
    except (RuntimeError, OSError) as err:
        free = shutil.disk_usage(root).free
        shutil.rmtree(tmp, ignore_errors=True)
        if free < _DISK_FULL_BYTES:  # torch names a full disk only as a failed write position
            raise OSError(
                errno.ENOSPC,
                f"no space left on the disk of {root} for checkpoint step_{step} "
                f"({free / 2**20:.0f} MiB free); free some (train.keep_checkpoints keeps fewer) "
                f"and continue with `sao train --resume {run_dir}`",
            ) from err
        raise
    with (tmp / "learner.pt").open("rb+") as handle:
        os.fsync(handle.fileno())
    _write_synced(tmp / "record.json", (strict_dumps(record.to_dict()) + "\n").encode())
    fsync_dir(tmp)
    if final.exists():
        # Only after a fallback past a torn checkpoint does a step get written twice.
        shutil.rmtree(final)
    pause_point(f"checkpoint-write:{step}")
    os.replace(tmp, final)
    fsync_dir(root)
    atomic_write_text(root / "latest", final.name + "\n")
    prune_checkpoints(run_dir, keep)
    return final


def load_checkpoint(path: Path) -> tuple[dict[str, Any], RunRecord]:
    """`(learner_state, record)` of one checkpoint directory."""
    import torch

    state = torch.load(path / "learner.pt", weights_only=False)
    if not (path / "record.json").exists() and (path / "bookkeeping.json").exists():
        return state, _record_from_bookkeeping(path / "bookkeeping.json", int(state["version"]))
    record = RunRecord.from_dict(json.loads((path / "record.json").read_text()))
    return state, record


def _record_from_bookkeeping(path: Path, step: int) -> RunRecord:
    """The record of a checkpoint written before `record.json` existed (an untyped dict with
    the trained and dropped indices and the initial eval); its latest eval is not known."""
    book = json.loads(path.read_text())
    return RunRecord(
        step=step,
        trained_indices=list(book["trained_indices"]),
        dropped_indices=list(book["dropped_indices"]),
        initial_eval=book["initial_eval"],
        last_eval=book["initial_eval"],
    )


def load_latest_checkpoint(run_dir: Path) -> tuple[dict[str, Any], RunRecord] | None:
    """The newest checkpoint that loads, or None if there is none; every unreadable newer one
    is named in a one-line warning on stderr."""
    root = checkpoint_root(run_dir)
    for step in checkpoint_steps(run_dir):
        path = root / f"{_PREFIX}{step}"
        try:
            return load_checkpoint(path)
        except Exception as err:  # a torn or foreign file: any failure to read means "skip it"
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            print(
                f"sao: warning: checkpoint {path} is unreadable ({reason[:120]}); "
                "falling back to an older one",
                file=sys.stderr,
            )
    return None


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    """`RUN_DIR/checkpoints/step_N/` of learner step `step`.

    Raises:
        ValueError: if the run has no readable-looking checkpoint at that step, naming the steps
            it has (`train.keep_checkpoints` decides which survive).
    """
    path = checkpoint_root(run_dir) / f"{_PREFIX}{step}"
    if (path / "learner.pt").is_file():
        return path
    steps = sorted(checkpoint_steps(run_dir))
    have = ", ".join(str(s) for s in steps) if steps else "none"
    raise ValueError(f"{run_dir} has no checkpoint at step {step} (checkpoints kept: {have})")


def checkpoint_policy_state(path: Path) -> dict[str, torch.Tensor]:
    """The policy weights of the checkpoint directory `path` (whole, as an unsharded model's
    `state_dict`; saved on the CPU by `Learner.state_dict`), without its optimizers or critic."""
    return load_checkpoint(path)[0]["policy"]


def prune_checkpoints(run_dir: Path, keep: int) -> list[int]:
    """Delete all but the `keep` newest checkpoints and the best one; returns the steps deleted.

    The best is the checkpoint whose record has the highest held-out accuracy measured at its
    own step (ties: the newer); checkpoints written without an eval at their step never count
    as best.
    """
    steps = checkpoint_steps(run_dir)
    kept = set(steps[:keep])
    best = _best_step(run_dir, steps)
    if best is not None:
        kept.add(best)
    deleted = [s for s in steps if s not in kept]
    for step in deleted:
        shutil.rmtree(checkpoint_root(run_dir) / f"{_PREFIX}{step}", ignore_errors=True)
    return deleted


def _best_step(run_dir: Path, steps: list[int]) -> int | None:
    best: tuple[float, int] | None = None
    for step in steps:
        try:
            data = json.loads(
                (checkpoint_root(run_dir) / f"{_PREFIX}{step}/record.json").read_text()
            )
        except (OSError, ValueError):
            continue
        accuracy = data.get("eval_accuracy_at_step")
        if accuracy is not None and (best is None or (accuracy, step) > best):
            best = (float(accuracy), step)
    return None if best is None else best[1]
