"""The rollout engine: exact log-probs, versions across a weight swap, stops, continuous batching.

Log-prob tolerance: in fp32 the engine's recorded log-probs must equal `token_logprobs` recomputed
on the whole sequence within 1e-4 (observed differences are ~1e-6).
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from sao.models import build_tiny_policy, build_tokenizer, tiny_policy_config, token_logprobs
from sao.rollout.engine import Completion, RolloutEngine, SamplingParams
from sao.rollout.kv_cache import SlotCache
from sao.rollout.sampling import nucleus_log_probs, sample_tokens

TOLERANCE = 1e-4
TOKENIZER = build_tokenizer()
NO_EOS = copy.deepcopy(TOKENIZER)
NO_EOS.eos_token = None  # lengths then depend on max_new_tokens and stop tokens only


@pytest.fixture(scope="module")
def policy() -> torch.nn.Module:
    return build_tiny_policy(TOKENIZER, seed=0)


def prompt(text: str) -> list[int]:
    return [TOKENIZER.bos_token_id, *TOKENIZER.encode(text)]


def recomputed(model, prompt_ids: list[int], completion: Completion, temperature: float = 1.0):
    """`token_logprobs` of the completion's tokens given its prompt, as a list."""
    ids = torch.tensor([prompt_ids + completion.token_ids])
    with torch.no_grad():
        logprobs = token_logprobs(model, ids, torch.ones_like(ids), temperature)
    return logprobs[0, len(prompt_ids) :]


def max_gap(model, prompts: dict[str, list[int]], completions, temperature: float = 1.0) -> float:
    """Largest |recorded - recomputed| log-prob over all completions (one padded forward)."""
    sequences = [prompts[c.request_id] + c.token_ids for c in completions]
    width = max(len(s) for s in sequences)
    ids = torch.tensor([s + [0] * (width - len(s)) for s in sequences])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences])
    with torch.no_grad():
        logprobs = token_logprobs(model, ids, mask, temperature)
    gaps = []
    for row, c in enumerate(completions):
        start = len(prompts[c.request_id])
        learner = logprobs[row, start : start + len(c.token_ids)]
        gaps.append((learner - torch.tensor(c.logprobs)).abs().max().item())
    return max(gaps)


# ---------------------------------------------------------------- sampling math
def test_nucleus_by_hand() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]] * 3))
    got = nucleus_log_probs(logits, torch.ones(3), torch.tensor([0.7, 0.45, 1.0])).exp()
    assert got[0].tolist() == pytest.approx([0.625, 0.375, 0.0])
    assert got[1].tolist() == pytest.approx([1.0, 0.0, 0.0])
    assert got[2].tolist() == pytest.approx([0.5, 0.3, 0.2])


def test_temperature_by_hand() -> None:
    logits = torch.tensor([[0.0, math.log(3.0)]])
    got = nucleus_log_probs(logits, torch.tensor([0.5]), torch.ones(1)).exp()
    assert got[0].tolist() == pytest.approx([0.1, 0.9])  # (1, 9) / 10


def test_samples_follow_the_distribution_they_report() -> None:
    rows = 20_000
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]])).expand(rows, 3)
    generator = torch.Generator().manual_seed(0)
    tokens, logprobs = sample_tokens(logits, torch.ones(rows), torch.full((rows,), 0.8), generator)
    # top_p 0.8 keeps {0.6, 0.3}; renormalised to (2/3, 1/3); token 2 never appears.
    frequency = torch.bincount(tokens, minlength=3).float() / rows
    assert frequency.tolist() == pytest.approx([2 / 3, 1 / 3, 0.0], abs=0.015)
    expected = torch.log(torch.tensor([2 / 3, 1 / 3]))[tokens]
    assert torch.allclose(logprobs, expected, atol=1e-6)


# ---------------------------------------------------------------- batch KV cache
def _states(rows: int, width: int, start: float) -> torch.Tensor:
    """`[rows, 1, width, 1]` states numbered start, start + 1, ... column by column."""
    return (start + torch.arange(width, dtype=torch.float)).expand(rows, width)[:, None, :, None]


