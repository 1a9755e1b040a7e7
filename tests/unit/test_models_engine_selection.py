"""`rollout.engine` picks the inference engine; settings a run cannot honour stop it in one line."""

from __future__ import annotations

import importlib.util

import pytest

from sao.cli import main
from sao.config import ConfigError, load_config
from sao.models.policy import build_tiny_policy
from sao.models.tokenizer import build_tokenizer
from sao.rollout.engine import RolloutEngine
from sao.rollout.factory import make_engine
from sao.rollout.setup import build_agent_loop

VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None
without_vllm = pytest.mark.skipif(VLLM_INSTALLED, reason="checks the refusal where vllm is missing")


@pytest.fixture(scope="module")
def parts():
    tokenizer = build_tokenizer()
    return build_tiny_policy(tokenizer, seed=0), tokenizer


def test_builtin_is_the_default_engine(parts) -> None:
    config = load_config("sao", None, [])
    assert config.rollout.engine == "builtin"
    loop = build_agent_loop(config, *parts, seed=0)
    assert isinstance(loop.engine, RolloutEngine)


def test_a_sampling_setting_the_learner_cannot_recompute_is_a_config_error(parts) -> None:
    config = load_config("sao", None, ["rollout.top_p=0.9"])
    with pytest.raises(ConfigError, match="top_p = 1"):
        build_agent_loop(config, *parts, seed=0)


@without_vllm
def test_the_vllm_engine_without_vllm_installed_is_a_config_error(parts) -> None:
    config = load_config("sao", None, ["rollout.engine=vllm"])
    with pytest.raises(ConfigError, match="not installed"):
        build_agent_loop(config, *parts, seed=0)


def test_an_unknown_engine_name_is_refused(parts) -> None:
    with pytest.raises(ValueError, match="rollout.engine"):
        make_engine("nope", *parts, max_batch=1, precision="fp32", seed=0)


@without_vllm
def test_sao_train_with_the_vllm_engine_without_vllm_exits_with_one_line(
    bpe_qwen3_dense_dir, tmp_path, capsys
) -> None:
    argv = ["train", "--steps", "1", "--out", str(tmp_path / "run")]
    argv += ["--set", f"model.path={bpe_qwen3_dense_dir}", "--set", "rollout.engine=vllm"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sao train: rollout.engine=vllm")
    assert "not installed" in err[0]
