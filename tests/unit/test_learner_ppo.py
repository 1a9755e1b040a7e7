"""PPO-clip baselines: mini-batch updates against old log-probs taken once, so the clip acts;
one mini-batch reproduces the single-update step exactly."""

import pytest
import torch
from test_learner import make_trajectories, moe_policy, snapshot

from sao.config import ConfigError, load_config
from sao.core.losses import ppo_clip_policy_loss
from sao.learner import Learner, apply_gradients
from sao.learner.actor_update import actor_update, ppo_schedule, update_rows
from sao.models.policy import token_logprobs_and_entropy
from sao.trajectory import collate

STRONG_LR = ["actor.lr=3e-2"]


def test_ppo_presets_take_four_minibatches_and_dis_refuses_them():
    for preset in ("grpo", "vapo_nodis"):
        algo = load_config(preset).algo
        assert (algo.policy_loss, algo.ppo_minibatches, algo.ppo_epochs) == ("ppo_clip", 4, 1)
    with pytest.raises(ConfigError, match="only policy_loss=ppo_clip takes mini-batches"):
        load_config("sao", overrides=["algo.ppo_minibatches=2"])


def test_schedule_is_contiguous_minibatches_repeated_per_epoch_and_capped_at_the_batch():
    algo = load_config("vapo_nodis", overrides=["algo.ppo_epochs=2"]).algo
    schedule = [rows.tolist() for rows in ppo_schedule(algo, 8)]
    assert schedule == [[0, 1], [2, 3], [4, 5], [6, 7]] * 2
    assert [rows.tolist() for rows in ppo_schedule(algo, 3)] == [[0], [1], [2]] * 2
    unset = load_config("vapo_nodis", overrides=["algo.ppo_minibatches=null"]).algo
    assert len(ppo_schedule(unset, 8)) == 4  # the documented default


def test_minibatch_updates_use_the_old_log_probs_so_the_ratio_moves_and_the_clip_acts():
    policy = moe_policy()
    config = load_config("vapo_nodis", overrides=STRONG_LR)
    learner = Learner(policy, config)
    trajectories = make_trajectories(policy, 8)
    batch = collate(trajectories, 0)
    # Advantages of both signs, so the clip-higher and clip-lower sides both have work.
    advantages = torch.where(torch.arange(8)[:, None] % 2 == 0, 1.0, -1.0).expand_as(
        batch.input_ids
    )

    def forward(part):
        return token_logprobs_and_entropy(policy, part.input_ids, part.attention_mask, 1.0)

    updates = update_rows(config.algo, 8)
    optimizer = learner.actor_optimizer
    result = actor_update(
        forward,
        batch,
        advantages,
        optimizer,
        learner.policy_loss,
        config.algo,
        1.0,
        updates,
        learner.ranks,
    )
    ratios = [m["actor/ratio_mean"] for m in result.per_update]
    assert len(ratios) == 4
    # The first update sees the weights the old log-probs came from; the later ones do not.
    assert ratios[0] == pytest.approx(1.0, abs=1e-5)
    assert all(abs(r - 1.0) > 1e-3 for r in ratios[1:]), ratios
    assert result.per_update[0]["actor/pg_clipfrac"] == 0.0
    assert result.metrics["actor/pg_clipfrac"] > 0.0
    assert result.metrics["actor/ppo_updates"] == 4.0


def test_a_learner_step_of_vapo_nodis_reports_a_nonzero_clip_fraction():
    policy = moe_policy()
    learner = Learner(policy, load_config("vapo_nodis", overrides=STRONG_LR))
    metrics = learner.step(make_trajectories(policy, 8))
    assert metrics["actor/ppo_updates"] == 4.0
    assert metrics["actor/pg_clipfrac"] > 0.0
    assert int(learner.actor_optimizer.state[policy.lm_head.weight]["step"]) == 4
    # Trajectories sampled by these very weights: nothing is off the DIS window yet.
    assert metrics["actor/dis_would_mask_low"] == 0.0
    assert metrics["actor/dis_would_mask_high"] == 0.0
    assert metrics["actor/rollout_ratio_mean"] == pytest.approx(1.0, abs=1e-5)


def test_one_minibatch_reproduces_the_single_update_against_detached_log_probs_exactly():
    overrides = [*STRONG_LR, "algo.ppo_minibatches=1"]
    config = load_config("vapo_nodis", overrides=overrides)
    trajectories = make_trajectories(moe_policy(), 6)
    learner = Learner(moe_policy(), config)
    got = learner.step(trajectories)

    # The single update written out: one forward, old log-probs = the same forward, detached.
    reference = Learner(moe_policy(), config)
    batch = collate(trajectories, 0)
    values = reference._forward(reference.critic, batch).detach()
    share = reference.ranks.share([len(t) for t in trajectories], [list(range(6))])
    advantages, _ = reference._advantages(batch, batch, share, trajectories, values)
    logprobs, _ = reference._policy_forward(batch)
    loss, expected = ppo_clip_policy_loss(
        logprobs, logprobs.detach(), advantages, batch.action_mask, eps_low=0.2, eps_high=0.28
    )
    expected["actor/grad_norm"], _ = apply_gradients(reference.actor_optimizer, loss, 1.0)

    assert got["actor/ppo_updates"] == 1.0 and got["actor/pg_clipfrac"] == 0.0
    assert {key: got[key] for key in expected} == expected
    after, reference_after = snapshot(learner.policy), snapshot(reference.policy)
    assert all(torch.equal(after[n], reference_after[n]) for n in after)
