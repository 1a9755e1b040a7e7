"""Choose the runtime backend named by `train.backend`; both expose the same interface."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import SAOConfig


def make_backend(
    config: SAOConfig,
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    version: int = 0,
    start_index: int = 0,
    log_dir: Path | None = None,
) -> Any:
    """A `LocalBackend` or a `RayBackend` with `attach_learner`, `start`, `next_batch`,
    `publish`, `requeue`, `rollout_stats` and `close`."""
    kwargs = {"version": version, "start_index": start_index, "log_dir": log_dir}
    if config.train.backend == "local":
        from sao.runtime.local_backend import LocalBackend

        return LocalBackend.build(config, policy, tokenizer, **kwargs)
    from sao.runtime.ray_backend import RayBackend

    return RayBackend(config, policy, tokenizer, **kwargs)
