"""LoRA (`model.lora.rank` > 0): adapters train, the base exists once, engines get merged weights.

On a random dense Qwen3 with a BPE tokenizer (its MLP has the linear layers the critic's adapters
go on; the tiny default's experts are not `nn.Linear`).
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from sao.config import ConfigError, LoraConfig, load_config
from sao.learner.step import Learner
from sao.models.critic import attention_parameter_names
from sao.models.lora import (
    critic_targets,
    lora_models,
    merged_state_dict,
    plain_copy,
    with_weights,
)
from sao.models.policy import load_policy, token_logprobs
from sao.runtime.checkpoints import checkpoint_policy_state
from sao.runtime.run_dir import read_metrics
from sao.runtime.train import train
from sao.trajectory import Trajectory
from small_run import small_config

pytest.importorskip("peft")

LORA = LoraConfig(rank=4, alpha=8.0)


def _trained_adapters(model: torch.nn.Module, seed: int = 1) -> None:
    """Give the zero-initialised B matrices values, as training would."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ".lora_B." in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.05)


def test_the_critic_shares_the_frozen_base_and_has_no_adapter_in_attention(bpe_qwen3_dense_dir):
    policy, _ = load_policy(bpe_qwen3_dense_dir)
    policy, critic = lora_models(policy, LORA, with_critic=True)
    assert critic is not None
    base = {id(p) for n, p in policy.named_parameters() if ".lora_" not in n}
    critic_base = {id(p) for n, p in critic.backbone.named_parameters() if ".lora_" not in n}
    assert critic_base <= base, "the critic holds a base tensor of its own"
    trainable = [n for n, p in critic.named_parameters() if p.requires_grad]
    assert "value_head.weight" in trainable
    assert not set(trainable) & attention_parameter_names(critic)
    assert all(".lora_" in n or n.startswith("value_head") for n in trainable)
    assert all(".lora_" in n for n, p in policy.named_parameters() if p.requires_grad)
    policy_adapters = {n for n, _ in policy.named_parameters() if ".lora_" in n}
    assert any(".self_attn.q_proj." in n for n in policy_adapters)
    assert critic_targets(critic.backbone, ["q_proj", "v_proj"]) == []


def test_merged_weights_give_the_adapted_models_log_probs(bpe_qwen3_dense_dir):
    policy, _ = load_policy(bpe_qwen3_dense_dir)
    reference, _ = load_policy(bpe_qwen3_dense_dir)
    policy, _ = lora_models(policy, LORA, with_critic=False)
    _trained_adapters(policy)
    ids = torch.randint(0, 1000, (2, 12))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        adapted = token_logprobs(policy, ids, mask)
        reference.load_state_dict(merged_state_dict(policy))
        merged = token_logprobs(reference, ids, mask)
        plain = token_logprobs(plain_copy(policy), ids, mask)
    assert (adapted - merged).abs().max() < 1e-5
    assert (adapted - plain).abs().max() < 1e-5
    base, _ = load_policy(bpe_qwen3_dense_dir)
    with torch.no_grad():
        assert (token_logprobs(base, ids, mask) - adapted).abs().max() > 1e-3


def _trajectories(policy: torch.nn.Module, count: int, vocab: int) -> list[Trajectory]:
    """Prompt then action, random ids with the policy's own log-probs, rewards 0, 1, 0, ..."""
    generator = torch.Generator().manual_seed(0)
    out = []
    for i in range(count):
        ids = torch.randint(1, vocab, (10,), generator=generator)
        mask = [0] * 4 + [1] * 6
        with torch.no_grad():
            logprobs = token_logprobs(policy, ids[None], torch.ones(1, 10))[0].tolist()
        out.append(
            Trajectory(
                token_ids=ids.tolist(),
                action_mask=mask,
                rollout_logprobs=[lp * m for lp, m in zip(logprobs, mask, strict=True)],
                policy_versions=[0 if m else -1 for m in mask],
                reward=float(i % 2),
                turn_spans=((4, 10),),
            )
        )
    return out


