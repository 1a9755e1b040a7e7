"""Locally made checkpoints for tests: a BPE tokenizer with a chat template and a random Qwen3.

Built once per test session (`sao.models.local_checkpoint`, a few seconds each); nothing is
downloaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sao.models.local_checkpoint import save_local_checkpoint


@pytest.fixture(scope="session")
def bpe_qwen3_moe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Qwen3-MoE (head_dim 32) with a BPE tokenizer and chat template, saved to disk."""
    return save_local_checkpoint(tmp_path_factory.mktemp("bpe_qwen3_moe"), "moe")


@pytest.fixture(scope="session")
def bpe_qwen3_dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random dense Qwen3 (head_dim 32) with a BPE tokenizer and chat template, saved to disk."""
    return save_local_checkpoint(tmp_path_factory.mktemp("bpe_qwen3_dense"), "dense")
