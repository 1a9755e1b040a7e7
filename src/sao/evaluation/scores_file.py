"""A policy's eval scores written once and reused: `sao eval --baseline-scores FILE`.

Every eval scores a baseline on the same tasks again, and for a fixed policy, task list and
sampling seed the scores come out the same; comparing several runs with one baseline then spends
half its time re-scoring it. An eval's JSON therefore records what its scores depend on (the
policy's path and a digest of its weights, the task count, seed and samples, and the
environment and sampling settings the agent loop reads), and a later eval reuses those scores
only when every one of these is the same now. No torch here: the command checks the file before
it loads a model.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sao.config import ConfigError, SAOConfig

# The settings `sao.rollout.setup.build_agent_loop` and the task source read: section -> fields.
SCORING_SETTINGS = {
    "env": ("name", "options", "task_options", "max_turns", "max_tokens", "latency"),
    "rollout": (
        "temperature",
        "top_p",
        "max_new_tokens",
        "engine",
        "engine_device",
        "precision",
        "concurrency",
    ),
}
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


def weights_digest(policy: Path) -> str:
    """SHA-256 over the names and bytes of the weight files in a saved policy (or a run's
    checkpoint, whose `learner.pt` holds them), in name order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in policy.iterdir() if p.suffix in _WEIGHT_SUFFIXES):
        digest.update(path.name.encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def scoring_settings(config: SAOConfig) -> dict[str, Any]:
    """`section.field` -> value for every setting an eval's scores depend on."""
    settings = {}
    for section, fields in SCORING_SETTINGS.items():
        dumped = getattr(config, section).model_dump(mode="json")
        settings.update({f"{section}.{name}": dumped[name] for name in fields})
    return settings


def scored_under(
    config: SAOConfig, policy: str | Path, *, n: int, seed: int, samples: int
) -> dict[str, Any]:
    """The record an eval's result carries under `scored`: what its scores depend on."""
    path = Path(policy).resolve()
    return {
        "policy": str(path),
        "weights_sha256": weights_digest(path),
        "n": n,
        "seed": seed,
        "samples": samples,
        "settings": scoring_settings(config),
    }


def reusable_scores(
    file: str | Path, config: SAOConfig, *, n: int, seed: int, samples: int
) -> dict[str, Any]:
    """The scores in `file` (an earlier `sao eval --json` result: its `baseline` section when it
    has one, else the result itself), if they were scored exactly as this eval would score
    them; otherwise a `ConfigError` naming the first difference."""
    try:
        saved = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--baseline-scores {file}: not a readable eval JSON ({exc})") from exc
    scores = saved.get("baseline", saved) if isinstance(saved, dict) else None
    record = scores.get("scored") if isinstance(scores, dict) else None
    if not isinstance(record, dict) or not isinstance(scores.get("task_scores"), list):
        raise ConfigError(
            f"--baseline-scores {file}: no scores with a record of how they were scored (an "
            "eval JSON written by this version of `sao eval --json`); score it with --baseline"
        )
    wanted = {"n": n, "seed": seed, "samples": samples, **scoring_settings(config)}
    found = {"n": record.get("n"), "seed": record.get("seed"), "samples": record.get("samples")}
    found.update(record.get("settings") or {})
    for key, value in wanted.items():
        if found.get(key) != value:
            raise ConfigError(
                f"--baseline-scores {file}: scored with {key}={found.get(key)!r}, this eval "
                f"uses {value!r}; score the baseline with --baseline"
            )
    policy = Path(record.get("policy", ""))
    if not policy.is_dir() or weights_digest(policy) != record.get("weights_sha256"):
        raise ConfigError(
            f"--baseline-scores {file}: the policy it scored ({policy}) is gone or its weights "
            "changed since; score the baseline with --baseline"
        )
    return scores
