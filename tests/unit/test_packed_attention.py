"""Segment-by-segment attention on packed rows equals the padded computation with `sdpa`.

Checked on the tiny Qwen3-MoE policy and on a locally built BPE dense Qwen3: log-probs,
entropies, values, the SFT loss and every gradient; padded calls and cached generation under it
equal `sdpa`'s; the planner then packs rows to the longest sequence with almost no padding.
"""

from __future__ import annotations

import copy

import torch
from transformers import DynamicCache, Qwen3Config, Qwen3ForCausalLM

from sao.learner.chunking import (
    PackingCost,
    packed_forward,
    packed_padding_frac,
    packing_cost_for,
    plan_packing,
)
from sao.models import build_tiny_policy, build_tokenizer
from sao.models.critic import ValueModel
from sao.models.packed_attention import (
    PACKED_ATTENTION,
    _length_groups,
    packed_attention_forward,
    use_packed_attention,
    uses_packed_attention,
)
from sao.models.policy import load_policy, token_logprobs_and_entropy
from sao.warmstart.sft import sft_loss

SEGMENTS = PackingCost(segment_attention=True)


def padded_batch(
    vocab: int, lengths: list[int], seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded random ids (never the pad id 0) and their attention mask."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(1, vocab, (n,), generator=gen)
        mask[row, :n] = 1
    return ids, mask


LENGTHS = [23, 5, 17, 40, 9, 31, 12, 2, 27, 14]


def tiny_pair() -> tuple[torch.nn.Module, torch.nn.Module]:
    """The tiny default policy with `sdpa`, and a copy switched to segment attention."""
    policy = build_tiny_policy(build_tokenizer())
    packed = copy.deepcopy(policy)
    assert use_packed_attention(packed)
    assert policy.config._attn_implementation == "sdpa"
    return policy, packed


def grads_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


def assert_same_grads(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys() and a
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=1e-4)


def test_packed_policy_outputs_and_gradients_equal_the_padded_computation() -> None:
    padded_model, packed_model = tiny_pair()
    lengths = [*LENGTHS, 130]  # long enough for an attention call of its own
    ids, mask = padded_batch(padded_model.config.vocab_size, lengths)
    plan = plan_packing(lengths, 256, SEGMENTS)
    assert any(len(row) > 2 for rows in plan for row in rows)  # really several a row
    assert any(130 in [lengths[s] for s in row] and len(row) > 1 for rows in plan for row in rows)

    logp, ent = token_logprobs_and_entropy(padded_model, ids, mask, 0.7)
    ((logp + ent) * mask).sum().backward()
    packed_logp, packed_ent = packed_forward(
        lambda i, p: token_logprobs_and_entropy(packed_model, i, None, 0.7, p),
        ids,
        mask,
        256,
        SEGMENTS,
    )
    ((packed_logp + packed_ent) * mask).sum().backward()

    real = mask.bool()
    torch.testing.assert_close(packed_logp[real], logp[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(packed_ent[real], ent[real], atol=1e-5, rtol=1e-5)
    assert_same_grads(grads_of(packed_model), grads_of(padded_model))


def test_packed_critic_values_and_gradients_equal_the_padded_ones() -> None:
    policy, _ = tiny_pair()
    torch.manual_seed(0)
    critic = ValueModel.from_policy(policy)
    packed_critic = copy.deepcopy(critic)
    assert use_packed_attention(packed_critic) and uses_packed_attention(packed_critic)
    assert not uses_packed_attention(critic)
    ids, mask = padded_batch(policy.config.vocab_size, LENGTHS, seed=1)

    values = critic(ids, mask)
    (values * mask).pow(2).sum().backward()
    packed = packed_forward(lambda i, p: packed_critic(i, None, p), ids, mask, 64, SEGMENTS)
    (packed * mask).pow(2).sum().backward()

    real = mask.bool()
    torch.testing.assert_close(packed[real], values[real], atol=1e-5, rtol=1e-5)
    assert torch.all(packed[~real] == 0)
    assert_same_grads(grads_of(packed_critic), grads_of(critic))


def test_a_dense_bpe_qwen3_packs_exactly_for_log_probs_and_the_sft_loss(
    bpe_qwen3_dense_dir,
) -> None:
    padded_model, tokenizer = load_policy(bpe_qwen3_dense_dir)
    packed_model = copy.deepcopy(padded_model)
    assert use_packed_attention(packed_model)
    assert packing_cost_for(packed_model).segment_attention
    pad = tokenizer.pad_token_id
    ids, mask = padded_batch(len(tokenizer), LENGTHS, seed=2)
    ids = ids.masked_fill(ids == pad, pad + 1).masked_fill(mask == 0, pad)
    loss_mask = mask.clone()
    loss_mask[:, :3] = 0  # a prompt without loss

    loss = sft_loss(padded_model, ids, loss_mask, pad)
    loss.backward()
    packed_loss = sft_loss(packed_model, ids, loss_mask, pad, max_tokens=64)
    packed_loss.backward()
    torch.testing.assert_close(packed_loss, loss, atol=1e-6, rtol=1e-5)
    assert_same_grads(grads_of(packed_model), grads_of(padded_model))

    with torch.no_grad():
        logp, ent = token_logprobs_and_entropy(padded_model, ids, mask)
        packed_logp, packed_ent = packed_forward(
            lambda i, p: token_logprobs_and_entropy(packed_model, i, None, 1.0, p),
            ids,
            mask,
            64,
            SEGMENTS,
        )
    real = mask.bool()
    torch.testing.assert_close(packed_logp[real], logp[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(packed_ent[real], ent[real], atol=1e-5, rtol=1e-5)


def test_padded_batches_and_cached_generation_compute_what_sdpa_computes() -> None:
    sdpa_model, packed_model = tiny_pair()
    ids, mask = padded_batch(sdpa_model.config.vocab_size, [12, 7, 3])
    with torch.no_grad():
        a = token_logprobs_and_entropy(sdpa_model, ids, mask)
        b = token_logprobs_and_entropy(packed_model, ids, mask)
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)

        logits = []
        for model in (sdpa_model, packed_model):
            cache = DynamicCache(config=model.config)
            prefill = model(input_ids=ids[:1, :8], cache=cache, use_cache=True)
            step = model(input_ids=ids[:1, 8:9], cache=cache, use_cache=True)
            logits.append(torch.cat([prefill.logits, step.logits], dim=1))
        torch.testing.assert_close(logits[0], logits[1], atol=1e-6, rtol=1e-6)


def test_rows_are_split_where_positions_restart_and_only_there() -> None:
    """Without the restarts (or without `position_ids` reaching it) a row is one causal
    sequence, so the second sequence sees the first: what `use_packed_attention` checks for."""
    _, model = tiny_pair()
    module = model.model.layers[0].self_attn
    gen = torch.Generator().manual_seed(0)
    query = torch.randn(2, 4, 7, 32, generator=gen)
    key, value = torch.randn(2, 2, 7, 32, generator=gen), torch.randn(2, 2, 7, 32, generator=gen)
    positions = torch.tensor([[0, 1, 2, 0, 1, 2, 3], [0, 1, 2, 3, 4, 0, 1]])

    out, _ = packed_attention_forward(module, query, key, value, None, positions, scaling=0.2)
    for row, cut in ((0, 3), (1, 5)):
        for part in (slice(0, cut), slice(cut, 7)):
            alone = torch.nn.functional.scaled_dot_product_attention(
                query[row : row + 1, :, part],
                key[row : row + 1, :, part].repeat_interleave(2, dim=1),
                value[row : row + 1, :, part].repeat_interleave(2, dim=1),
                is_causal=True,
                scale=0.2,
            )
            torch.testing.assert_close(out[row, part], alone[0].transpose(0, 1))
    unsplit, _ = packed_attention_forward(module, query, key, value, None, None, scaling=0.2)
    torch.testing.assert_close(unsplit[:, :3], out[:, :3])
    assert not torch.allclose(unsplit[0, 3:], out[0, 3:], atol=1e-3)


def test_segments_share_a_call_only_while_padding_costs_less_than_a_call() -> None:
    # Two rows of width 320: segments of 300, 10, 10 and of 100, 20, 200 tokens.
    groups = _length_groups([[0, 300, 310, 320], [0, 100, 120, 320]], 320)
    assert groups == [([0], [300]), ([440], [200]), ([320], [100]), ([420, 310, 300], [20, 10, 10])]


def test_models_that_cannot_take_it_keep_their_attention(monkeypatch) -> None:
    windowed = Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
            intermediate_size=64,
            use_sliding_window=True,
            sliding_window=4,
            max_window_layers=0,
        )
    )
    assert not use_packed_attention(windowed)
    assert windowed.config._attn_implementation == "sdpa"
    assert not packing_cost_for(windowed).segment_attention
    assert not use_packed_attention(torch.nn.Linear(2, 2))

    monkeypatch.setattr("sao.models.packed_attention._packs_exactly", lambda model: False)
    policy = build_tiny_policy(build_tokenizer())
    assert not use_packed_attention(policy)
    assert policy.config._attn_implementation == "sdpa"


def test_segment_attention_plans_rows_with_almost_no_padding_within_the_budget() -> None:
    gen = torch.Generator().manual_seed(0)
    long = [int(x) for x in torch.randint(150, 1000, (32,), generator=gen)]
    short = [int(x) for x in torch.randint(40, 200, (32,), generator=gen)]
    for lengths in (long, short):
        assert packed_padding_frac(lengths, 4096, SEGMENTS) <= 0.05
        assert packed_padding_frac(lengths, 4096, SEGMENTS) < packed_padding_frac(lengths, 4096)
        for rows in plan_packing(lengths, 4096, SEGMENTS):
            assert len(rows) * max(sum(lengths[s] for s in row) for row in rows) <= 4096
    # A sequence longer than a pass may hold still runs, alone in its row.
    assert sorted(plan_packing([10, 5000], 4096, SEGMENTS)) == [[[0]], [[1]]]


def test_the_name_is_registered_with_transformers() -> None:
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    assert PACKED_ATTENTION in ALL_ATTENTION_FUNCTIONS
    assert PACKED_ATTENTION in ALL_MASK_ATTENTION_FUNCTIONS
