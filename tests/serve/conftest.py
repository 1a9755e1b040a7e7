"""The tiny saved policy every service test serves."""

from __future__ import annotations

import pytest

from sao.models.policy import build_tiny_policy, save_policy
from sao.models.tokenizer import build_tokenizer


@pytest.fixture(scope="session")
def policy_dir(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("serve_policy") / "tiny-policy"
    tokenizer = build_tokenizer()
    save_policy(build_tiny_policy(tokenizer, seed=0), tokenizer, path)
    return str(path)
