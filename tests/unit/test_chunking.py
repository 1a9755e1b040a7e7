"""Length-sorted learner passes equal one full-batch pass: outputs, gradients, a whole step."""

import copy

import pytest
import torch
from test_learner import make_trajectories, moe_policy

from sao.config import load_config
from sao.learner import Learner
from sao.learner.chunking import (
    chunked_forward,
    chunked_padding_frac,
    length_chunks,
    pack_rows,
    packed_forward,
    packed_padding_frac,
    plan_packing,
)
from sao.models.critic import ValueModel
from sao.models.policy import token_logprobs_and_entropy
from sao.trajectory import collate


def test_chunks_hold_every_row_once_within_the_budget():
    lengths = [5, 40, 12, 7, 33, 9, 100, 1]
    chunks = length_chunks(lengths, 40)
    rows = [r for chunk in chunks for r in chunk]
    assert sorted(rows) == list(range(len(lengths)))
    assert [lengths[r] for r in rows] == sorted(lengths)
    for chunk in chunks:
        longest = max(lengths[r] for r in chunk)
        assert len(chunk) * longest <= 40 or len(chunk) == 1
    assert [6] in chunks  # longer than the budget: alone


def test_a_budget_below_one_is_an_error():
    with pytest.raises(ValueError, match="max_tokens"):
        length_chunks([3], 0)


def _batch(policy, count=9):
    return collate(make_trajectories(policy, count, seed=3))


def test_chunked_outputs_and_gradients_equal_one_full_pass():
    policy = moe_policy()
    batch = _batch(policy)
    mask = batch.action_mask

    def loss_of(max_tokens):
        policy.zero_grad()

        def fn(ids, attn):
            return token_logprobs_and_entropy(policy, ids, attn, 0.7)

        if max_tokens is None:
            logp, ent = fn(batch.input_ids, batch.attention_mask)
        else:
            logp, ent = chunked_forward(fn, batch.input_ids, batch.attention_mask, max_tokens)
        ((logp + ent) * mask).sum().backward()
        grads = {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}
        return logp.detach(), ent.detach(), grads

    full_logp, full_ent, full_grads = loss_of(None)
    logp, ent, grads = loss_of(24)
    assert batch.input_ids.shape[1] * 2 > 24  # the budget really splits this batch
    torch.testing.assert_close(logp * mask, full_logp * mask, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent * mask, full_ent * mask, atol=1e-5, rtol=1e-5)
    assert grads.keys() == full_grads.keys()
    for name in grads:
        torch.testing.assert_close(grads[name], full_grads[name], atol=1e-5, rtol=1e-4)


def test_single_tensor_outputs_come_back_as_a_tensor_zero_past_each_row():
    critic = ValueModel.from_policy(moe_policy())
    batch = _batch(moe_policy())
    with torch.no_grad():
        values = chunked_forward(critic, batch.input_ids, batch.attention_mask, 20)
        full = critic(batch.input_ids, batch.attention_mask)
    assert isinstance(values, torch.Tensor) and values.shape == full.shape
    real = batch.attention_mask.bool()
    torch.testing.assert_close(values[real], full[real], atol=1e-5, rtol=1e-5)
    assert torch.all(values[~real] == 0)


def test_a_learner_step_does_not_depend_on_the_pass_size():
    policy = moe_policy()
    trajectories = make_trajectories(policy, 8, seed=5)
    params = {}
    for budget in (16, 100_000):
        torch.manual_seed(0)  # the critic's value head is initialised at random
        learner = Learner(
            copy.deepcopy(policy),
            load_config("sao", overrides=[f"train.micro_batch_tokens={budget}"]),
        )
        metrics = learner.step(trajectories)
        params[budget] = (
            torch.cat([p.detach().flatten() for p in learner.policy.parameters()]),
            torch.cat([p.detach().flatten() for p in learner.critic.parameters()]),
            metrics,
        )
    (pol_a, crit_a, m_a), (pol_b, crit_b, m_b) = params[16], params[100_000]
    keys = ("actor/pg_loss", "actor/grad_norm", "actor/entropy", "actor/advantage_mean")
    keys += ("critic/vf_loss", "critic/grad_norm", "critic/values_mean")
    for key in keys:
        assert m_a[key] == pytest.approx(m_b[key], rel=1e-4, abs=1e-7), key
    # Adam's first update is about lr * sign(grad) per element, so an element whose gradient is
    # float noise around 0 may move by +lr in one run and -lr in the other; nothing moves more.
    lr_actor, lr_critic = 1e-4, 5e-4
    assert (pol_a - pol_b).abs().max() <= 2 * lr_actor + 1e-6
    assert (crit_a - crit_b).abs().max() <= 2 * lr_critic + 1e-6


