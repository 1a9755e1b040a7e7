"""What a warm start was trained on, saved beside it, so a stale one is noticed when it is used.

A warm start is reused for as long as it exists on disk, while the environment it learnt from may
change under it (its prompt, its observations, its teacher). `warm_start.json` records the
environment and a fingerprint of the environment's own teacher at the time: the first few
demonstrations it writes, which change whenever any of those change. `stale_reason` compares the
record with the environment as it is now.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any

from sao.envs.registry import make_demonstrations, registration_for

RECORD_FILE = "warm_start.json"
_PROBE_DEMONSTRATIONS = 32


def teacher_fingerprint(env: str) -> str | None:
    """A short hash of `env`'s first demonstrations at seed 0; None if it has no teacher."""
    if registration_for(env).demonstrations is None:
        return None
    probe = make_demonstrations(env, _PROBE_DEMONSTRATIONS, 0)
    return hashlib.sha256(json.dumps(probe).encode()).hexdigest()[:16]


def write_record(
    directory: Path, env: str, *, given_demonstrations: bool, num_demonstrations: int, seed: int
) -> None:
    """Save `warm_start.json` into `directory` (a warm start being saved)."""
    record: dict[str, Any] = {
        "env": env,
        "teacher_fingerprint": teacher_fingerprint(env),
        "demonstrations": "given" if given_demonstrations else "teacher",
        "num_demonstrations": num_demonstrations,
        "seed": seed,
    }
    (directory / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")


def stale_reason(directory: Path, env: str) -> str | None:
    """Why the warm start in `directory` does not fit `env` as it is now, or None when it does
    or when nothing was recorded (a checkpoint from elsewhere, or saved before records)."""
    path = Path(directory) / RECORD_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return f"its {RECORD_FILE} is unreadable"
    if record.get("env") != env:
        return f"it was trained for env {record.get('env')!r}, not {env!r}"
    if record.get("teacher_fingerprint") != teacher_fingerprint(env):
        return (
            f"{env}'s prompts, observations or teacher changed since it was trained "
            "(its demonstrations would differ now)"
        )
    return None


def stale_warning(directory: Path, env: str, prog: str) -> str | None:
    """The one-line warning `prog` prints before using the warm start in `directory` on `env`,
    naming the command that rebuilds it; None when it fits or records nothing."""
    stale = stale_reason(directory, env)
    if stale is None:
        return None
    return (
        f"{prog}: warning: the warm start at {directory} may not fit: {stale}; rebuild it "
        f"(from the environment's own teacher: `sao sft --env {env} --out {directory}`)"
    )


def options_beyond_defaults(env: str, options: dict[str, Any]) -> dict[str, Any]:
    """The entries of `options` (a run's `env.options`) that differ from the defaults of `env`'s
    `make_env`, which its teacher writes demonstrations with; unknown defaults count as differing.
    Options that change only rewards (`EnvRegistration.reward_options`) are left out: the
    demonstrations are the same under them."""
    registration = registration_for(env)
    options = {k: v for k, v in options.items() if k not in registration.reward_options}
    try:
        parameters = inspect.signature(registration.make_env).parameters
    except (TypeError, ValueError):
        return dict(options)
    return {
        key: value
        for key, value in options.items()
        if key not in parameters or parameters[key].default != value
    }
