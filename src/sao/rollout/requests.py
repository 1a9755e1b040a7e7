"""The records crossing the engine boundary: how to sample (`SamplingParams`) and what came out
(`Completion`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from torch import Tensor


@dataclass(frozen=True)
class SamplingParams:
    """How one request samples.

    Attributes:
        temperature: logits are divided by it (> 0). Recorded log-probs are at this temperature.
        top_p: nucleus mass in (0, 1]; 1 samples from the full distribution.
        max_new_tokens: the segment ends with finish_reason "length" after this many tokens.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256

    def __post_init__(self) -> None:
        if not isinstance(self.temperature, int | float) or not self.temperature > 0:
            raise ValueError(f"SamplingParams.temperature: must be > 0, got {self.temperature!r}")
        if not isinstance(self.top_p, int | float) or not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p: must be in (0, 1], got {self.top_p!r}")
        if (
            isinstance(self.max_new_tokens, bool)
            or not isinstance(self.max_new_tokens, int)
            or self.max_new_tokens < 1
        ):
            raise ValueError(
                f"SamplingParams.max_new_tokens: must be an int >= 1, got {self.max_new_tokens!r}"
            )


@dataclass(frozen=True)
class Completion:
    """One finished generation segment (the tokens sampled after the submitted prompt).

    Attributes:
        request_id: the id given to `submit`.
        token_ids: sampled tokens, the stop/EOS token included when one ended the segment.
        logprobs: per-token fp32 log-prob under the distribution the token was drawn from, i.e.
            at the request's temperature and top-p (see `sao.rollout.engine`).
        versions: per-token weight version that produced the token's logits.
        finish_reason: "stop" (a stop token, stop string or EOS was sampled), "length"
            (max_new_tokens or the model's context limit reached) or "abort" (`abort` dropped it).
    """

    request_id: str
    token_ids: list[int]
    logprobs: list[float]
    versions: list[int]
    finish_reason: str


def checked_request(
    request_id: str,
    prompt_ids: Sequence[int],
    params: SamplingParams,
    stop_strings: Sequence[str],
    vocab_size: int,
    max_positions: int | None,
) -> list[int]:
    """The prompt as a list of ints, once the request is known to be well formed.

    Raises:
        ValueError: empty `request_id`, empty or over-long prompt, ids outside the vocabulary, or
            an empty stop string.
        TypeError: `params` is not a `SamplingParams`.
    """
    if not isinstance(request_id, str) or not request_id:
        raise ValueError(f"submit: request_id must be a non-empty str, got {request_id!r}")
    if not isinstance(params, SamplingParams):
        raise TypeError(f"submit: params must be SamplingParams, got {type(params).__name__}")
    prompt = [int(t) for t in prompt_ids]
    if not prompt:
        raise ValueError("submit: prompt_ids is empty")
    if any(not 0 <= t < vocab_size for t in prompt):
        raise ValueError(
            f"submit: prompt_ids must lie in [0, {vocab_size}) for request {request_id!r}"
        )
    if max_positions is not None and len(prompt) >= max_positions:
        raise ValueError(
            f"submit: prompt_ids has {len(prompt)} tokens, the model's context limit is "
            f"{max_positions}"
        )
    if any(not isinstance(s, str) or not s for s in stop_strings):
        raise ValueError(f"submit: stop_strings must be non-empty strings, got {stop_strings!r}")
    return prompt


def check_engine_settings(
    engine: str, max_batch: int, precision: str, precisions: Sequence[str], version: int
) -> None:
    """The constructor arguments every engine checks alike; ValueError names the wrong one."""
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(f"{engine}.max_batch: must be an int >= 1, got {max_batch!r}")
    if precision not in precisions:
        raise ValueError(
            f"{engine}.precision: must be one of {sorted(precisions)}, got {precision!r}"
        )
    check_version(version)


def check_version(version: int) -> None:
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"version must be an int >= 0, got {version!r}")


def refuse_nucleus_sampling(params: SamplingParams) -> None:
    """Training needs `top_p = 1`: the learner recomputes `log_softmax(logits / T)` over the whole
    vocabulary, while an engine sampling from a nucleus records the log-prob renormalised over it.

    Raises:
        ValueError: `params.top_p < 1`.
    """
    if params.top_p < 1.0:
        raise ValueError(
            f"rollout.top_p={params.top_p}: the learner recomputes log-probs over the full "
            "vocabulary, so training needs top_p = 1 (temperature is fine)"
        )


def check_weight_update(
    state_dict: Mapping[str, Tensor], shapes: Mapping[str, tuple[int, ...]], version: int
) -> None:
    """ValueError for an unknown parameter name, a shape mismatch or a negative version."""
    check_version(version)
    unknown = sorted(name for name in state_dict if name not in shapes)
    if unknown:
        raise ValueError(f"update_weights: unknown parameter name(s) {unknown[:5]}")
    for name, tensor in state_dict.items():
        if tuple(tensor.shape) != tuple(shapes[name]):
            raise ValueError(
                f"update_weights: {name} has shape {tuple(tensor.shape)}, expected "
                f"{tuple(shapes[name])}"
            )
