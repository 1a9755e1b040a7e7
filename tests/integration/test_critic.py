"""The value model on real tiny HF models: alignment, freezing, save/load, value pretraining."""

import pytest
import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

from sao.config import ConfigError, load_config
from sao.core.metrics import explained_variance
from sao.learner import monte_carlo_returns, pretrain_value
from sao.learner.value_pretrain import split_holdout
from sao.models.critic import ValueModel, freeze_modules
from sao.trajectory import Trajectory, collate

VOCAB = 100
SMALL = {"vocab_size": VOCAB, "hidden_size": 64, "num_hidden_layers": 2}
HEADS = {"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128}


def moe_policy() -> Qwen3MoeForCausalLM:
    config = Qwen3MoeConfig(
        **SMALL, **HEADS, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64
    )
    torch.manual_seed(0)
    return Qwen3MoeForCausalLM(config).float().eval()


def qwen3_dense_policy() -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    return Qwen3ForCausalLM(Qwen3Config(**SMALL, **HEADS, head_dim=16)).float().eval()


def llama_policy() -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SMALL, **HEADS)).float().eval()


BUILDERS = [moe_policy, qwen3_dense_policy, llama_policy]
IDS = ["qwen3_moe", "qwen3_dense", "llama"]


@pytest.mark.parametrize("build", BUILDERS, ids=IDS)
def test_values_are_read_at_the_hidden_state_that_predicts_each_token(build):
    critic = ValueModel.from_policy(build())
    ids = torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(0))
    attention = torch.ones_like(ids)
    values = critic(ids, attention)
    hidden = critic.backbone(input_ids=ids, attention_mask=attention).last_hidden_state
    head = critic.value_head
    assert values[:, 0].tolist() == [0.0, 0.0]
    for t in range(1, 7):
        expected = hidden[:, t - 1] @ head.weight[0] + head.bias[0]
        assert torch.allclose(values[:, t], expected, atol=1e-5)


def test_right_padding_does_not_change_the_values_of_real_tokens():
    critic = ValueModel.from_policy(moe_policy())
    ids = torch.randint(1, VOCAB, (1, 6), generator=torch.Generator().manual_seed(1))
    alone = critic(ids, torch.ones_like(ids))
    padded_ids = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    padded = critic(padded_ids, torch.tensor([[1] * 6 + [0] * 3]))
    assert torch.allclose(padded[:, :6], alone, atol=1e-5)


def test_from_policy_copies_the_backbone_and_shares_no_tensor():
    policy = moe_policy()
    critic = ValueModel.from_policy(policy)
    assert torch.equal(critic.backbone.embed_tokens.weight, policy.model.embed_tokens.weight)
    with torch.no_grad():
        critic.backbone.embed_tokens.weight.add_(1.0)
    assert not torch.equal(critic.backbone.embed_tokens.weight, policy.model.embed_tokens.weight)
    # The head starts near zero: values are small before any training.
    values = critic(torch.tensor([[1, 2, 3, 4]]), torch.ones(1, 4, dtype=torch.long))
    assert values.abs().max() < 0.5


def test_value_model_rejects_a_model_without_a_base_model_or_hidden_size():
    with pytest.raises(ValueError, match="no config.hidden_size"):
        ValueModel(torch.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="must be \\[B, T\\]"):
        ValueModel.from_policy(moe_policy())(torch.tensor([1, 2]), torch.tensor([1, 1]))


ATTENTION_PARTS = {
    "qwen3_moe": ["q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"],
    "qwen3_dense": ["q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"],
    "llama": ["q_proj", "k_proj", "v_proj", "o_proj"],
}


@pytest.mark.parametrize(("build", "arch"), list(zip(BUILDERS, IDS, strict=True)), ids=IDS)
def test_freeze_attention_selects_exactly_the_attention_of_every_layer(build, arch):
    critic = ValueModel.from_policy(build())
    frozen = freeze_modules(critic, ["attention"])
    expected = [
        f"backbone.layers.{layer}.self_attn.{part}.weight"
        for layer in range(2)
        for part in ATTENTION_PARTS[arch]
    ]
    assert frozen == expected
    trainable = {n for n, p in critic.named_parameters() if p.requires_grad}
    assert trainable == {n for n, _ in critic.named_parameters()} - set(expected)
    # Layer norms outside attention, the MLP/MoE and the value head keep training.
    assert "backbone.layers.0.input_layernorm.weight" in trainable
    assert "value_head.weight" in trainable


