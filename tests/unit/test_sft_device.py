"""The warm start's device, precision and gradient checkpointing (`sft.device`, `sft.precision`,
`sft.gradient_checkpointing`): the default settings train exactly as the plain fp32 loop on the
CPU does, checkpointing changes nothing, bf16 autocast really computes in bf16 while the weights
stay fp32, and a device that cannot be used is refused in one line."""

from __future__ import annotations

import math
import random

import pytest
import torch

from sao.cli import main
from sao.config import ConfigError, SFTConfig, load_config
from sao.envs.registry import make_demonstrations
from sao.models.packed_attention import use_packed_attention
from sao.models.policy import build_tiny_policy
from sao.models.tokenizer import build_tokenizer
from sao.warmstart.sft import collate_demonstrations, encode_segments, sft_loss, train_sft

SETTINGS = {"steps": 3, "batch_size": 4, "warmup_steps": 1, "num_demonstrations": 8}


def train(**settings: object) -> tuple[list[float], dict[str, torch.Tensor]]:
    tokenizer = build_tokenizer()
    model = build_tiny_policy(tokenizer, seed=0)
    examples = make_demonstrations("calc", 8, seed=0)
    curve = train_sft(
        model, tokenizer, examples, SFTConfig(**SETTINGS, **settings), seed=0, progress=False
    )
    return curve, model.state_dict()


def reference_curve() -> tuple[list[float], dict[str, torch.Tensor]]:
    """The warm start's loop written out: fp32 on the CPU, AdamW, warm-up then cosine, packed
    sequences with segment attention."""
    tokenizer = build_tokenizer()
    model = build_tiny_policy(tokenizer, seed=0)
    config = SFTConfig(**SETTINGS)
    encoded = [encode_segments(tokenizer, ex) for ex in make_demonstrations("calc", 8, seed=0)]
    rng = random.Random(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)

    def lr_at(step: int) -> float:
        if step < 1:
            return (step + 1) / 1
        return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - 1) / 2))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    use_packed_attention(model)
    model.train()
    curve = []
    for _ in range(3):
        batch = [encoded[i] for i in rng.sample(range(8), 4)]
        ids, mask = collate_demonstrations(batch, tokenizer.pad_token_id)
        loss = sft_loss(model, ids, mask, tokenizer.pad_token_id, config.micro_batch_tokens)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        curve.append(loss.item())
    return curve, model.state_dict()


def test_the_default_device_trains_as_the_plain_cpu_loop():
    assert SFTConfig().device == "cpu" and SFTConfig().precision == "fp32"
    curve, weights = train(device="cpu")
    want_curve, want_weights = reference_curve()
    assert curve == pytest.approx(want_curve, rel=1e-5)
    for name, want in want_weights.items():
        torch.testing.assert_close(weights[name], want, rtol=1e-4, atol=1e-6, msg=name)


def test_gradient_checkpointing_changes_nothing():
    curve, weights = train()
    checkpointed, checkpointed_weights = train(gradient_checkpointing=True)
    assert checkpointed == pytest.approx(curve, rel=1e-5)
    for name, want in weights.items():
        torch.testing.assert_close(checkpointed_weights[name], want, rtol=1e-4, atol=1e-6)


def test_bf16_autocast_computes_in_bf16_and_keeps_fp32_weights(monkeypatch):
    vocab = len(build_tokenizer())
    lm_head_dtypes: list[torch.dtype] = []
    original = torch.nn.Linear.forward

    def record(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        out = original(self, x)
        if self.out_features == vocab:  # the LM head
            lm_head_dtypes.append(out.dtype)
        return out

    monkeypatch.setattr(torch.nn.Linear, "forward", record)
    curve, weights = train(precision="bf16")
    assert len(lm_head_dtypes) >= 3 and set(lm_head_dtypes) == {torch.bfloat16}
    assert all(w.dtype == torch.float32 for w in weights.values() if w.is_floating_point())
    fp32_curve, fp32_weights = train()
    assert curve[0] == pytest.approx(fp32_curve[0], abs=0.1)  # the same loss, rounded in bf16
    assert curve[0] != fp32_curve[0]
    start = build_tiny_policy(build_tokenizer(), seed=0).state_dict()
    assert any(not torch.equal(start[k], weights[k]) for k in start)  # it trained


def test_a_device_that_is_not_one_is_refused_when_the_config_loads():
    with pytest.raises(ConfigError, match="sft.device: must be cpu, cuda, cuda:N or mps"):
        load_config("sao", overrides=["sft.device=gpu"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_missing_device_is_refused_in_one_line(tmp_path, capsys):
    code = main(["sft", "--set", "sft.device=cuda", "--steps", "1", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err
    assert "device 'cuda': CUDA is not available on this machine" in err
    assert not (tmp_path / "x").exists()
