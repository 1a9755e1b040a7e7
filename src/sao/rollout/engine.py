"""The rollout engine: continuous batching over a private copy of the policy.

Many sequences are in flight at once. Each `step()` first admits waiting requests into free slots
(one batched prefill of their prompts), then runs one batched decode forward that samples exactly
one token for every active sequence. A sequence that finishes leaves the batch at once and its slot
is free for the next step, so a short generation never waits for a long one.

Every sampled token carries the log-prob of the distribution it was drawn from (fp32
`log_softmax(logits / temperature)`, renormalised over the top-p nucleus when `top_p < 1`; see
`sao.rollout.sampling`) and the weight version that produced its logits. With `top_p = 1` the
recorded log-prob equals `sao.models.policy.token_logprobs(model, ..., temperature=T)` at the
request's sampling temperature `T`; a learner comparing against it must use the same `T`.

Weights change only between steps (`update_weights` and `step` share a lock), so every token of
one step has one version. An in-flight sequence continues under the new weights: the next step
first recomputes the KV cache of every active sequence with them (one batched prefill), so a token
tagged with version `v` is sampled from exactly the policy `v` given the whole context.

Why not transformers' built-in continuous batching: it drives generation from a background thread
with no hook between decode steps to swap weights and tag tokens with versions, and per-request
temperature/top-p need extra set-up at creation. This engine is small, synchronous and exact.
"""

from __future__ import annotations

import copy
import inspect
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.cache_utils import Cache, DynamicLayer

from sao.models.kernels import use_kernels
from sao.rollout.kv_cache import SlotCache
from sao.rollout.requests import (
    Completion,
    SamplingParams,
    check_engine_settings,
    check_weight_update,
    checked_request,
    refuse_nucleus_sampling,
)
from sao.rollout.sampling import sample_tokens
from sao.rollout.stopping import ends_with_stop_string

__all__ = ["PRECISIONS", "Completion", "RolloutEngine", "SamplingParams"]

PRECISIONS: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16}


@dataclass
class _Sequence:
    """Book-keeping for one request. The cache holds every token except `next_input`."""

    request_id: str
    prompt_ids: list[int]
    params: SamplingParams
    stop_ids: frozenset[int]
    stop_strings: tuple[str, ...] = ()
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.token_ids)

    @property
    def next_input(self) -> int:
        return self.token_ids[-1] if self.token_ids else self.prompt_ids[-1]


