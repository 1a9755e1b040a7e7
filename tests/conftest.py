"""Fixtures shared by every test directory."""

from fixtures_models import bpe_qwen3_dense_dir, bpe_qwen3_moe_dir, tiny_policy_dir

__all__ = ["bpe_qwen3_dense_dir", "bpe_qwen3_moe_dir", "tiny_policy_dir"]
