"""`make_backend`: the backend `train.backend` names. The interface it returns is in
`sao.runtime.protocols`, which the implementations import, so nothing imports this module back.
"""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import SAOConfig
from sao.runtime.protocols import Backend


def make_backend(
    config: SAOConfig,
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    version: int = 0,
    start_index: int = 0,
    abandoned: int = 0,
    log_dir: Path | None = None,
) -> Backend:
    """A `LocalBackend` or a `RayBackend`, starting its task stream at `start_index`.

    Args:
        abandoned: trajectory indices below `start_index` that will never complete (in flight
            when an earlier invocation was killed); see `sao.runtime.scheduler`.
    """
    kwargs = {
        "version": version,
        "start_index": start_index,
        "abandoned": abandoned,
        "log_dir": log_dir,
    }
    if config.train.backend == "local":
        from sao.runtime.local_backend import LocalBackend

        return LocalBackend.build(config, policy, tokenizer, **kwargs)
    from sao.runtime.ray_backend import RayBackend

    return RayBackend(config, policy, tokenizer, **kwargs)