class RolloutEngine:
    """Continuous-batching sampler with per-token log-probs and versions (see module docstring).

    Args:
        model: any HF causal LM; the engine deep-copies it, so the caller may keep training it.
        tokenizer: gives `eos_token_id`, which always ends a segment.
        max_batch: most sequences decoded together; the rest wait in submission order.
        precision: "fp32" or "bf16", the dtype of the engine's model copy.
        seed: seeds the engine's own sampling generator.
        version: weight version of `model`'s current weights.
        refresh_cache_on_update: after `update_weights`, recompute the KV cache of in-flight
            sequences under the new weights (one prefill), so later tokens are sampled from exactly
            the new policy. False keeps the old keys/values: cheaper, but later tokens then come
            from a mix of old context states and new weights, which neither version describes.
        kernels: "auto" runs the copy on the fastest attention and experts kernels its device
            has (`sao.models.kernels`), "eager" on the reference ones.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_batch: int = 32,
        precision: str = "fp32",
        seed: int = 0,
        version: int = 0,
        refresh_cache_on_update: bool = True,
        kernels: str = "auto",
    ) -> None:
        check_engine_settings("RolloutEngine", max_batch, precision, list(PRECISIONS), version)
        self._model = copy.deepcopy(model).to(PRECISIONS[precision]).eval().requires_grad_(False)
        use_kernels(self._model, kernels)
        for parameter in self._model.parameters():
            parameter.grad = None
        self._device = next(self._model.parameters()).device
        self._weights = self._model.state_dict()
        self._max_batch = max_batch
        self._version = version
        self._tokenizer = tokenizer
        self._eos_id = tokenizer.eos_token_id
        self._max_positions: int | None = getattr(
            self._model.config.get_text_config(), "max_position_embeddings", None
        )
        forward_parameters = inspect.signature(self._model.forward).parameters
        # transformers renamed `past_key_values` to `cache`; support both spellings.
        self._cache_kwarg = "cache" if "cache" in forward_parameters else "past_key_values"
        self._keep_last_logits = "logits_to_keep" in forward_parameters
        self._generator = torch.Generator(device=self._device).manual_seed(seed)
        self._lock = threading.Lock()
        self._waiting: deque[_Sequence] = deque()
        self._active: list[_Sequence] = []
        self._known_ids: set[str] = set()
        self._num_layers, self._kv_shape = self._probe_cache_layout(tokenizer)
        self._cache = SlotCache(self._num_layers)
        self._cache_is_stale = False
        self._refresh_on_update = refresh_cache_on_update
        self._paused = False

    # ------------------------------------------------------------------ public state
    @property
    def version(self) -> int:
        """Weight version the next step samples with."""
        return self._version

    @property
    def num_active(self) -> int:
        """Sequences currently holding a batch slot."""
        return len(self._active)

    @property
    def num_waiting(self) -> int:
        """Submitted sequences not yet admitted."""
        return len(self._waiting)

    @property
    def is_paused(self) -> bool:
        """True between `pause()` and `resume()`: `step` decodes nothing."""
        return self._paused

    def has_work(self) -> bool:
        """True while any sequence is active or waiting."""
        return bool(self._active or self._waiting)

    def check_sampling(self, params: SamplingParams) -> None:
        """Refuse settings whose recorded log-probs the learner cannot recompute: `top_p < 1`
        (this engine then records the log-prob renormalised over the nucleus)."""
        refuse_nucleus_sampling(params)

    def in_flight_tokens(self) -> dict[str, list[int]]:
        """A copy of the tokens each active sequence has sampled so far, by request id (for
        streaming a reply while it is generated)."""
        with self._lock:
            return {seq.request_id: list(seq.token_ids) for seq in self._active}

    # ------------------------------------------------------------------ requests
    def submit(
        self,
        request_id: str,
        prompt_ids: list[int],
        params: SamplingParams,
        stop_token_ids: Sequence[int] = (),
        stop_strings: Sequence[str] = (),
    ) -> None:
        """Queue a request; `prompt_ids` is the whole context so far.

        The segment ends ("stop") on EOS, on any of `stop_token_ids`, or on the token whose text
        completes one of `stop_strings` (checked on the decoded tail, so a stop string may span
        several tokens; the completing token may carry text past it).

        Raises:
            ValueError: duplicate in-flight `request_id`, empty or over-long prompt, bad token ids.
            TypeError: `params` is not a `SamplingParams`.
        """
        prompt = checked_request(
            request_id,
            prompt_ids,
            params,
            stop_strings,
            self._model.get_input_embeddings().num_embeddings,
            self._max_positions,
        )
        stops = frozenset(int(t) for t in stop_token_ids)
        if self._eos_id is not None:
            stops |= {int(self._eos_id)}
        with self._lock:
            if request_id in self._known_ids:
                raise ValueError(f"submit: request_id {request_id!r} is already in flight")
            self._known_ids.add(request_id)
            self._waiting.append(_Sequence(request_id, prompt, params, stops, tuple(stop_strings)))

    def abort(self, request_id: str) -> Completion | None:
        """Drop a waiting or active request at once; returns what it had sampled so far
        (finish_reason "abort"), or None for an unknown or already finished id."""
        with self._lock:
            for index, seq in enumerate(self._waiting):
                if seq.request_id == request_id:
                    del self._waiting[index]
                    return self._retire_aborted(seq)
            for row, seq in enumerate(self._active):
                if seq.request_id == request_id:
                    keep = [r for r in range(len(self._active)) if r != row]
                    self._active = [self._active[r] for r in keep]
                    self._cache.select_rows(
                        torch.tensor(keep, dtype=torch.long, device=self._device)
                    )
                    return self._retire_aborted(seq)
        return None

    def pause(self) -> None:
        """Stop decoding; in-flight requests keep their state (and continue after `resume`,
        under whatever weights are current then)."""
        with self._lock:
            self._paused = True

    def resume(self) -> None:
        """Decode again after `pause`."""
        with self._lock:
            self._paused = False

    def update_weights(self, state_dict: Mapping[str, Tensor], version: int) -> None:
        """Copy `state_dict` into the engine's model; tokens of later steps carry `version`.

        A subset of the parameters may be given. Applied between decode steps.

        Raises:
            ValueError: an unknown name, a shape mismatch, or a negative version.
        """
        check_weight_update(
            state_dict, {name: tuple(t.shape) for name, t in self._weights.items()}, version
        )
        with self._lock, torch.no_grad():
            for name, tensor in state_dict.items():
                self._weights[name].copy_(tensor.detach())
            self._version = version
            self._cache_is_stale = self._refresh_on_update

    # ------------------------------------------------------------------ decoding
    def step(self) -> list[Completion]:
        """Admit waiting requests into free slots, decode one token for every active sequence.

        Returns:
            The segments that finished in this step (possibly none).
        """
        with self._lock, torch.inference_mode():
            if self._paused:
                return []
            if self._cache_is_stale:
                self._refresh_cache()
            self._admit_waiting()
            if not self._active:
                return []
            tokens, logprobs = self._decode_one_token()
            return self._record_and_retire(tokens, logprobs)

    def run_until_done(self) -> list[Completion]:
        """Step until nothing is active or waiting; completions in finishing order.

        Raises:
            RuntimeError: the engine is paused (it would never finish).
        """
        if self._paused:
            raise RuntimeError("run_until_done: the engine is paused")
        finished: list[Completion] = []
        while self.has_work():
            finished.extend(self.step())
        return finished

    # ------------------------------------------------------------------ internals
    def _probe_cache_layout(
        self, tokenizer: PreTrainedTokenizerBase
    ) -> tuple[int, tuple[int, int]]:
        """Run one token through the model to learn the number of cache layers and `(H, D)`."""
        probe_id = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else 0
        cache = Cache(layer_class_to_replicate=DynamicLayer)
        with torch.inference_mode():
            self._forward(torch.tensor([[probe_id]], device=self._device), None, None, cache)
        keys = cache.layers[0].keys
        return len(cache.layers), (keys.shape[1], keys.shape[3])

    def _forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None,
        position_ids: Tensor | None,
        cache: Cache,
    ) -> Tensor:
        """Next-token logits `[B, V]` at the last position, appending to `cache`."""
        kwargs: dict[str, object] = {self._cache_kwarg: cache, "use_cache": True}
        if self._keep_last_logits:
            kwargs["logits_to_keep"] = 1
        output = self._model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            **kwargs,
        )
        return output.logits[:, -1]

    def _admit_waiting(self) -> None:
        """Move waiting requests into free slots, prefilling their prompts as new rows."""
        free = self._max_batch - len(self._active)
        admitted = [self._waiting.popleft() for _ in range(min(free, len(self._waiting)))]
        if admitted:
            self._cache.append_rows(*self._prefill(admitted))
            self._active.extend(admitted)

    def _refresh_cache(self) -> None:
        """Rebuild every active row's cache under the current weights."""
        self._cache = SlotCache(self._num_layers)
        if self._active:
            self._cache.append_rows(*self._prefill(self._active))
        self._cache_is_stale = False

    def _prefill(self, sequences: list[_Sequence]) -> tuple[list[Tensor], list[Tensor], Tensor]:
        """Per-layer keys/values `[n, H, L, D]` and mask `[n, L]` of every token but `next_input`.

        Rows are right-aligned to the longest prefix `L`.
        """
        prefixes = [[*seq.prompt_ids, *seq.token_ids][:-1] for seq in sequences]
        width = max(len(prefix) for prefix in prefixes)
        mask = torch.zeros(len(sequences), width, dtype=torch.long, device=self._device)
        input_ids = torch.zeros(len(sequences), width, dtype=torch.long, device=self._device)
        for row, prefix in enumerate(prefixes):
            if prefix:
                mask[row, width - len(prefix) :] = 1
                input_ids[row, width - len(prefix) :] = torch.tensor(prefix)
        if width == 0:
            heads, dim = self._kv_shape
            empty = torch.zeros(
                len(sequences), heads, 0, dim, dtype=self._model.dtype, device=self._device
            )
            return [empty] * self._num_layers, [empty] * self._num_layers, mask
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        prefill_cache = SlotCache(self._num_layers)
        self._forward(input_ids, mask, positions, prefill_cache)
        # Padding queries attend to nothing and may leave NaN in their key/value columns; zero
        # them so that a masked (weight 0) column can never turn into 0 * NaN later.
        real = mask.bool()[:, None, :, None]
        keys = [torch.where(real, layer.keys, 0.0) for layer in prefill_cache.slot_layers]
        values = [torch.where(real, layer.values, 0.0) for layer in prefill_cache.slot_layers]
        return keys, values, mask

    def _decode_one_token(self) -> tuple[list[int], list[float]]:
        input_ids = torch.tensor([[seq.next_input] for seq in self._active], device=self._device)
        positions = torch.tensor([[seq.length - 1] for seq in self._active], device=self._device)
        mask = self._cache.extend_mask()
        logits = self._forward(input_ids, mask, positions, self._cache)
        temperatures = torch.tensor(
            [seq.params.temperature for seq in self._active], device=self._device
        )
        top_ps = torch.tensor([seq.params.top_p for seq in self._active], device=self._device)
        tokens, logprobs = sample_tokens(logits, temperatures, top_ps, self._generator)
        return tokens.tolist(), logprobs.tolist()

    def _record_and_retire(self, tokens: list[int], logprobs: list[float]) -> list[Completion]:
        finished: list[Completion] = []
        keep: list[int] = []
        for row, (seq, token, logprob) in enumerate(
            zip(self._active, tokens, logprobs, strict=True)
        ):
            seq.token_ids.append(token)
            seq.logprobs.append(logprob)
            seq.versions.append(self._version)
            reason = self._finish_reason(seq, token)
            if reason is None:
                keep.append(row)
                continue
            self._known_ids.discard(seq.request_id)
            finished.append(
                Completion(seq.request_id, seq.token_ids, seq.logprobs, seq.versions, reason)
            )
        if len(keep) < len(self._active):
            self._active = [self._active[row] for row in keep]
            self._cache.select_rows(torch.tensor(keep, dtype=torch.long, device=self._device))
        return finished

    def _retire_aborted(self, seq: _Sequence) -> Completion:
        self._known_ids.discard(seq.request_id)
        return Completion(seq.request_id, seq.token_ids, seq.logprobs, seq.versions, "abort")

    def _finish_reason(self, seq: _Sequence, token: int) -> str | None:
        if token in seq.stop_ids:
            return "stop"
        if seq.stop_strings and ends_with_stop_string(
            self._tokenizer, seq.token_ids, seq.stop_strings
        ):
            return "stop"
        if len(seq.token_ids) >= seq.params.max_new_tokens:
            return "length"
        # The learner re-reads the whole sequence, so it must fit in the position table.
        if self._max_positions is not None and seq.length >= self._max_positions:
            return "length"
        return None
