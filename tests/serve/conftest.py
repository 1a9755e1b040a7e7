"""The tiny saved policy every service test serves."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from sao.models.policy import build_tiny_policy, save_policy
from sao.models.tokenizer import build_tokenizer


@pytest.fixture(scope="session")
def policy_dir(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("serve_policy") / "tiny-policy"
    tokenizer = build_tokenizer()
    save_policy(build_tiny_policy(tokenizer, seed=0), tokenizer, path)
    return str(path)


@pytest.fixture(scope="session")
def tools_template_dir(tmp_path_factory) -> str:
    """A random dense Qwen3 with a BPE tokenizer whose chat template renders tools and calls."""
    from serve_helpers import TOOLS_CHAT_TEMPLATE

    from sao.models.local_checkpoint import save_local_checkpoint

    path = save_local_checkpoint(tmp_path_factory.mktemp("serve_bpe") / "bpe-tools", "dense")
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template = TOOLS_CHAT_TEMPLATE
    tokenizer.save_pretrained(path)
    return str(path)
