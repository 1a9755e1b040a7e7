"""A pretrained-size checkpoint at the tiny model's learning rates is warned about in one line."""

from __future__ import annotations

import sao.preflight as preflight
from sao.config import load_config
from sao.preflight import checkpoint_parameters, learning_rate_warning


def test_the_parameter_count_comes_from_the_safetensors_header(bpe_qwen3_dense_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(bpe_qwen3_dense_dir)
    assert checkpoint_parameters(bpe_qwen3_dense_dir) == sum(p.numel() for p in model.parameters())


def test_the_tiny_rates_on_a_large_checkpoint_warn_and_rates_of_its_own_do_not(
    bpe_qwen3_dense_dir, monkeypatch
):
    config = load_config("sao", None, [f"model.path={bpe_qwen3_dense_dir}"])
    assert learning_rate_warning(config, config.model.path) is None  # a small model
    monkeypatch.setattr(preflight, "_TINY_MODEL_PARAMETERS", 1000)
    line = learning_rate_warning(config, config.model.path)
    assert line is not None and "\n" not in line
    assert "actor.lr=0.0001" in line and "critic.optim.lr=0.0005" in line
    tuned = load_config("sao", None, ["actor.lr=2e-6", "critic.optim.lr=1e-5"])
    assert learning_rate_warning(tuned, bpe_qwen3_dense_dir) is None
    assert learning_rate_warning(load_config("sao", None, []), None) is None
    lora = load_config("sao", None, [f"model.path={bpe_qwen3_dense_dir}", "model.lora.rank=8"])
    assert learning_rate_warning(lora, lora.model.path) is None


def test_unreadable_weights_are_left_to_the_model_loader(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"not weights")
    assert checkpoint_parameters(tmp_path) is None
