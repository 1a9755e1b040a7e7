"""Locally made models for tests: the tiny default policy, a BPE tokenizer with a chat template
and a random Qwen3 saved as checkpoints, and small random Qwen3 models built in memory.

Built once per test session (`sao.models.local_checkpoint`, a few seconds each); nothing is
downloaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

from sao.models.local_checkpoint import save_local_checkpoint
from sao.models.policy import build_tiny_policy, save_policy
from sao.models.tokenizer import build_tokenizer


@pytest.fixture(scope="session")
def bpe_qwen3_moe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Qwen3-MoE (head_dim 32) with a BPE tokenizer and chat template, saved to disk."""
    return save_local_checkpoint(tmp_path_factory.mktemp("bpe_qwen3_moe"), "moe")


@pytest.fixture(scope="session")
def bpe_qwen3_dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random dense Qwen3 (head_dim 32) with a BPE tokenizer and chat template, saved to disk."""
    return save_local_checkpoint(tmp_path_factory.mktemp("bpe_qwen3_dense"), "dense")


@pytest.fixture(scope="session")
def tiny_policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny default policy, randomly initialised (seed 0), saved to disk."""
    path = tmp_path_factory.mktemp("tiny_policy")
    tokenizer = build_tokenizer()
    save_policy(build_tiny_policy(tokenizer, seed=0), tokenizer, path)
    return path


def _small_qwen3_shape(vocab_size: int, hidden_size: int) -> dict[str, int]:
    """Two layers of 16-wide heads, two query heads per key/value head, an MLP twice as wide."""
    heads = hidden_size // 16
    return {
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "num_hidden_layers": 2,
        "num_attention_heads": heads,
        "num_key_value_heads": heads // 2,
        "intermediate_size": 2 * hidden_size,
    }


def random_qwen3_moe(vocab_size: int, hidden_size: int, seed: int = 0) -> Qwen3MoeForCausalLM:
    """A random two-layer Qwen3-MoE (4 experts, top 2), float32 in eval mode, the same for a
    given `seed`."""
    config = Qwen3MoeConfig(
        **_small_qwen3_shape(vocab_size, hidden_size),
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=hidden_size,
    )
    torch.manual_seed(seed)
    return Qwen3MoeForCausalLM(config).float().eval()


def random_qwen3_dense(vocab_size: int, hidden_size: int, seed: int = 0) -> Qwen3ForCausalLM:
    """A random two-layer dense Qwen3, float32 in eval mode, the same for a given `seed`."""
    config = Qwen3Config(**_small_qwen3_shape(vocab_size, hidden_size), head_dim=16)
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config).float().eval()
