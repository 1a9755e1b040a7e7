"""DIS in mini-batches (`sao_mb4`): several optimizer steps per batch, each against the rollout
log-probs, so later slices meet moved weights and the window still judges them against the
behaviour policy."""

import pytest
import torch
from test_learner import make_trajectories, moe_policy

from sao.config import ConfigError, load_config
from sao.learner import Learner
from sao.learner.actor_update import actor_update, update_rows
from sao.models.policy import token_logprobs_and_entropy
from sao.trajectory import collate

STRONG_LR = ["actor.lr=3e-2"]


def test_dis_takes_contiguous_slices_capped_at_the_batch_and_ppo_refuses_the_knob():
    assert update_rows(load_config("sao").algo, 8) == [list(range(8))]
    mb4 = load_config("sao_mb4").algo
    assert update_rows(mb4, 8) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert update_rows(mb4, 3) == [[0], [1], [2]]
    with pytest.raises(ConfigError, match="algo.dis_minibatches: only policy_loss=dis"):
        load_config("grpo", overrides=["algo.dis_minibatches=2"])


def test_later_minibatches_meet_moved_weights_and_are_judged_against_the_rollout():
    policy = moe_policy()
    config = load_config("sao_mb4", overrides=STRONG_LR)
    learner = Learner(policy, config)
    batch = collate(make_trajectories(policy, 8), 0)
    advantages = torch.where(torch.arange(8)[:, None] % 2 == 0, 1.0, -1.0).expand_as(
        batch.input_ids
    )

    def forward(part):
        return token_logprobs_and_entropy(policy, part.input_ids, part.attention_mask, 1.0)

    result = actor_update(
        forward,
        batch,
        advantages,
        learner.actor_optimizer,
        learner.policy_loss,
        config.algo,
        1.0,
        update_rows(config.algo, 8),
        learner.ranks,
    )
    ratios = [m["actor/ratio_mean"] for m in result.per_update]
    assert len(ratios) == 4 and result.metrics["actor/dis_updates"] == 4.0
    # The first slice is trained by the weights that sampled it; the later ones are not.
    assert ratios[0] == pytest.approx(1.0, abs=1e-5)
    assert all(abs(r - 1.0) > 1e-3 for r in ratios[1:]), ratios
    assert int(learner.actor_optimizer.state[policy.lm_head.weight]["step"]) == 4


def test_a_sao_mb4_step_reports_its_four_updates_and_one_update_is_the_default():
    policy = moe_policy()
    metrics = Learner(policy, load_config("sao_mb4")).step(make_trajectories(policy, 8))
    assert metrics["actor/dis_updates"] == 4.0
    assert 0.0 <= metrics["actor/dis_masked_low"] <= 1.0
    policy = moe_policy()
    learner = Learner(policy, load_config("sao"))
    assert learner.step(make_trajectories(policy, 8))["actor/dis_updates"] == 1.0
    assert int(learner.actor_optimizer.state[policy.lm_head.weight]["step"]) == 1
