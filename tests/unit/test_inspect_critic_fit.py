"""`sao inspect critic-ceiling fitted`: the prompt-only share of the return variance, and explained variance
at the first and last action token."""

import random

import pytest

from sao.analysis import critic_fit as critic_ceiling


def test_tasks_that_always_or_never_succeed_put_all_the_variance_between_tasks():
    rewards = [[1, 1, 1, 1], [0, 0, 0, 0]] * 500
    assert critic_ceiling.between_task_share(rewards) == pytest.approx(1.0, abs=0.01)


def test_tasks_of_equal_success_rate_leave_nothing_between_them():
    rng = random.Random(0)
    rewards = [[float(rng.random() < 0.5) for _ in range(4)] for _ in range(4000)]
    assert abs(critic_ceiling.between_task_share(rewards)) < 0.03


def test_the_share_is_unbiased_for_known_task_rates():
    # p is 0.2 or 0.8 with equal odds: Var(p) = 0.09, Var(R) = 0.25, share 0.36.
    rng = random.Random(1)
    rewards = []
    for i in range(6000):
        p = 0.2 if i % 2 else 0.8
        rewards.append([float(rng.random() < p) for _ in range(3)])
    assert critic_ceiling.between_task_share(rewards) == pytest.approx(0.36, abs=0.03)


def test_a_single_sample_per_task_is_refused():
    with pytest.raises(ValueError, match="2 or more samples"):
        critic_ceiling.between_task_share([[1.0], [0.0]])
