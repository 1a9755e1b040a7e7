"""`sao export`: the policy a `sao serve` database has trained so far, as a policy directory.

The server keeps its learner in checkpoint files beside the database; the newest one recorded in
the database holds exactly the rewards marked trained. Exporting loads the served base model
(`--model`: its architecture and tokenizer), puts that checkpoint's policy weights into it and
saves it like any `sao sft` or `sao train` output, so `sao eval --model` and `sao serve --model`
take it. The database is opened read-only: a running server is not disturbed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import torch

from sao.config import LoraConfig
from sao.models.lora import with_weights
from sao.models.policy import load_policy, save_policy


def latest_recorded_checkpoint(db_path: Path) -> tuple[Path, int]:
    """The newest checkpoint the database records, and its policy version.

    Raises:
        ValueError: no database at `db_path`, or one with no checkpoint yet.
    """
    if not db_path.is_file():
        raise ValueError(f"--db: no database at {str(db_path)!r}")
    uri = f"file:{db_path.resolve()}?mode=ro"
    with sqlite3.connect(uri, uri=True) as db:
        try:
            row = db.execute(
                "SELECT path, version FROM checkpoints ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        except sqlite3.DatabaseError as err:
            raise ValueError(
                f"--db: {str(db_path)!r} is not a sao serve database ({err})"
            ) from None
    if row is None:
        raise ValueError(f"--db: {str(db_path)!r} has no checkpoint yet (nothing trained)")
    return Path(row[0]), int(row[1])


def export_policy(db_path: Path, model_path: Path, out: Path) -> int:
    """Write the newest recorded checkpoint's policy, on `model_path`'s architecture, to `out`.

    Returns:
        The exported policy version.

    Raises:
        ValueError: a missing database or checkpoint file, or weights that do not fit the model.
    """
    checkpoint, version = latest_recorded_checkpoint(db_path)
    if not checkpoint.is_file():
        raise ValueError(f"--db: its newest checkpoint {str(checkpoint)!r} is missing")
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    model, tokenizer = load_policy(model_path)
    policy = state["learner"]["policy"]
    lora = state["learner"].get("lora")
    if lora is not None:
        model = with_weights(model, policy, LoraConfig(**lora))
    else:
        mismatch = _mismatch(model.state_dict(), policy)
        if mismatch:
            raise ValueError(
                f"--model: the checkpoint's weights do not fit this model ({mismatch})"
            )
        model.load_state_dict(policy)
    save_policy(model, tokenizer, out)
    return version


def _mismatch(expected: dict[str, torch.Tensor], given: dict[str, torch.Tensor]) -> str | None:
    """What keeps `given` from loading into a model whose weights are `expected`, or None."""
    missing = sorted(set(expected) - set(given))
    unexpected = sorted(set(given) - set(expected))
    if missing or unexpected:
        first = (missing or unexpected)[0]
        return f"{len(missing)} missing and {len(unexpected)} unexpected weights, e.g. {first!r}"
    for name, tensor in given.items():
        if tensor.shape != expected[name].shape:
            return (
                f"{name!r} has shape {tuple(tensor.shape)}, the model {tuple(expected[name].shape)}"
            )
    return None
