"""The character tokenizer, the tiny policy factory, save/load, and token-aligned log-probs."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from sao.models import (
    build_tiny_policy,
    build_tokenizer,
    load_policy,
    logprobs_from_logits,
    save_policy,
    tiny_policy_config,
    token_logprobs,
    token_logprobs_and_entropy,
)
from sao.models.tokenizer import CHARACTERS, TAG_TOKENS, tag_token_ids

TOKENIZER = build_tokenizer()


@pytest.fixture(scope="module")
def policy() -> torch.nn.Module:
    return build_tiny_policy(TOKENIZER, seed=0)


# ---------------------------------------------------------------- tokenizer
def test_vocabulary_layout() -> None:
    assert len(TOKENIZER) == 4 + 8 + 97 == 109
    assert (TOKENIZER.pad_token_id, TOKENIZER.bos_token_id, TOKENIZER.eos_token_id) == (0, 1, 2)
    assert TOKENIZER.unk_token_id == 3


def test_every_character_is_one_token() -> None:
    ids = [TOKENIZER.encode(ch) for ch in CHARACTERS]
    assert all(len(i) == 1 for i in ids)
    assert len({i[0] for i in ids}) == len(CHARACTERS)


def test_tags_are_single_tokens_even_inside_text() -> None:
    tag_ids = tag_token_ids(TOKENIZER)
    assert list(tag_ids.values()) == list(range(4, 12))
    ids = TOKENIZER.encode("x<python>1</python>y")
    assert ids == [
        TOKENIZER.convert_tokens_to_ids("x"),
        tag_ids["<python>"],
        TOKENIZER.convert_tokens_to_ids("1"),
        tag_ids["</python>"],
        TOKENIZER.convert_tokens_to_ids("y"),
    ]


def test_partial_tag_is_plain_characters() -> None:
    assert len(TOKENIZER.encode("<pyth")) == 5
    assert len(TOKENIZER.encode("< python>")) == 9


def test_non_ascii_maps_to_unk() -> None:
    assert TOKENIZER.encode("é") == [TOKENIZER.unk_token_id]


_pieces = st.one_of(
    st.text(alphabet=st.sampled_from(CHARACTERS), max_size=12),
    st.sampled_from(TAG_TOKENS + ("<bos>", "<eos>", "<pad>")),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_pieces, max_size=12))
def test_round_trip_is_exact_for_ascii_with_tags(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert TOKENIZER.decode(TOKENIZER.encode(text)) == text


def test_tokenizer_save_and_auto_load(tmp_path) -> None:
    TOKENIZER.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    text = "a\tb\n<answer> 42 </answer><eos>"
    assert loaded.encode(text) == TOKENIZER.encode(text)
    assert loaded.decode(loaded.encode(text)) == text
    assert (loaded.pad_token_id, loaded.bos_token_id, loaded.eos_token_id) == (0, 1, 2)


# ---------------------------------------------------------------- policy factory
def test_tiny_config_defaults_and_size(policy) -> None:
    config = tiny_policy_config(109)
    assert (config.hidden_size, config.num_hidden_layers) == (128, 4)
    assert (config.num_experts, config.num_experts_per_tok) == (8, 2)
    assert config.max_position_embeddings >= 2048
    assert 1_000_000 <= sum(p.numel() for p in policy.parameters()) <= 5_000_000


def test_tiny_config_overrides_and_rejects_bad_input() -> None:
    assert tiny_policy_config(50, num_hidden_layers=2).num_hidden_layers == 2
    with pytest.raises(ValueError, match="num_hiden_layers"):
        tiny_policy_config(50, num_hiden_layers=2)
    with pytest.raises(ValueError, match="vocab_size"):
        tiny_policy_config(0)


def test_build_is_seeded_and_leaves_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    first = build_tiny_policy(TOKENIZER, seed=7)
    assert torch.equal(torch.rand(1), expected_next)
    again = build_tiny_policy(TOKENIZER, seed=7)
    other = build_tiny_policy(TOKENIZER, seed=8)
    name = "model.layers.0.mlp.experts.gate_up_proj"
    assert torch.equal(first.state_dict()[name], again.state_dict()[name])
    assert not torch.equal(first.state_dict()[name], other.state_dict()[name])


def test_save_load_round_trip(tmp_path, policy) -> None:
    save_policy(policy, TOKENIZER, tmp_path / "ckpt")
    model, tokenizer = load_policy(tmp_path / "ckpt")
    ids = torch.tensor([TOKENIZER.encode("<bos>12+30=<python>")])
    with torch.no_grad():
        expected = policy(ids).logits
        got = model(ids).logits
    assert torch.equal(got, expected)
    assert tokenizer.encode("<answer>") == TOKENIZER.encode("<answer>")
    bf16_model, _ = load_policy(tmp_path / "ckpt", dtype=torch.bfloat16)
    assert next(bf16_model.parameters()).dtype == torch.bfloat16


def test_load_policy_rejects_bad_input(tmp_path) -> None:
    with pytest.raises(ValueError, match="path"):
        load_policy(tmp_path / "missing")
    with pytest.raises(ValueError, match="dtype"):
        load_policy(tmp_path, dtype=torch.int64)


# ---------------------------------------------------------------- log-probs
def test_logprobs_from_logits_by_hand() -> None:
    # Vocabulary of 2; the logits at position 0 give p = (1/4, 3/4), so token 1 has log(3/4).
    logits = torch.tensor([[[0.0, math.log(3.0)], [5.0, 5.0]]])
    input_ids = torch.tensor([[0, 1]])
    logprobs, entropy = logprobs_from_logits(logits, input_ids, with_entropy=True)
    assert logprobs.tolist()[0] == pytest.approx([0.0, math.log(0.75)])
    expected_entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert entropy is not None
    assert entropy.tolist()[0] == pytest.approx([0.0, expected_entropy])
    # At temperature 2 the logits halve: p = (1/(1+sqrt 3), sqrt 3/(1+sqrt 3)).
    hot, _ = logprobs_from_logits(logits, input_ids, temperature=2.0)
    assert hot[0, 1].item() == pytest.approx(math.log(math.sqrt(3) / (1 + math.sqrt(3))))


def test_logprobs_from_logits_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="temperature"):
        logprobs_from_logits(torch.zeros(1, 2, 3), torch.zeros(1, 2, dtype=torch.long), 0.0)
    with pytest.raises(ValueError, match="input_ids"):
        logprobs_from_logits(torch.zeros(1, 2, 3), torch.zeros(1, 3, dtype=torch.long))


def test_uniform_policy_has_uniform_logprobs_and_max_entropy() -> None:
    model = build_tiny_policy(TOKENIZER, seed=0)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    ids = torch.tensor([TOKENIZER.encode("<bos>abc")])
    logprobs, entropy = token_logprobs_and_entropy(model, ids, torch.ones_like(ids))
    vocab = len(TOKENIZER)
    assert logprobs[0, 0].item() == 0.0
    assert logprobs[0, 1:].tolist() == pytest.approx([-math.log(vocab)] * 3, abs=1e-6)
    assert entropy[0, 1:].tolist() == pytest.approx([math.log(vocab)] * 3, abs=1e-5)


def test_token_logprobs_ignore_padding_on_either_side(policy) -> None:
    short = TOKENIZER.encode("<bos>7*6=")
    long = TOKENIZER.encode("<bos>12+30=42")
    alone = [
        token_logprobs(policy, torch.tensor([s]), torch.ones(1, len(s), dtype=torch.long))[0]
        for s in (short, long)
    ]
    pad = len(long) - len(short)
    right = torch.tensor([short + [0] * pad, long])
    right_mask = torch.tensor([[1] * len(short) + [0] * pad, [1] * len(long)])
    left = torch.tensor([[0] * pad + short, long])
    left_mask = torch.tensor([[0] * pad + [1] * len(short), [1] * len(long)])
    with torch.no_grad():
        by_right = token_logprobs(policy, right, right_mask)
        by_left = token_logprobs(policy, left, left_mask)
    assert torch.allclose(by_right[0, : len(short)], alone[0], atol=1e-5)
    assert torch.allclose(by_left[0, pad + 1 :], alone[0][1:], atol=1e-5)
    assert torch.allclose(by_right[1], alone[1], atol=1e-5)


def test_token_logprobs_carry_gradients(policy) -> None:
    ids = torch.tensor([TOKENIZER.encode("<bos>abc")])
    token_logprobs(policy, ids, torch.ones_like(ids)).sum().backward()
    grad = policy.lm_head.weight.grad
    assert grad is not None and grad.abs().sum().item() > 0
    policy.zero_grad(set_to_none=True)


def test_tiny_config_accepts_attribute_map_aliases():
    from sao.models.policy import tiny_policy_config

    assert tiny_policy_config(109, num_experts=4).num_local_experts == 4
