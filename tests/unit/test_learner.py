"""Learner step: what trains and what stays frozen, K critic steps, skipped non-finite steps,
every preset family, metric values, resume."""

import io
import math

import pytest
import torch
from transformers import Qwen3ForCausalLM, Qwen3MoeForCausalLM

from fixtures_models import random_qwen3_dense, random_qwen3_moe
from sao.config import PRESETS, load_config
from sao.core.metrics import explained_variance
from sao.learner import Learner, apply_gradients, build_optimizer, group_id_tensor
from sao.learner.chunking import packed_padding_frac
from sao.models.critic import ValueModel
from sao.models.policy import token_logprobs
from sao.trajectory import Trajectory, collate

VOCAB = 100
FAST_LR = ["actor.lr=1e-3", "critic.optim.lr=1e-3"]


def moe_policy(seed: int = 0) -> Qwen3MoeForCausalLM:
    return random_qwen3_moe(VOCAB, hidden_size=64, seed=seed)


def dense_policy(seed: int = 0) -> Qwen3ForCausalLM:
    return random_qwen3_dense(VOCAB, hidden_size=64, seed=seed)


def make_trajectories(
    policy: torch.nn.Module,
    count: int,
    seed: int = 0,
    temperature: float = 1.0,
    versions: list[int] | None = None,
    group_size: int = 1,
) -> list[Trajectory]:
    """`prompt, action, observation, action` with the model's own log-probs, rewards 0/1/0/1..."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(count):
        spans = ((3, 6), (3, 7), (2, 4), (2, 6))
        p, a0, o, a1 = (int(torch.randint(lo, hi, (1,), generator=gen)) for lo, hi in spans)
        n = p + a0 + o + a1
        ids = torch.randint(1, VOCAB, (n,), generator=gen)
        mask = [0] * p + [1] * a0 + [0] * o + [1] * a1
        with torch.no_grad():
            logprobs = token_logprobs(policy, ids[None], torch.ones(1, n), temperature)[0]
        version = versions[i] if versions else 0
        out.append(
            Trajectory(
                token_ids=ids.tolist(),
                action_mask=mask,
                rollout_logprobs=[
                    float(lp) if m else 0.0 for lp, m in zip(logprobs, mask, strict=True)
                ],
                policy_versions=[version if m else -1 for m in mask],
                reward=float(i % 2),
                turn_spans=((p, p + a0), (p + a0 + o, n)),
                metadata={"group_id": i // group_size},
            )
        )
    return out


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def changed(before: dict[str, torch.Tensor], model: torch.nn.Module) -> set[str]:
    return {name for name, p in model.named_parameters() if not torch.equal(before[name], p)}


def is_attention(name: str) -> bool:
    return ".self_attn." in name


@pytest.mark.parametrize("build", [moe_policy, dense_policy], ids=["qwen3_moe", "qwen3_dense"])
def test_sao_step_keeps_critic_attention_frozen_and_trains_the_rest(build):
    policy = build()
    learner = Learner(policy, load_config("sao", overrides=FAST_LR))
    trajectories = make_trajectories(policy, 4)
    critic_before, policy_before = snapshot(learner.critic), snapshot(policy)
    metrics = learner.step(trajectories)

    attention = {n for n, _ in learner.critic.named_parameters() if is_attention(n)}
    assert set(learner.frozen_critic_parameters) == attention
    assert len(attention) == 12  # 2 layers x q/k/v/o projections + q/k norms
    critic_changed = changed(critic_before, learner.critic)
    assert not critic_changed & attention  # bit-for-bit unchanged
    others = set(critic_before) - attention
    assert critic_changed == others
    policy_changed = changed(policy_before, policy)
    assert "lm_head.weight" in policy_changed
    assert any(is_attention(n) for n in policy_changed)  # the policy's attention is not frozen
    assert learner.version == 1
    assert metrics["critic/skipped_steps"] == 0 and metrics["actor/skipped_steps"] == 0


def test_full_critic_preset_trains_attention_too():
    policy = moe_policy()
    learner = Learner(policy, load_config("sao_full_critic", overrides=FAST_LR))
    before = snapshot(learner.critic)
    learner.step(make_trajectories(policy, 4))
    assert learner.frozen_critic_parameters == []
    assert changed(before, learner.critic) == set(before)


@pytest.mark.parametrize("k", [1, 2])
def test_critic_takes_k_optimizer_steps_per_policy_step(k):
    policy = moe_policy()
    learner = Learner(policy, load_config("sao", overrides=[f"critic.k_updates={k}"]))
    learner.step(make_trajectories(policy, 3))
    head = learner.critic.value_head.weight
    assert int(learner.critic_optimizer.state[head]["step"]) == k
    assert int(learner.actor_optimizer.state[policy.lm_head.weight]["step"]) == 1


def test_fixed_critic_preset_never_updates_the_critic_but_its_values_still_count():
    policy = moe_policy()
    learner = Learner(policy, load_config("sao_fixed_critic", overrides=FAST_LR))
    policy_before, critic_before = snapshot(policy), snapshot(learner.critic)
    metrics = learner.step(make_trajectories(policy, 3))
    assert changed(critic_before, learner.critic) == set()
    assert changed(policy_before, policy) != set()
    assert learner.critic_optimizer.state == {}
    assert math.isfinite(metrics["critic/vf_explained_var"])
    assert "critic/vf_loss" not in metrics


def test_live_critic_warmup_with_k0_measures_but_leaves_the_critic_alone():
    from sao.serve.learning import critic_warmup_step

    policy = moe_policy()
    learner = Learner(policy, load_config("sao_fixed_critic", overrides=FAST_LR))
    before = snapshot(learner.critic)
    metrics = critic_warmup_step(learner, make_trajectories(policy, 3))
    assert changed(before, learner.critic) == set()
    assert math.isnan(metrics["critic/vf_loss"])
    assert math.isfinite(metrics["critic/vf_explained_var"])


def test_first_step_ratio_is_one_at_the_rollout_temperature():
    policy = moe_policy()
    config = load_config("sao", overrides=["rollout.temperature=0.7"])
    metrics = Learner(policy, config).step(make_trajectories(policy, 4, temperature=0.7))
    assert metrics["actor/ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["actor/dis_masked_low"] == 0.0 and metrics["actor/dis_masked_high"] == 0.0


def test_nan_actor_gradient_skips_and_counts_the_step_and_changes_nothing():
    policy = moe_policy()
    learner = Learner(policy, load_config("sao", overrides=FAST_LR))
    policy.lm_head.weight.register_hook(lambda grad: grad * math.nan)
    policy_before, critic_before = snapshot(policy), snapshot(learner.critic)
    metrics = learner.step(make_trajectories(policy, 3))
    assert changed(policy_before, policy) == set()
    assert metrics["actor/skipped_steps"] == 1 and math.isnan(metrics["actor/grad_norm"])
    assert learner.actor_optimizer.state == {}  # Adam's moments were never touched
    assert all(p.grad is None for p in policy.parameters())
    # The critic's update is independent and still applied.
    assert metrics["critic/skipped_steps"] == 0 and changed(critic_before, learner.critic)
    second = learner.step(make_trajectories(policy, 3, seed=1))
    assert second["actor/skipped_steps"] == 2  # a running count


def test_nan_critic_gradient_skips_all_k_critic_steps():
    policy = moe_policy()
    learner = Learner(policy, load_config("sao", overrides=FAST_LR))
    learner.critic.value_head.weight.register_hook(lambda grad: grad * math.nan)
    policy_before, critic_before = snapshot(policy), snapshot(learner.critic)
    metrics = learner.step(make_trajectories(policy, 3))
    assert metrics["critic/skipped_steps"] == 2  # K = 2, both skipped
    assert changed(critic_before, learner.critic) == set()
    assert metrics["actor/skipped_steps"] == 0 and changed(policy_before, policy)


def test_nan_loss_is_never_applied():
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = build_optimizer([weight], load_config().actor)
    grad_norm, applied = apply_gradients(optimizer, (weight * math.nan).sum(), 1.0)
    assert not applied and math.isnan(grad_norm)
    assert torch.equal(weight.detach(), torch.ones(3)) and weight.grad is None
    grad_norm, applied = apply_gradients(optimizer, (weight * 2.0).sum(), 1.0)
    assert applied and grad_norm == pytest.approx(2.0 * math.sqrt(3))


PRESET_KEYS = {
    "dis": {"actor/dis_masked_low", "actor/dis_masked_high", "actor/dis_updates"},
    "ppo_clip": {
        "actor/pg_clipfrac",
        "actor/rollout_ratio_mean",
        "actor/ppo_updates",
        "actor/dis_would_mask_low",
        "actor/dis_would_mask_high",
    },
}
CRITIC_KEYS = {"critic/vf_explained_var", "critic/returns_var"}
CRITIC_UPDATE_KEYS = {
    "critic/vf_loss",
    "critic/grad_norm",
    "critic/grad_norm_shared",
    "critic/grad_norm_all",
}
COMMON_KEYS = {
    "actor/pg_loss",
    "actor/ratio_mean",
    "actor/grad_norm",
    "actor/entropy",
    "perf/padding_frac",
    "perf/batch_padding_frac",
    "rollout/reward_mean",
    "rollout/staleness_mean",
    "rollout/staleness_max",
    "rollout/turns_mean",
}


OPTIONAL_FEATURES = [
    "algo.adaptive_lambda_alpha=0.05",
    "algo.whiten_advantages=true",
    "critic.value_clip=0.2",
]
PRESET_CASES = [(name, []) for name in sorted(PRESETS)] + [("sao", OPTIONAL_FEATURES)]


@pytest.mark.parametrize(("preset", "overrides"), PRESET_CASES)
def test_every_preset_runs_a_step_with_finite_metrics(preset, overrides):
    config = load_config(preset, overrides=overrides)
    policy = moe_policy()
    trajectories = make_trajectories(policy, 8, group_size=4)  # two groups, rewards 0, 1, 0, 1
    metrics = Learner(policy, config).step(trajectories)
    expected = COMMON_KEYS | PRESET_KEYS[config.algo.policy_loss]
    expected |= CRITIC_KEYS if config.critic.enabled else set()
    expected |= CRITIC_UPDATE_KEYS if config.critic.enabled and config.critic.k_updates else set()
    assert expected <= set(metrics)
    assert config.critic.enabled or not any(k.startswith("critic/") for k in metrics)
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    assert metrics["rollout/reward_mean"] == 0.5 and metrics["rollout/turns_mean"] == 2.0


def test_critic_metrics_use_the_values_before_the_update_over_action_tokens():
    policy = moe_policy()
    trajectories = make_trajectories(policy, 6)  # rewards 0, 1, 0, 1, 0, 1 at the last token
    learner = Learner(policy, load_config("sao"))
    batch = collate(trajectories)
    with torch.no_grad():
        before = learner.critic(batch.input_ids, batch.attention_mask)
    metrics = learner.step(trajectories)
    # Outcome rewards with gamma 1: every action token's return is its trajectory's reward, so
    # the token-weighted Var(R) is p(1 - p), p the share of action tokens in rewarded rows.
    tokens = torch.tensor([t.num_action_tokens for t in trajectories], dtype=torch.float)
    p = float(tokens[1::2].sum() / tokens.sum())
    assert metrics["critic/returns_var"] == pytest.approx(p * (1 - p), rel=1e-6)
    returns = batch.rewards.flip(1).cumsum(1).flip(1) * batch.action_mask
    expected = explained_variance(before, returns, batch.action_mask)
    assert metrics["critic/vf_explained_var"] == pytest.approx(expected, rel=1e-4, abs=1e-6)
    with torch.no_grad():
        after = learner.critic(batch.input_ids, batch.attention_mask)
    assert explained_variance(after, returns, batch.action_mask) != pytest.approx(expected)


def test_grpo_loss_is_minus_the_token_mean_of_group_advantages():
    policy = moe_policy()
    trajectories = make_trajectories(policy, 4, group_size=4)  # one group, rewards 0, 1, 0, 1
    config = load_config("grpo", overrides=["algo.ppo_minibatches=1"])
    metrics = Learner(policy, config).step(trajectories)
    # (R - 0.5) / (std 0.5774 + 1e-6) = -+0.8660; with ratio 1 PPO's loss is -mean_t A_t.
    advantage = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    counts = [t.num_action_tokens for t in trajectories]
    expected = -sum(
        c * (advantage if t.reward else -advantage)
        for c, t in zip(counts, trajectories, strict=True)
    ) / sum(counts)
    assert metrics["actor/pg_loss"] == pytest.approx(expected, rel=1e-5)
    assert metrics["actor/pg_clipfrac"] == 0.0


@pytest.mark.parametrize("preset", ["grpo_dis", "running_mean"])
def test_sequence_level_advantages_see_the_turn_rewards(preset: str):
    policy = moe_policy()
    same = [
        Trajectory(**{**t.to_dict(), "reward": 1.0})
        for t in make_trajectories(policy, 4, group_size=4)
    ]
    # Equal outcomes: a group (or a first step's running mean of 1s) leaves nothing to learn,
    # until one trajectory's second turn carries an action reward.
    costed = [Trajectory(**{**same[0].to_dict(), "turn_rewards": (0.0, -0.2)}), *same[1:]]
    counts = [t.num_action_tokens for t in same]
    flat = Learner(policy, load_config(preset)).step(same)
    moved = Learner(policy, load_config(preset)).step(costed)
    if preset == "grpo_dis":
        assert flat["actor/grad_norm"] == 0.0
        assert moved["actor/grad_norm"] > 0.0
        # Returns 0.8, 1, 1, 1 against their mean 0.95, over the std 0.1: -1.5, then 0.5 each.
        advantages = [-1.5, 0.5, 0.5, 0.5]
    else:
        # No history yet: the advantage is the return itself.
        advantages = [0.8, 1.0, 1.0, 1.0]
    expected = sum(a * c for a, c in zip(advantages, counts, strict=True)) / sum(counts)
    assert moved["actor/advantage_mean"] == pytest.approx(expected, rel=1e-4)


def test_group_ids_come_from_metadata_and_must_be_present():
    trajectories = make_trajectories(moe_policy(), 3)
    relabelled = [
        Trajectory(**{**t.to_dict(), "metadata": {"group_id": g}})
        for t, g in zip(trajectories, ["b", "a", "b"], strict=True)
    ]
    assert group_id_tensor(relabelled).tolist() == [0, 1, 0]
    missing = [Trajectory(**{**trajectories[0].to_dict(), "metadata": {}})]
    with pytest.raises(ValueError, match="trajectory 0 has no metadata\\['group_id'\\]"):
        group_id_tensor(missing)


def test_running_mean_baseline_carries_over_between_steps():
    policy = moe_policy()
    learner = Learner(policy, load_config("running_mean"))
    first = make_trajectories(policy, 4)
    counts = [t.num_action_tokens for t in first]
    metrics = learner.step(first)
    # No history yet: advantages are the rewards; token-weighted mean of rewards 0, 1, 0, 1.
    assert metrics["actor/advantage_mean"] == pytest.approx((counts[1] + counts[3]) / sum(counts))
    metrics = learner.step(first)
    # The baseline is now the mean of the first batch's rewards, 0.5.
    expected = (0.5 * (counts[1] + counts[3]) - 0.5 * (counts[0] + counts[2])) / sum(counts)
    assert metrics["actor/advantage_mean"] == pytest.approx(expected)


@pytest.mark.parametrize("whiten", [False, True])
def test_advantage_raw_std_is_the_estimators_scale_before_whitening(whiten: bool):
    policy = moe_policy()
    config = load_config("running_mean", overrides=[f"algo.whiten_advantages={whiten}"])
    trajectories = make_trajectories(policy, 4)
    counts = [t.num_action_tokens for t in trajectories]
    metrics = Learner(policy, config).step(trajectories)
    # No history yet: each token's advantage is its trajectory's reward, 0, 1, 0, 1.
    share = (counts[1] + counts[3]) / sum(counts)
    assert metrics["actor/advantage_raw_std"] == pytest.approx(math.sqrt(share * (1 - share)))
    assert metrics["actor/advantage_mean"] == pytest.approx(0.0 if whiten else share, abs=1e-6)


def test_rollout_metrics_measure_staleness_against_the_version_before_the_step():
    policy = moe_policy()
    learner = Learner(policy, load_config("sao"))
    learner.version = 3
    trajectories = make_trajectories(policy, 2, versions=[1, 3])
    metrics = learner.step(trajectories)
    assert metrics["rollout/staleness_mean"] == 1.0 and metrics["rollout/staleness_max"] == 2.0
    lengths = [len(t) for t in trajectories]
    assert metrics["perf/batch_padding_frac"] == pytest.approx(
        1 - sum(lengths) / (2 * max(lengths))
    )
    assert metrics["perf/padding_frac"] == pytest.approx(packed_padding_frac(lengths, 4096))
    assert learner.version == 4


def test_state_dict_resumes_to_identical_training():
    config = load_config("sao", overrides=FAST_LR)
    batches = [make_trajectories(moe_policy(), 3, seed=s) for s in (0, 1)]
    original = Learner(moe_policy(seed=0), config)
    original.step(batches[0])
    resumed = Learner(moe_policy(seed=5), config)
    resumed.load_state_dict(original.state_dict())
    assert resumed.version == 1
    expected, got = original.step(batches[1]), resumed.step(batches[1])
    assert got == expected
    for name in ("policy", "critic"):
        pairs = zip(
            getattr(original, name).parameters(), getattr(resumed, name).parameters(), strict=True
        )
        assert all(torch.equal(a, b) for a, b in pairs)


def test_state_dict_is_a_snapshot_that_later_steps_leave_alone():
    config = load_config("sao", overrides=FAST_LR)
    policy = moe_policy()
    learner = Learner(policy, config)
    learner.step(make_trajectories(policy, 3, seed=0))
    state = learner.state_dict()
    kept = {part: {k: v.clone() for k, v in state[part].items()} for part in ("policy", "critic")}
    moments = [
        v["exp_avg"].clone() for v in state["actor_optimizer"]["state"].values() if "exp_avg" in v
    ]
    learner.step(make_trajectories(policy, 3, seed=1))
    for part, tensors in kept.items():
        assert all(torch.equal(tensors[k], state[part][k]) for k in tensors)
        assert any(
            not torch.equal(state[part][k], p) for k, p in getattr(learner, part).named_parameters()
        )
    after = [v["exp_avg"] for v in state["actor_optimizer"]["state"].values() if "exp_avg" in v]
    assert moments and all(torch.equal(a, b) for a, b in zip(moments, after, strict=True))
    live = learner.actor_optimizer.state_dict()["state"]
    assert any(
        not torch.equal(m, v["exp_avg"]) for m, v in zip(moments, live.values(), strict=False)
    )


def test_a_live_state_dict_holds_the_learners_own_tensors_and_resumes_the_same():
    config = load_config("sao", overrides=FAST_LR)
    batches = [make_trajectories(moe_policy(), 3, seed=s) for s in (0, 1)]
    original = Learner(moe_policy(seed=0), config)
    original.step(batches[0])
    live = original.state_dict(snapshot=False)
    weight = original.policy.lm_head.weight
    assert live["policy"]["lm_head.weight"].data_ptr() == weight.data_ptr()
    moments = original.actor_optimizer.state[weight]["exp_avg"]
    assert any(v.get("exp_avg") is moments for v in live["actor_optimizer"]["state"].values())
    written = io.BytesIO()  # what it is for: written out before the next step
    torch.save(live, written)
    written.seek(0)
    resumed = Learner(moe_policy(seed=5), config)
    resumed.load_state_dict(torch.load(written, weights_only=False))
    assert resumed.step(batches[1]) == original.step(batches[1])


def test_state_dict_rejects_a_state_without_the_critic_this_learner_has():
    policy = moe_policy()
    state = Learner(policy, load_config("running_mean")).state_dict()
    with pytest.raises(ValueError, match="lacks a 'critic'"):
        Learner(moe_policy(), load_config("sao")).load_state_dict(state)


def test_policy_state_dict_is_a_detached_copy():
    policy = moe_policy()
    published = Learner(policy, load_config("sao")).policy_state_dict()
    published["lm_head.weight"].zero_()
    assert policy.lm_head.weight.abs().sum() > 0
    assert not published["lm_head.weight"].requires_grad


def test_learner_rejects_bad_models_and_configs():
    with pytest.raises(ValueError, match="policy must be fp32"):
        Learner(moe_policy().to(torch.bfloat16), load_config("sao"))
    policy = moe_policy()
    with pytest.raises(ValueError, match="critic.enabled is false"):
        Learner(policy, load_config("grpo"), critic=ValueModel.from_policy(policy))
    with pytest.raises(ValueError, match="matches no parameter"):
        Learner(policy, load_config("sao", overrides=["critic.freeze=[no_such_module]"]))
    with pytest.raises(ValueError, match="no trajectories"):
        Learner(policy, load_config("sao")).step([])


def test_critic_gradient_norms_compare_frozen_and_full_critics_over_the_same_parameters():
    trajectories = make_trajectories(moe_policy(), 6)
    first_step = {}
    for preset in ("sao", "sao_full_critic"):
        config = load_config(preset, overrides=["critic.k_updates=1"])
        first_step[preset] = Learner(moe_policy(), config).step(trajectories)
    frozen, full = first_step["sao"], first_step["sao_full_critic"]
    # Same weights, same batch: the gradient outside attention is the same in both critics.
    assert frozen["critic/grad_norm_shared"] == pytest.approx(full["critic/grad_norm_shared"])
    # Frozen attention has no gradient: its "all" norm is its trainable (= shared) norm.
    assert frozen["critic/grad_norm_all"] == pytest.approx(frozen["critic/grad_norm_shared"])
    assert frozen["critic/grad_norm"] == pytest.approx(frozen["critic/grad_norm_all"])
    # The full critic's attention adds gradient: all > shared, and the clipped norm is over all.
    assert full["critic/grad_norm_all"] > full["critic/grad_norm_shared"] * 1.01
    assert full["critic/grad_norm"] == pytest.approx(full["critic/grad_norm_all"])
