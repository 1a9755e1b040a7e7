"""Losses: hand-computed values and DIS's exact gradient behaviour."""

import math

import pytest
import torch

from sao.core.losses import aggregate, dis_policy_loss, ppo_clip_policy_loss, value_loss
from sao.core.metrics import explained_variance, masked_variance


def test_dis_hand_computed_loss_gradient_and_metrics():
    ratios = torch.tensor([[1.0, 0.5, 7.0, 2.0]])
    rollout = torch.tensor([[-1.0, -2.0, -3.0, -0.5]])
    logprobs = (rollout + ratios.log()).requires_grad_()
    adv = torch.tensor([[1.0, 1.0, -1.0, -2.0]])
    mask = torch.ones(1, 4)
    loss, metrics = dis_policy_loss(logprobs, rollout, adv, mask)
    # Window [0.7, 6]: 0.5 is below, 7 above. Loss = -(1*1 + 2*(-2)) / 4.
    assert loss.item() == pytest.approx(0.75)
    loss.backward()
    # Inside: d/dlogp = -r * A / Z; outside: exactly zero, whatever the sign of A.
    assert logprobs.grad[0].tolist() == pytest.approx([-0.25, 0.0, 0.0, 1.0])
    assert logprobs.grad[0, 1].item() == 0.0 and logprobs.grad[0, 2].item() == 0.0
    assert metrics["actor/dis_masked_low"] == 0.25
    assert metrics["actor/dis_masked_high"] == 0.25
    assert metrics["actor/ratio_mean"] == pytest.approx(2.625)


def test_dis_zero_gradient_outside_window_even_for_huge_ratios_and_padding():
    rollout = torch.tensor([[-50.0, -1.0, 0.0]])
    logprobs = torch.tensor([[0.0, -1.0, -80.0]], requires_grad=True)
    adv = torch.tensor([[3.0, 2.0, -4.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the last position is padding
    loss, _ = dis_policy_loss(logprobs, rollout, adv, mask)
    loss.backward()
    assert torch.isfinite(loss)
    assert logprobs.grad[0].tolist() == pytest.approx([0.0, -1.0, 0.0])  # -r*A/Z = -1*2/2


def test_dis_inside_window_gradient_is_ratio_times_advantage():
    torch.manual_seed(0)
    rollout = -torch.rand(2, 5)
    logprobs = (rollout + 0.2 * (torch.rand(2, 5) - 0.5)).requires_grad_()
    adv = torch.randn(2, 5)
    mask = torch.ones(2, 5)
    loss, _ = dis_policy_loss(logprobs, rollout, adv, mask)
    loss.backward()
    ratio = torch.exp(logprobs.detach() - rollout)
    assert torch.allclose(logprobs.grad, -ratio * adv / 10, atol=1e-6)


def test_seq_mean_token_mean_aggregation():
    per_token = torch.tensor([[1.0, 3.0, 0.0], [5.0, 0.0, 0.0], [7.0, 7.0, 7.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    assert aggregate(per_token, mask, "seq-mean-token-mean").item() == pytest.approx(3.5)
    assert aggregate(per_token, mask, "token-mean").item() == pytest.approx(3.0)
    with pytest.raises(ValueError, match="agg"):
        aggregate(per_token, mask, "sum")


def test_ppo_clip_hand_computed():
    old = torch.zeros(1, 3)
    logprobs = torch.tensor([[1.0, 1.5, 0.5]]).log()
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    loss, metrics = ppo_clip_policy_loss(logprobs, old, adv, torch.ones(1, 3))
    # Per token: max(-1, -1) = -1; max(-1.5, -1.28) = -1.28; max(0.5, 0.8) = 0.8.
    assert loss.item() == pytest.approx((-1 - 1.28 + 0.8) / 3)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(2 / 3)


def test_value_loss_hand_computed_with_and_without_clip():
    values = torch.tensor([[1.0, 2.0, 50.0]])
    returns = torch.tensor([[0.0, 4.0, 0.0]])
    mask = torch.tensor([[1, 1, 0]])
    loss, metrics = value_loss(values, returns, mask)
    assert loss.item() == pytest.approx(1.25) and metrics["critic/vf_loss"] == pytest.approx(1.25)
    loss, metrics = value_loss(values, returns, mask, old_values=torch.zeros(1, 3), clip=0.5)
    # Clipped values [0.5, 0.5]: max(0.5, 0.125) = 0.5 and max(2, 6.125) = 6.125.
    assert loss.item() == pytest.approx(3.3125)
    assert metrics["critic/vf_clipfrac"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="old_values"):
        value_loss(values, returns, mask, clip=0.5)


def test_explained_variance():
    returns = torch.tensor([[1.0, 2.0, 3.0, 99.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    assert explained_variance(returns, returns, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full_like(returns, 2.0), returns, mask) == pytest.approx(0.0)
    # Reversed values: residuals [-2, 0, 2] have variance 8/3 against the returns' 2/3.
    values = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    assert explained_variance(values, returns, mask) == pytest.approx(-3.0)
    assert math.isnan(explained_variance(returns, torch.ones(1, 4), mask))


def test_masked_variance_is_the_denominator_of_explained_variance():
    returns = torch.tensor([[1.0, 2.0, 3.0, 99.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    assert masked_variance(returns, mask) == pytest.approx(2.0 / 3.0)
    # (1 - EV) * Var(R) is the residuals' variance: 8/3 for the reversed values above.
    values = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    ev = explained_variance(values, returns, mask)
    assert (1.0 - ev) * masked_variance(returns, mask) == pytest.approx(8.0 / 3.0)
    assert math.isnan(masked_variance(returns, torch.tensor([[0, 1, 0, 0]])))
