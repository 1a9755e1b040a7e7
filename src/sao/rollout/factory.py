"""Choose the inference engine by name (`rollout.engine`)."""

from __future__ import annotations

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.rollout.engine import RolloutEngine
from sao.rollout.interface import ENGINE_NAMES, InferenceEngine


def make_engine(
    name: str,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    max_batch: int,
    precision: str,
    seed: int,
    version: int = 0,
) -> InferenceEngine:
    """The engine called `name` ("builtin" or "vllm") over a copy of `model`'s weights.

    Raises:
        ValueError: an unknown name, or "vllm" where the vllm package is not installed.
    """
    if name == "builtin":
        return RolloutEngine(
            model, tokenizer, max_batch=max_batch, precision=precision, seed=seed, version=version
        )
    if name == "vllm":
        from sao.rollout.vllm_engine import VLLMEngine

        return VLLMEngine(
            model, tokenizer, max_batch=max_batch, precision=precision, seed=seed, version=version
        )
    raise ValueError(f"rollout.engine: must be one of {list(ENGINE_NAMES)}, got {name!r}")
