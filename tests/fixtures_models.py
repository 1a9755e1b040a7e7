"""Locally made checkpoints for tests: the tiny default policy, and a BPE tokenizer with a chat
template and a random Qwen3.

Built once per test session (`sao.models.local_checkpoint`, a few seconds each); nothing is
downloaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