def test_freeze_none_regex_and_errors():
    critic = ValueModel.from_policy(moe_policy())
    assert freeze_modules(critic, ["none"]) == []
    assert all(p.requires_grad for p in critic.parameters())
    router = freeze_modules(critic, [r"mlp\.gate\.weight$"])
    assert router == [f"backbone.layers.{i}.mlp.gate.weight" for i in range(2)]
    with pytest.raises(ValueError, match="'no_such_module' matches no parameter"):
        freeze_modules(critic, ["no_such_module"])
    with pytest.raises(ValueError, match="'\\(' is not a regex"):
        freeze_modules(critic, ["("])
    with pytest.raises(ValueError, match="'none' cannot be combined"):
        freeze_modules(critic, ["none", "attention"])


@pytest.mark.parametrize("build", [moe_policy, llama_policy], ids=["qwen3_moe", "llama"])
def test_save_and_load_give_the_same_values(build, tmp_path):
    critic = ValueModel.from_policy(build())
    with torch.no_grad():
        critic.value_head.bias.fill_(0.25)
    critic.save(tmp_path / "critic")
    loaded = ValueModel.load(tmp_path / "critic")
    ids = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(2))
    attention = torch.ones_like(ids)
    assert torch.equal(loaded(ids, attention), critic(ids, attention))
    with pytest.raises(ValueError, match="holds no saved value model"):
        ValueModel.load(tmp_path / "missing")


def predictable_task(count: int) -> list[Trajectory]:
    """The prompt's second token (10 or 11) decides the reward (1 or 0); actions are noise."""
    gen = torch.Generator().manual_seed(3)
    out = []
    for i in range(count):
        cue = 10 + i % 2
        prompt = [1, cue, 2]
        actions = torch.randint(20, VOCAB, (8,), generator=gen).tolist()
        out.append(
            Trajectory(
                token_ids=prompt + actions,
                action_mask=[0] * 3 + [1] * 8,
                rollout_logprobs=[0.0] * 3 + [-1.0] * 8,
                policy_versions=[-1] * 3 + [0] * 8,
                reward=float(cue == 10),
                turn_spans=((3, 11),),
            )
        )
    return out


def test_monte_carlo_returns_are_discounted_reward_to_go():
    trajectory = predictable_task(1)[0]  # reward 1 on the last of 8 action tokens
    returns = monte_carlo_returns(trajectory, gamma=0.5)
    assert returns.tolist() == [0.0] * 3 + [0.5**k for k in range(7, -1, -1)]


def _pretrain_config(
    holdout: int,
    max_steps: int,
    lr: str = "5e-4",
    ev_threshold: float | None = None,
    extra: list[str] | None = None,
) -> object:
    """The `sao` preset with value pretraining in batches of 16 and the given settings."""
    overrides = [
        *(extra or []),
        f"critic.optim.lr={lr}",
        "critic.pretrain.batch_size=16",
        f"critic.pretrain.max_steps={max_steps}",
        f"critic.pretrain.holdout_trajectories={holdout}",
    ]
    if ev_threshold is not None:
        overrides.append(f"critic.pretrain.ev_threshold={ev_threshold}")
    return load_config("sao", overrides=overrides)


def test_value_pretraining_raises_explained_variance_until_the_threshold():
    critic = ValueModel.from_policy(moe_policy())
    freeze_modules(critic, ["attention"])
    attention_before = critic.backbone.layers[0].self_attn.q_proj.weight.detach().clone()
    config = _pretrain_config(holdout=0, max_steps=60, lr="3e-3", ev_threshold=0.8)
    curve = pretrain_value(critic, predictable_task(32), config, pad_token_id=0, progress=False)
    assert [row["step"] for row in curve] == list(range(1, len(curve) + 1))
    assert curve[0]["critic/vf_explained_var"] < 0.1
    assert curve[-1]["critic/vf_explained_var"] >= 0.8
    assert len(curve) < 60  # stopped at the threshold, not at the step budget
    # The whole critic trained, attention included; the freeze is back in place afterwards.
    assert not torch.equal(critic.backbone.layers[0].self_attn.q_proj.weight, attention_before)
    frozen = {n for n, p in critic.named_parameters() if not p.requires_grad}
    assert frozen and all(".self_attn." in n for n in frozen)


