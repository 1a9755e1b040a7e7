"""The one interface every inference engine implements, so the agent loop, the runtime and the
server can drive the built-in engine or vLLM alike.

The contract, which `tests/conformance/` checks for each engine:

- `submit` queues token ids (the whole context so far, token-in) with `SamplingParams` and stop
  conditions (EOS, stop token ids, stop strings); `step` advances and returns the segments that
  finished, as `Completion`s: the sampled ids (token-out), the fp32 log-prob of each under the
  distribution it was drawn from (temperature applied), and the weight version of each token.
- `check_sampling` refuses settings whose log-probs the learner cannot recompute with
  `sao.models.policy.token_logprobs` at the same temperature.
- `update_weights` swaps weights mid-flight: in-flight requests continue under the new weights and
  their later tokens carry the new version.
- `pause` stops decoding and keeps every request's state; `resume` continues. `abort` drops one
  request at once and returns what it had sampled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from torch import Tensor

from sao.rollout.requests import Completion, SamplingParams

ENGINE_NAMES: tuple[str, ...] = ("builtin", "vllm")


@runtime_checkable
class InferenceEngine(Protocol):
    """A sampler of token ids with per-token log-probs and weight versions (module docstring)."""

    @property
    def version(self) -> int:
        """Weight version the next sampled token gets."""
        ...

    @property
    def is_paused(self) -> bool:
        """True between `pause()` and `resume()`."""
        ...

    def has_work(self) -> bool:
        """True while any request is waiting or being decoded."""
        ...

    def check_sampling(self, params: SamplingParams) -> None:
        """Raise ValueError if the learner could not recompute this setting's log-probs."""
        ...

    def submit(
        self,
        request_id: str,
        prompt_ids: list[int],
        params: SamplingParams,
        stop_token_ids: Sequence[int] = (),
        stop_strings: Sequence[str] = (),
    ) -> None:
        """Queue one request; `prompt_ids` is the whole context so far."""
        ...

    def step(self) -> list[Completion]:
        """Advance; return the segments that finished (possibly none)."""
        ...

    def update_weights(self, state_dict: Mapping[str, Tensor], version: int) -> None:
        """Load (a subset of) the policy's weights; later tokens carry `version`."""
        ...

    def pause(self) -> None:
        """Stop decoding, keeping every request's state."""
        ...

    def resume(self) -> None:
        """Decode again after `pause`."""
        ...

    def abort(self, request_id: str) -> Completion | None:
        """Drop a request; return its tokens so far (finish_reason "abort"), None if unknown."""
        ...