def test_slot_cache_right_aligns_rows_and_drops_padding_columns() -> None:
    cache = SlotCache(num_layers=1)
    cache.append_rows(
        [_states(1, 3, 10.0)], [_states(1, 3, 10.0)], torch.ones(1, 3, dtype=torch.long)
    )
    cache.append_rows(
        [_states(1, 1, 20.0)], [_states(1, 1, 20.0)], torch.ones(1, 1, dtype=torch.long)
    )
    assert cache.column_mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert cache.slot_layers[0].keys[:, 0, :, 0].tolist() == [[10, 11, 12], [0, 0, 20]]
    cache.extend_mask()
    cache.update(_states(2, 1, 30.0), _states(2, 1, 30.0), layer_idx=0)
    assert cache.slot_layers[0].keys[:, 0, :, 0].tolist() == [[10, 11, 12, 30], [0, 0, 20, 30]]
    cache.select_rows(torch.tensor([1]))  # the long row leaves: two padding columns go with it
    assert cache.column_mask.tolist() == [[1, 1]]
    assert cache.slot_layers[0].keys[:, 0, :, 0].tolist() == [[20, 30]]
    assert cache.get_seq_length() == cache.width == 2


# ---------------------------------------------------------------- exact log-probs
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_fp32_logprobs_match_learner_recompute(policy, temperature: float) -> None:
    engine = RolloutEngine(policy, TOKENIZER, max_batch=4, seed=1)
    prompts = {f"r{i}": prompt("3+4=" * i) for i in range(6)}
    for rid, ids in prompts.items():
        engine.submit(rid, ids, SamplingParams(temperature=temperature, max_new_tokens=12))
    completions = engine.run_until_done()
    assert sorted(c.request_id for c in completions) == sorted(prompts)
    assert max_gap(policy, prompts, completions, temperature) < TOLERANCE
    if temperature != 1.0:
        # The convention matters: the same tokens at temperature 1 give clearly different numbers.
        assert max_gap(policy, prompts, completions, 1.0) > 100 * TOLERANCE