def test_a_learner_step_trains_adapters_only(bpe_qwen3_dense_dir):
    config = small_config(bpe_qwen3_dense_dir, "model.lora.rank=4")
    policy, tokenizer = load_policy(bpe_qwen3_dense_dir)
    policy, critic = lora_models(policy, config.model.lora, with_critic=True)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    critic_before = {n: p.detach().clone() for n, p in critic.named_parameters()}
    learner = Learner(policy, config, critic, pad_token_id=tokenizer.pad_token_id)
    published = learner.policy_state_dict()
    assert not any(".lora_" in k or ".base_layer." in k for k in published)
    learner.step(_trajectories(policy, 4, vocab=len(tokenizer)))
    moved = {n for n, p in policy.named_parameters() if not torch.equal(p, before[n])}
    assert moved and all(".lora_B." in n or ".lora_A." in n for n in moved)
    critic_moved = {n for n, p in critic.named_parameters() if not torch.equal(p, critic_before[n])}
    assert "value_head.weight" in critic_moved
    assert all(".lora_" in n or n.startswith("value_head") for n in critic_moved)
    state = learner.state_dict()
    assert set(state["policy"]) == {n for n, p in policy.named_parameters() if p.requires_grad}
    assert state["lora"]["rank"] == 4


def test_a_lora_run_trains_syncs_checkpoints_resumes_and_saves_a_plain_policy(
    bpe_qwen3_dense_dir, tmp_path
):
    extra = ("model.lora.rank=4", "train.steps=2", "train.checkpoint_every=1")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    train(small_config(bpe_qwen3_dense_dir, *extra), run_dir, progress=False)
    rows = [r for r in read_metrics(run_dir) if r["step"] == 1]
    # The engine samples with the merged weights the learner starts from: the first step's
    # ratio is 1 within rounding.
    assert abs(rows[0]["actor/ratio_mean"] - 1.0) < 1e-3
    saved = AutoModelForCausalLM.from_pretrained(run_dir / "policy")
    assert not any("lora" in n for n, _ in saved.named_parameters())
    # Value pretraining and the critic's steps never wrote the base they share with the policy.
    start, _ = load_policy(bpe_qwen3_dense_dir)
    untargeted = [n for n, _ in start.named_parameters() if "k_proj" in n or "norm" in n]
    assert untargeted
    assert all(torch.equal(saved.get_parameter(n), start.get_parameter(n)) for n in untargeted)

    # A checkpoint holds adapters; evaluated on the base it started from, it is the run's policy.
    state = checkpoint_policy_state(run_dir / "checkpoints" / "step_2")
    assert state and all(".lora_" in k for k in state)
    base, _ = load_policy(bpe_qwen3_dense_dir)
    rebuilt = with_weights(base, state, LORA.model_copy(update={"alpha": 16.0}))
    ids = torch.randint(0, 1000, (1, 10))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        gap = (token_logprobs(rebuilt, ids, mask) - token_logprobs(saved, ids, mask)).abs().max()
    assert gap < 1e-5

    resumed = train(
        small_config(bpe_qwen3_dense_dir, *extra[:1], "train.steps=3"),
        run_dir,
        resume=True,
        progress=False,
    )
    assert resumed["trajectories_trained"] == 12


def test_lora_settings_that_cannot_work_are_one_line(bpe_qwen3_dense_dir):
    with pytest.raises(ConfigError, match="model.lora.rank=4: LoRA trains in one learner"):
        load_config("sao", None, ["model.lora.rank=4", "train.learner_ranks=2"])
    policy, _ = load_policy(bpe_qwen3_dense_dir)
    only_attention = LoraConfig(rank=4, target_modules=["q_proj", "v_proj"])
    with pytest.raises(ConfigError, match="none is a linear layer outside attention"):
        lora_models(policy, only_attention, with_critic=True)
    with pytest.raises(ConfigError, match="model.lora.target_modules"):
        lora_models(policy, LoraConfig(rank=4, target_modules=["nothing_here"]), False)
