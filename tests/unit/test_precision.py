"""Learner precision and memory switches: bf16 autocast over fp32 master weights, gradient
checkpointing and pass recomputation that change memory but not gradients, devices named in the
config."""

import copy

import pytest
import torch
from test_learner import FAST_LR, make_trajectories, moe_policy

from sao.config import ConfigError, load_config
from sao.learner import Learner
from sao.learner.precision import (
    enable_gradient_checkpointing,
    mixed_precision_forward,
    resolve_device,
)
from sao.models.critic import ValueModel
from sao.models.policy import token_logprobs


def learner(overrides: list[str], seed: int = 0) -> Learner:
    policy = moe_policy(seed)
    config = load_config("sao", overrides=[*FAST_LR, "critic.freeze=[none]", *overrides])
    return Learner(policy, config, ValueModel.from_policy(policy))


def test_bf16_keeps_fp32_master_weights_and_a_step_changes_them() -> None:
    run = learner(["train.learner_precision=bf16"])
    before = {k: v.clone() for k, v in run.policy.state_dict().items()}
    metrics = run.step(make_trajectories(run.policy, 4))

    assert {p.dtype for p in run.policy.parameters()} == {torch.float32}
    assert {p.dtype for p in run.critic.parameters()} == {torch.float32}
    moments = [s["exp_avg"] for s in run.actor_optimizer.state.values()]
    assert moments and {m.dtype for m in moments} == {torch.float32}
    changed = [k for k, v in run.policy.state_dict().items() if not torch.equal(v, before[k])]
    assert changed
    assert torch.isfinite(torch.tensor(metrics["actor/pg_loss"]))


def test_bf16_forward_really_runs_in_bf16_and_returns_fp32() -> None:
    policy = moe_policy()
    ids = torch.randint(1, 100, (2, 9))
    mask = torch.ones_like(ids)
    seen: list[torch.dtype] = []
    policy.lm_head.register_forward_hook(lambda m, i, out: seen.append(out.dtype))

    forward = mixed_precision_forward(
        lambda i, a: token_logprobs(policy, i, a), "bf16", torch.device("cpu")
    )
    with torch.no_grad():
        mixed = forward(ids, mask)
        full = token_logprobs(policy, ids, mask)

    assert seen == [torch.bfloat16, torch.float32]
    assert mixed.dtype == torch.float32
    # bf16 rounding moves the log-probs a little, never a lot (logits of a random init are small).
    gap = (mixed - full).abs().max().item()
    assert 0.0 < gap < 0.1


def grads_after_one_step(
    checkpointing: bool, switch: str = "train.gradient_checkpointing"
) -> tuple[dict[str, torch.Tensor], Learner, dict[str, float]]:
    overrides = ["critic.k_updates=1"] + ([f"{switch}=true"] if checkpointing else [])
    run = learner(overrides)
    captured: dict[str, torch.Tensor] = {}
    for name, p in [*run.policy.named_parameters(), *run.critic.named_parameters()]:
        p.register_hook(lambda g, name=name: captured.__setitem__(name, g.clone()))
    metrics = run.step(make_trajectories(moe_policy(), 4))
    return captured, run, metrics


def test_gradient_checkpointing_gives_the_same_gradients_and_recomputes_layers() -> None:
    plain, _, plain_metrics = grads_after_one_step(checkpointing=False)
    checkpointed, run, metrics = grads_after_one_step(checkpointing=True)

    for key in ("actor/pg_loss", "actor/entropy", "critic/vf_loss"):
        assert metrics[key] == pytest.approx(plain_metrics[key], rel=1e-5, abs=1e-7), key
    assert plain.keys() == checkpointed.keys() and plain
    for name, grad in plain.items():
        torch.testing.assert_close(checkpointed[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    # The layers are checkpointed, while every submodule computes in eval mode.
    policy_layers = run.policy.model.layers
    assert all(layer.gradient_checkpointing and layer.training for layer in policy_layers)
    assert not any(m.training for layer in policy_layers for m in layer.children())


def test_checkpointed_layers_run_their_forward_again_in_backward() -> None:
    policy = copy.deepcopy(moe_policy()).eval()
    assert enable_gradient_checkpointing(policy) == 2
    calls: list[int] = []
    policy.model.layers[0].self_attn.register_forward_hook(lambda *_: calls.append(1))
    ids = torch.randint(1, 100, (2, 7))
    token_logprobs(policy, ids, torch.ones_like(ids)).sum().backward()
    assert len(calls) == 2  # once forward, once recomputed in backward


def test_recomputed_passes_give_the_same_step() -> None:
    plain, _, plain_metrics = grads_after_one_step(checkpointing=False)
    recomputed, _, metrics = grads_after_one_step(True, switch="train.recompute_passes")

    for key in ("actor/pg_loss", "actor/entropy", "critic/vf_loss", "actor/grad_norm"):
        assert metrics[key] == pytest.approx(plain_metrics[key], rel=1e-5, abs=1e-7), key
    assert plain.keys() == recomputed.keys() and plain
    for name, grad in plain.items():
        torch.testing.assert_close(recomputed[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def saved_for_backward_bytes(recompute: bool, batch: int) -> int:
    """Bytes the policy forward of a `batch`-row learner batch keeps for its backward pass."""
    overrides = ["train.micro_batch_tokens=16"]
    run = learner(overrides + (["train.recompute_passes=true"] if recompute else []))
    trajectories = make_trajectories(moe_policy(), batch)
    held: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        held.append(t.numel() * t.element_size())
        return t

    from sao.trajectory import collate

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run._policy_forward(collate(trajectories, run.pad_token_id))
    return sum(held)


def test_recomputed_passes_hold_little_for_backward_whatever_the_batch() -> None:
    # Rows of 10-23 tokens in passes of 16 tokens: one pass a row, so passes grow with the batch.
    plain_small, plain_large = (saved_for_backward_bytes(False, b) for b in (2, 8))
    kept_small, kept_large = (saved_for_backward_bytes(True, b) for b in (2, 8))
    assert plain_large > 3 * plain_small  # every pass's activations wait for the one backward
    # Recomputed, a pass keeps its inputs and the stitching its outputs, a small part of that.
    assert kept_large < plain_large / 10
    assert kept_small < plain_small / 10


def test_gradient_checkpointing_refuses_a_model_without_layers() -> None:
    with pytest.raises(ValueError, match="holds no transformers model"):
        enable_gradient_checkpointing(torch.nn.Linear(2, 2))


@pytest.mark.parametrize(
    "override",
    ["train.learner_device=gpu", "rollout.engine_device=cuda:x", "train.learner_device=CPU"],
)
def test_a_bad_device_name_fails_at_config_time_in_one_line(override: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(overrides=[override])
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(override.split("=")[0] + ": must be cpu, cuda, cuda:N or mps")


def test_device_fields_default_to_cpu_and_take_cuda_names() -> None:
    assert load_config().train.learner_device == "cpu"
    assert load_config().rollout.engine_device == "cpu"
    config = load_config(overrides=["train.learner_device=cuda:1", "rollout.engine_device=cuda"])
    assert (config.train.learner_device, config.rollout.engine_device) == ("cuda:1", "cuda")


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message on a machine without CUDA"
)
def test_an_unavailable_device_fails_in_one_line_when_used() -> None:
    with pytest.raises(ValueError, match="^device 'cuda': CUDA is not available on this machine$"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        learner(["train.learner_device=cuda"])