def noise_task(count: int, seed: int) -> list[Trajectory]:
    """Rewards drawn independently of every token: nothing generalises, only memorising fits."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        ids = torch.randint(20, VOCAB, (11,), generator=gen).tolist()
        out.append(
            Trajectory(
                token_ids=ids,
                action_mask=[0] * 3 + [1] * 8,
                rollout_logprobs=[0.0] * 3 + [-1.0] * 8,
                policy_versions=[-1] * 3 + [0] * 8,
                reward=float(torch.rand(1, generator=gen) < 0.5),
            )
        )
    return out


def test_the_training_set_explained_variance_passes_the_threshold_by_memorising():
    # The preset's critic learning rate, 64 trajectories of pure-noise rewards: the explained
    # variance over the trajectories trained on passes 0.5 within a few epochs, while on 64 new
    # ones it is far below 0 (the critic learnt nothing that carries over).
    critic = ValueModel.from_policy(moe_policy())
    config = _pretrain_config(holdout=0, max_steps=60)
    curve = pretrain_value(critic, noise_task(64, seed=1), config, pad_token_id=0, progress=False)
    assert len(curve) < 60 and curve[-1]["critic/vf_explained_var"] >= 0.5
    assert "critic/vf_explained_var_heldout" not in curve[-1]
    fresh = noise_task(64, seed=2)
    batch = collate(fresh)
    with torch.no_grad():
        values = critic(batch.input_ids, batch.attention_mask)
    returns = torch.stack([monte_carlo_returns(t, 1.0) for t in fresh])
    assert explained_variance(values, returns, batch.action_mask) < 0.0


def test_a_held_out_slice_refuses_to_stop_on_memorised_noise():
    critic = ValueModel.from_policy(moe_policy())
    config = _pretrain_config(holdout=16, max_steps=24)  # 64 trained on: 4 steps an epoch
    curve = pretrain_value(critic, noise_task(80, seed=1), config, pad_token_id=0, progress=False)
    assert len(curve) == 24  # the step budget, not the threshold, ended it
    assert curve[-1]["critic/vf_explained_var"] >= 0.5  # the training set's own would have stopped
    measured = [row["step"] for row in curve if "critic/vf_explained_var_heldout" in row]
    assert measured == [4.0, 8.0, 12.0, 16.0, 20.0, 24.0]
    assert max(row.get("critic/vf_explained_var_heldout", -1.0) for row in curve) < 0.1


def test_a_held_out_slice_stops_at_the_threshold_when_the_returns_are_predictable():
    critic = ValueModel.from_policy(moe_policy())
    config = _pretrain_config(holdout=8, max_steps=60, lr="3e-3", ev_threshold=0.8)
    curve = pretrain_value(critic, predictable_task(40), config, pad_token_id=0, progress=False)
    assert len(curve) < 60 and len(curve) % 2 == 0  # 32 trained on: 2 steps an epoch
    assert curve[-1]["critic/vf_explained_var_heldout"] >= 0.8


def test_holdout_must_leave_trajectories_to_train_on():
    with pytest.raises(ConfigError, match="holdout_trajectories: must be below num_trajectories"):
        load_config("sao", overrides=["critic.pretrain.holdout_trajectories=256"])


def test_the_held_out_slice_is_drawn_not_the_first_to_finish():
    # An agent loop returns episodes in the order they finished: shortest first.
    by_length = [
        Trajectory(
            token_ids=[1] * (n + 1),
            action_mask=[0] + [1] * n,
            rollout_logprobs=[0.0] + [-1.0] * n,
            policy_versions=[-1] + [0] * n,
            reward=0.0,
        )
        for n in range(1, 65)
    ]
    held_out, rest = split_holdout(by_length, 8, seed=0)
    lengths = sorted(len(t) for t in held_out)
    assert len(held_out) == 8 and len(rest) == 56
    assert sorted(lengths + [len(t) for t in rest]) == list(range(2, 66))
    assert lengths != list(range(2, 10))  # not the eight shortest
    assert [len(t) for t in rest] == sorted(len(t) for t in rest)  # the rest keep their order
    assert split_holdout(by_length, 8, seed=0)[0] == held_out
    assert split_holdout(by_length, 8, seed=1)[0] != held_out
    with pytest.raises(ValueError, match="holdout must be in"):
        split_holdout(by_length, 64, seed=0)


@pytest.mark.parametrize("switch", ["train.gradient_checkpointing", "train.recompute_passes"])
def test_value_pretraining_recomputes_in_backward_when_asked(switch):
    # Each of value pretraining's steps runs the layers once forward and, recomputed, once more
    # in the backward pass; without the switch, once. (Calls without a gradient are set-up
    # probes of the attention kernels, not training passes.)
    def attention_calls(overrides: list[str]) -> int:
        critic = ValueModel.from_policy(moe_policy())
        calls: list[bool] = []
        attention = critic.backbone.layers[0].self_attn
        attention.register_forward_hook(lambda *_: calls.append(torch.is_grad_enabled()))
        config = _pretrain_config(holdout=0, max_steps=1, extra=overrides)
        pretrain_value(critic, predictable_task(8), config, pad_token_id=0, progress=False)
        return sum(calls)

    plain = attention_calls([])
    assert plain >= 1
    assert attention_calls([f"{switch}=true"]) == 2 * plain
