"""Advantage estimators: hand-computed cases and the skip-observation invariances."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sao.core.advantages import (
    RunningMeanBaseline,
    adaptive_lambda,
    group_advantages,
    move_rewards_to_actions,
    step_gae,
    token_gae,
    whiten,
)


def textbook_gae(rewards, values, gamma, lam):
    """The plain GAE loop on a list: terminal after the last element."""
    advantages, next_value, next_adv = [0.0] * len(rewards), 0.0, 0.0
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * next_value - values[t]
        next_adv = delta + gamma * lam * next_adv
        advantages[t] = next_adv
        next_value = values[t]
    return advantages, [a + v for a, v in zip(advantages, values, strict=True)]


# [prompt, a, a, obs, a]: the observation carries a huge value and a reward of 0.5.
MASK = torch.tensor([[0.0, 1, 1, 0, 1]])
VALUES = torch.tensor([[9.0, 1, 2, 100, 3]])
REWARDS = torch.tensor([[0.0, 0, 0, 0.5, 1]])


def test_token_gae_hand_computed_monte_carlo():
    adv, ret = token_gae(REWARDS, VALUES, MASK, gamma=1.0, lam=1.0)
    # Action rewards after moving the observation's 0.5 back: [0, 0.5, 1]; values [1, 2, 3].
    # A_4 = 1 - 3 = -2; A_2 = 0.5 + 3 - 2 - 2 = -0.5; A_1 = 0 + 2 - 1 - 0.5 = 0.5.
    assert adv.tolist() == [[0.0, 0.5, -0.5, 0.0, -2.0]]
    assert ret.tolist() == [[0.0, 1.5, 1.5, 0.0, 1.0]]


def test_token_gae_hand_computed_discounted():
    adv, ret = token_gae(REWARDS, VALUES, MASK, gamma=0.5, lam=0.5)
    # delta_4 = -2; delta_2 = 0.5 + 1.5 - 2 = 0 -> A_2 = 0.25 * -2; delta_1 = 1 - 1 = 0 -> A_1 = 0.25 * -0.5
    assert adv.tolist() == [[0.0, -0.125, -0.5, 0.0, -2.0]]
    assert ret.tolist() == [[0.0, 0.875, 1.5, 0.0, 1.0]]


def test_rewards_move_to_preceding_action_and_prompt_reward_to_first_action():
    rewards = torch.tensor([[0.25, 0, 0, 0.5, 1]])
    assert move_rewards_to_actions(rewards, MASK).tolist() == [[0.0, 0.25, 0.5, 0.0, 1.0]]


def test_padding_rows_and_per_row_lambda():
    rewards = torch.tensor([[0.0, 0, 1, 0], [0.0, 1, 0, 0]])
    values = torch.tensor([[0.0, 0.5, 0.5, 7], [0.0, 0.25, 7, 7]])
    mask = torch.tensor([[0.0, 1, 1, 0], [0.0, 1, 0, 0]])
    adv, _ = token_gae(rewards, values, mask, gamma=1.0, lam=torch.tensor([0.0, 1.0]))
    # Row 0, lam 0: A_2 = 1 - 0.5, A_1 = 0.5 - 0.5. Row 1: A_1 = 1 - 0.25.
    assert adv.tolist() == [[0.0, 0.0, 0.5, 0.0], [0.0, 0.75, 0.0, 0.0]]


masks = st.lists(st.integers(0, 1), min_size=2, max_size=24).map(lambda m: [0] + m[1:])


@settings(max_examples=150, deadline=None)
@given(
    mask=masks,
    data=st.data(),
    gamma=st.floats(0.5, 1.0),
    lam=st.floats(0.0, 1.0),
)
def test_token_gae_equals_plain_gae_with_observations_cut_out(mask, data, gamma, lam):
    if not any(mask):
        mask[-1] = 1
    n = len(mask)
    floats = st.floats(-3, 3, allow_nan=False, width=32)
    values = data.draw(st.lists(floats, min_size=n, max_size=n))
    rewards = [data.draw(floats) if m else 0.0 for m in mask]
    adv, ret = token_gae(
        torch.tensor([rewards]), torch.tensor([values]), torch.tensor([mask]), gamma, lam
    )
    idx = [i for i, m in enumerate(mask) if m]
    ref_adv, ref_ret = textbook_gae([rewards[i] for i in idx], [values[i] for i in idx], gamma, lam)
    assert adv[0, idx].tolist() == pytest.approx(ref_adv, abs=1e-4)
    assert ret[0, idx].tolist() == pytest.approx(ref_ret, abs=1e-4)
    off = [i for i, m in enumerate(mask) if not m]
    assert adv[0, off].abs().sum() == 0 and ret[0, off].abs().sum() == 0


@settings(max_examples=100, deadline=None)
@given(mask=masks, data=st.data())
def test_values_and_rewards_on_observations_change_nothing_downstream(mask, data):
    if not any(mask):
        mask[-1] = 1
    n = len(mask)
    floats = st.floats(-3, 3, allow_nan=False, width=32)
    values = torch.tensor([data.draw(st.lists(floats, min_size=n, max_size=n))])
    rewards = torch.tensor([[data.draw(floats) if m else 0.0 for m in mask]])
    noise = torch.tensor([data.draw(st.lists(floats, min_size=n, max_size=n))])
    m = torch.tensor([mask], dtype=torch.float)
    adv, ret = token_gae(rewards, values, m, 1.0, 0.9)
    adv2, ret2 = token_gae(rewards, values + noise * (1 - m), m, 1.0, 0.9)
    assert torch.equal(adv, adv2) and torch.equal(ret, ret2)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n=st.integers(1, 20), gamma=st.floats(0.5, 1.0), lam=st.floats(0, 1))
def test_no_observation_tokens_equals_textbook_loop(data, n, gamma, lam):
    floats = st.floats(-3, 3, allow_nan=False, width=32)
    values = data.draw(st.lists(floats, min_size=n, max_size=n))
    rewards = data.draw(st.lists(floats, min_size=n, max_size=n))
    adv, ret = token_gae(
        torch.tensor([rewards]), torch.tensor([values]), torch.ones(1, n), gamma, lam
    )
    ref_adv, ref_ret = textbook_gae(rewards, values, gamma, lam)
    assert adv[0].tolist() == pytest.approx(ref_adv, abs=1e-4)
    assert ret[0].tolist() == pytest.approx(ref_ret, abs=1e-4)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n_steps=st.integers(1, 10), step_value=st.sampled_from(["mean", "last"]))
def test_step_gae_with_one_token_steps_equals_token_gae(data, n_steps, step_value):
    mask = [0] + [1, 0] * n_steps  # every action is a single token between observations
    n = len(mask)
    floats = st.floats(-3, 3, allow_nan=False, width=32)
    values = torch.tensor([data.draw(st.lists(floats, min_size=n, max_size=n))])
    rewards = torch.tensor([data.draw(st.lists(floats, min_size=n, max_size=n))])
    m = torch.tensor([mask], dtype=torch.float)
    step = step_gae(rewards, values, m, 0.9, 0.8, step_value=step_value)
    token = token_gae(rewards, values, m, 0.9, 0.8)
    assert torch.allclose(step[0], token[0], atol=1e-5)
    assert torch.allclose(step[1], token[1], atol=1e-5)


def test_step_gae_hand_computed():
    # [prompt, a, a, obs, a, a]; steps (1,3) and (4,6); reward 1 at the end.
    mask = torch.tensor([[0.0, 1, 1, 0, 1, 1]])
    values = torch.tensor([[0.0, 0.2, 0.4, 9, 0.6, 1.0]])
    rewards = torch.tensor([[0.0, 0, 0, 0, 0, 1]])
    adv, ret = step_gae(rewards, values, mask, 1.0, 1.0, step_value="mean")
    # Step values 0.3 and 0.8: A_2 = 1 - 0.8 = 0.2; A_1 = 0 + 0.8 - 0.3 + 0.2 = 0.7.
    assert adv[0].tolist() == pytest.approx([0.0, 0.7, 0.7, 0.0, 0.2, 0.2])
    assert ret[0].tolist() == pytest.approx([0.0, 1.0, 1.0, 0.0, 1.0, 1.0])
    adv, _ = step_gae(rewards, values, mask, 1.0, 1.0, step_value="last")
    # Step values 0.4 and 1.0: A_2 = 0; A_1 = 1.0 - 0.4 = 0.6.
    assert adv[0].tolist() == pytest.approx([0.0, 0.6, 0.6, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="step_value"):
        step_gae(rewards, values, mask, step_value="first")


def test_group_advantages_hand_computed():
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1, 2])
    adv = group_advantages(scores, groups, eps=0.0)
    # Group 0: mean 0.5, unbiased std sqrt(0.5); group 1 has no spread; group 2 is alone.
    s = 0.5 / math.sqrt(0.5)
    assert adv.tolist() == pytest.approx([s, -s, 0.0, 0.0, 0.0])
    assert group_advantages(scores, groups, normalize_std=False).tolist() == pytest.approx(
        [0.5, -0.5, 0.0, 0.0, 0.0]
    )
    with pytest.raises(ValueError, match="group_ids"):
        group_advantages(scores, groups[:3])


def test_running_mean_uses_only_scores_seen_before():
    baseline = RunningMeanBaseline(window=3)
    assert baseline.advantages(torch.tensor([1.0, 0.0])).tolist() == [1.0, 0.0]
    assert baseline.advantages(torch.tensor([1.0])).tolist() == [0.5]
    # History is now [1, 0, 1]; the window of 3 then drops the oldest.
    assert baseline.advantages(torch.tensor([0.0])).tolist() == pytest.approx([-2 / 3])
    assert baseline.mean == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="window"):
        RunningMeanBaseline(0)


def test_adaptive_lambda_and_whiten():
    assert adaptive_lambda(100, alpha=0.05).item() == pytest.approx(0.8)
    assert adaptive_lambda(torch.tensor([10, 1000]), 0.05).tolist() == pytest.approx([0.0, 0.98])
    x = torch.tensor([[1.0, 2.0, 99.0], [3.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    w = whiten(x, mask)
    assert w[mask > 0].mean().item() == pytest.approx(0.0, abs=1e-6)
    assert w[mask > 0].pow(2).mean().item() == pytest.approx(1.0, abs=1e-5)
    assert w[0, 2].item() == 0.0