def test_top_p_logprobs_are_of_the_renormalised_nucleus(policy) -> None:
    sharp = copy.deepcopy(policy)
    with torch.no_grad():
        sharp.lm_head.weight.mul_(30.0)  # a peaked distribution, so the nucleus is a few tokens
    engine = RolloutEngine(sharp, TOKENIZER, max_batch=4, seed=2)
    prompts = {f"p{i}": prompt("ab" * (i + 1)) for i in range(4)}
    for rid, ids in prompts.items():
        engine.submit(rid, ids, SamplingParams(top_p=0.6, max_new_tokens=10))
    for completion in engine.run_until_done():
        ids = torch.tensor([prompts[completion.request_id] + completion.token_ids])
        with torch.no_grad():
            logits = sharp(ids).logits[0, len(prompts[completion.request_id]) - 1 : -1]
        nucleus = nucleus_log_probs(
            logits, torch.ones(len(logits)), torch.full((len(logits),), 0.6)
        )
        expected = nucleus.gather(-1, torch.tensor(completion.token_ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(completion.logprobs), expected, atol=TOLERANCE)


# ---------------------------------------------------------------- weight swap
def test_weight_swap_mid_generation_tags_and_uses_new_weights(policy) -> None:
    new_policy = build_tiny_policy(TOKENIZER, seed=1)
    engine = RolloutEngine(policy, NO_EOS, max_batch=8, seed=3, version=4)
    prompts = {f"s{i}": prompt("9" * (i + 1)) for i in range(3)}
    for rid, ids in prompts.items():
        engine.submit(rid, ids, SamplingParams(max_new_tokens=12))
    for _ in range(5):
        assert engine.step() == []
    engine.update_weights(new_policy.state_dict(), version=5)
    assert engine.version == 5
    completions = engine.run_until_done()
    assert len(completions) == 3
    for c in completions:
        assert c.versions == [4] * 5 + [5] * 7
        old = recomputed(policy, prompts[c.request_id], c)
        new = recomputed(new_policy, prompts[c.request_id], c)
        got = torch.tensor(c.logprobs)
        assert torch.allclose(got[:5], old[:5], atol=TOLERANCE)
        assert torch.allclose(got[5:], new[5:], atol=TOLERANCE)
        assert (got[5:] - old[5:]).abs().max() > 100 * TOLERANCE


def test_engine_owns_its_copy_of_the_weights(policy) -> None:
    original = copy.deepcopy(policy)
    engine = RolloutEngine(original, NO_EOS, max_batch=2, seed=4)
    with torch.no_grad():
        for parameter in original.parameters():
            parameter.add_(1.0)  # the learner trains its model; the engine must not see it
    ids = prompt("x=")
    engine.submit("a", ids, SamplingParams(max_new_tokens=6))
    (completion,) = engine.run_until_done()
    assert torch.allclose(
        torch.tensor(completion.logprobs), recomputed(policy, ids, completion), atol=TOLERANCE
    )


def test_update_weights_rejects_bad_input(policy) -> None:
    engine = RolloutEngine(policy, TOKENIZER, max_batch=1)
    with pytest.raises(ValueError, match="unknown parameter"):
        engine.update_weights({"no.such.weight": torch.zeros(1)}, version=1)
    with pytest.raises(ValueError, match="lm_head.weight"):
        engine.update_weights({"lm_head.weight": torch.zeros(3, 3)}, version=1)
    with pytest.raises(ValueError, match="version"):
        engine.update_weights({}, version=-1)
    assert engine.version == 0


# ---------------------------------------------------------------- stopping
def test_stop_tokens_end_a_segment_and_are_included(policy) -> None:
    stops = list(range(12, 48))  # a third of the vocabulary: segments stop early
    engine = RolloutEngine(policy, TOKENIZER, max_batch=8, seed=5)
    for i in range(8):
        engine.submit(f"t{i}", prompt("q"), SamplingParams(max_new_tokens=30), stops)
    completions = engine.run_until_done()
    reasons = [c.finish_reason for c in completions]
    assert reasons.count("stop") >= 6
    stop_set = set(stops) | {TOKENIZER.eos_token_id}
    for c in completions:
        assert not stop_set & set(c.token_ids[:-1])
        assert (c.token_ids[-1] in stop_set) == (c.finish_reason == "stop")
        if c.finish_reason == "length":
            assert len(c.token_ids) == 30


def test_eos_ends_a_segment_without_being_asked(policy) -> None:
    eos_heavy = copy.deepcopy(policy)
    with torch.no_grad():
        # Align the EOS output row with the mean hidden direction so EOS becomes very likely.
        eos_heavy.lm_head.weight[TOKENIZER.eos_token_id] = eos_heavy.model.norm.weight * 50.0
        eos_heavy.model.norm.weight.abs_()
    engine = RolloutEngine(eos_heavy, TOKENIZER, max_batch=4, seed=6)
    for i in range(4):
        engine.submit(f"e{i}", prompt("go"), SamplingParams(max_new_tokens=40))
    completions = engine.run_until_done()
    stopped = [c for c in completions if c.finish_reason == "stop"]
    assert stopped, "EOS never ended a segment"
    assert all(c.token_ids[-1] == TOKENIZER.eos_token_id for c in stopped)


def test_context_limit_ends_a_segment() -> None:
    config = tiny_policy_config(len(TOKENIZER), max_position_embeddings=16)
    from transformers import Qwen3MoeForCausalLM

    small = Qwen3MoeForCausalLM(config).eval()
    engine = RolloutEngine(small, NO_EOS, max_batch=2)
    engine.submit("c", list(range(12, 22)), SamplingParams(max_new_tokens=100))
    (completion,) = engine.run_until_done()
    assert (len(completion.token_ids), completion.finish_reason) == (6, "length")
    with pytest.raises(ValueError, match="context limit"):
        engine.submit("d", list(range(12, 28)), SamplingParams())


# ---------------------------------------------------------------- continuous batching
def test_many_concurrent_requests_of_different_lengths_all_complete(policy) -> None:
    engine = RolloutEngine(policy, NO_EOS, max_batch=8, seed=7)
    prompts = {f"m{i}": prompt("5" * (i % 9))[: 1 + i % 9] for i in range(40)}
    lengths = {rid: 1 + (i * 7) % 29 for i, rid in enumerate(prompts)}
    for rid, ids in prompts.items():
        engine.submit(rid, ids, SamplingParams(max_new_tokens=lengths[rid]))
    assert (engine.num_active, engine.num_waiting) == (0, 40)
    completions = engine.step()
    assert (engine.num_active + len(completions), engine.num_waiting) == (8, 32)
    completions += engine.run_until_done()
    assert not engine.has_work()
    assert sorted(c.request_id for c in completions) == sorted(prompts)
    assert all(len(c.token_ids) == lengths[c.request_id] for c in completions)
    assert all(c.finish_reason == "length" for c in completions)
    # Sequences joined and left the shared batch many times; every token must still be exact.
    assert max_gap(policy, prompts, completions) < TOLERANCE


def test_request_id_can_be_reused_once_finished(policy) -> None:
    engine = RolloutEngine(policy, NO_EOS, max_batch=2, seed=8)
    ids = prompt("turn one")
    engine.submit("ep", ids, SamplingParams(max_new_tokens=3))
    (first,) = engine.run_until_done()
    context = ids + first.token_ids + TOKENIZER.encode("<output>7</output>")
    engine.submit("ep", context, SamplingParams(max_new_tokens=4))
    (second,) = engine.run_until_done()
    assert len(second.token_ids) == 4
    assert torch.allclose(
        torch.tensor(second.logprobs), recomputed(policy, context, second), atol=TOLERANCE
    )


def test_same_seed_same_samples(policy) -> None:
    def run(seed: int) -> list[list[int]]:
        engine = RolloutEngine(policy, NO_EOS, max_batch=4, seed=seed)
        for i in range(4):
            engine.submit(f"d{i}", prompt("1"), SamplingParams(max_new_tokens=8))
        return [c.token_ids for c in sorted(engine.run_until_done(), key=lambda c: c.request_id)]

    assert run(11) == run(11)
    assert run(11) != run(12)


# ---------------------------------------------------------------- precision and validation
def test_bf16_engine_really_runs_in_bf16(policy) -> None:
    engine = RolloutEngine(policy, NO_EOS, max_batch=4, precision="bf16", seed=9)
    prompts = {f"b{i}": prompt("7" * (i + 2)) for i in range(4)}
    for rid, ids in prompts.items():
        engine.submit(rid, ids, SamplingParams(max_new_tokens=16))
    gap = max_gap(policy, prompts, engine.run_until_done())
    assert 1e-3 < gap < 0.5


def test_submit_and_construction_reject_bad_input(policy) -> None:
    with pytest.raises(ValueError, match="precision"):
        RolloutEngine(policy, TOKENIZER, precision="fp16")
    with pytest.raises(ValueError, match="max_batch"):
        RolloutEngine(policy, TOKENIZER, max_batch=0)
    engine = RolloutEngine(policy, TOKENIZER, max_batch=2)
    engine.submit("dup", prompt("a"), SamplingParams())
    with pytest.raises(ValueError, match="already in flight"):
        engine.submit("dup", prompt("a"), SamplingParams())
    with pytest.raises(ValueError, match="empty"):
        engine.submit("empty", [], SamplingParams())
    with pytest.raises(ValueError, match="prompt_ids"):
        engine.submit("oov", [len(TOKENIZER)], SamplingParams())
    with pytest.raises(TypeError, match="params"):
        engine.submit("typed", prompt("a"), {"temperature": 1.0})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [("temperature", 0.0), ("top_p", 0.0), ("top_p", 1.5), ("max_new_tokens", 0)],
)
def test_sampling_params_reject_bad_values(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        SamplingParams(**{field: value})


def test_keeping_the_old_cache_after_a_swap_is_not_the_new_policy(policy) -> None:
    new_policy = build_tiny_policy(TOKENIZER, seed=1)
    engine = RolloutEngine(policy, NO_EOS, max_batch=2, seed=3, refresh_cache_on_update=False)
    ids = prompt("99999999")
    engine.submit("k", ids, SamplingParams(max_new_tokens=8))
    for _ in range(4):
        engine.step()
    engine.update_weights(new_policy.state_dict(), version=1)
    (completion,) = engine.run_until_done()
    assert completion.versions == [0] * 4 + [1] * 4
    later = torch.tensor(completion.logprobs[4:])
    assert (later - recomputed(new_policy, ids, completion)[4:]).abs().max() > 100 * TOLERANCE