def test_packing_balances_rows_and_plans_passes_within_the_budget():
    lengths = [5, 40, 12, 7, 33, 9, 100, 1]
    bins = pack_rows(lengths, 3)
    assert sorted(s for row in bins for s in row) == list(range(len(lengths)))
    assert bins == [[6], [1, 5, 0], [4, 2, 3, 7]]  # fills 100, 54, 53
    passes = plan_packing(lengths, 120)
    assert sorted(s for rows in passes for row in rows for s in row) == list(range(len(lengths)))
    for rows in passes:
        width = max(sum(lengths[s] for s in row) for row in rows)
        assert len(rows) * width <= 120 or len(rows) == 1


def test_packed_outputs_and_gradients_equal_the_padded_computation():
    policy = moe_policy()
    batch = _batch(policy, count=11)
    mask = batch.action_mask

    def loss_of(packed):
        policy.zero_grad()
        if packed:
            logp, ent = packed_forward(
                lambda ids, pos: token_logprobs_and_entropy(policy, ids, None, 0.7, pos),
                batch.input_ids,
                batch.attention_mask,
                max_tokens=80,
            )
        else:
            logp, ent = token_logprobs_and_entropy(
                policy, batch.input_ids, batch.attention_mask, 0.7
            )
        ((logp + ent) * mask).sum().backward()
        grads = {n: p.grad.clone() for n, p in policy.named_parameters()}
        return logp.detach(), ent.detach(), grads

    full_logp, full_ent, full_grads = loss_of(False)
    logp, ent, grads = loss_of(True)
    lengths = batch.attention_mask.sum(1).tolist()
    assert any(len(row) > 1 for rows in plan_packing(lengths, 80) for row in rows)  # packed
    real = batch.attention_mask.bool()
    torch.testing.assert_close(logp[real], full_logp[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent[real], full_ent[real], atol=1e-5, rtol=1e-5)
    assert torch.all(logp[~real] == 0) and torch.all(ent[:, 0] == 0)
    for name in grads:
        torch.testing.assert_close(grads[name], full_grads[name], atol=1e-5, rtol=1e-4)


def test_packed_critic_values_equal_the_padded_ones():
    critic = ValueModel.from_policy(moe_policy())
    batch = _batch(moe_policy(), count=11)
    with torch.no_grad():
        values = packed_forward(
            lambda ids, pos: critic(ids, None, pos), batch.input_ids, batch.attention_mask, 80
        )
        full = critic(batch.input_ids, batch.attention_mask)
    real = batch.attention_mask.bool()
    torch.testing.assert_close(values[real], full[real], atol=1e-5, rtol=1e-5)
    assert torch.all(values[~real] == 0)


def test_packing_computes_a_fraction_of_the_padding_of_length_sorted_passes():
    gen = torch.Generator().manual_seed(0)
    short = [int(x) for x in torch.randint(40, 200, (32,), generator=gen)]
    assert chunked_padding_frac(short, 4096) > 0.3
    assert packed_padding_frac(short, 4096) < 0.06
    # Long sequences: wide packed rows would cost more attention than their padding saves, and
    # one sequence per row (the length-sorted plan) is among the candidates.
    long = [int(x) for x in torch.randint(150, 1300, (32,), generator=gen)]
    assert packed_padding_frac(long, 4096) <= chunked_padding_frac(long, 4096)
    assert max(len(row) for rows in plan_packing(long, 4096) for row in rows) <= 2


def test_a_packed_learner_step_equals_a_padded_one():
    policy = moe_policy()
    trajectories = make_trajectories(policy, 8, seed=5)
    runs = {}
    for pack in (True, False):
        torch.manual_seed(0)  # the critic's value head is initialised at random
        learner = Learner(copy.deepcopy(policy), load_config("sao"), pack=pack)
        # Packed: the policy and critic attend segment by segment (`sao_packed`).
        assert learner.packing_cost.segment_attention == pack
        runs[pack] = learner.step(trajectories)
    for key in ("actor/pg_loss", "actor/grad_norm", "actor/entropy", "actor/ratio_mean"):
        assert runs[True][key] == pytest.approx(runs[False][key], rel=1e-4, abs=1e-7), key
    for key in ("critic/vf_loss", "critic/grad_norm", "critic/values_mean"):
        assert runs[True][key] == pytest.approx(runs[False][key], rel=1e-4, abs=1e-7), key
    assert runs[True]["perf/padding_frac"] < runs[False]["perf/padding_frac"]
