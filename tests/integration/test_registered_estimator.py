"""An advantage estimator registered from outside the package trains a run (docs/learner.md,
"Adding an estimator"): one decorated function, one preset line."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from sao.config import ConfigError, load_config
from sao.core import AdvantageInputs, register_advantage
from sao.models.policy import load_policy
from sao.presets import PRESETS, Preset
from sao.runtime.train import train
from small_run import SMALL_RUN

CALLS: list[int] = []


@register_advantage("outcome_minus_half", level="token")
def outcome_minus_half(inputs: AdvantageInputs, algo: object) -> Tensor:
    """Every action token gets its trajectory's episode return minus a fixed 0.5 baseline."""
    CALLS.append(int(inputs.action_mask.shape[0]))
    per_row = inputs.rewards.sum(dim=1, keepdim=True) - 0.5
    return per_row * (inputs.action_mask > 0)


def test_a_registered_estimator_and_its_preset_train_a_run(tiny_policy_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(
        PRESETS,
        "half_baseline",
        Preset(
            "1 rollout/prompt, R - 0.5, DIS, no critic",
            {
                "algo": {"advantage": "outcome_minus_half", "adaptive_lambda_alpha": None},
                "critic": {"enabled": False},
            },
        ),
    )
    config = load_config(
        "half_baseline", None, [*SMALL_RUN, f"model.path={tiny_policy_dir}", "train.steps=2"]
    )
    assert config.algo.advantage == "outcome_minus_half"
    CALLS.clear()
    summary = train(config, tmp_path, progress=False)
    assert CALLS == [4, 4]  # once per learner step, on the batch's rows
    assert summary["trajectories_trained"] == 8
    trained, _ = load_policy(tmp_path / "policy")
    start, _ = load_policy(tiny_policy_dir)
    pairs = zip(trained.parameters(), start.parameters(), strict=True)
    assert any(not torch.equal(a, b) for a, b in pairs)


def test_an_unregistered_name_fails_with_one_line_listing_the_registered_ones():
    with pytest.raises(ConfigError) as info:
        load_config("sao", None, ["algo.advantage=no_such_estimator"])
    text = str(info.value)
    assert "\n" not in text and text.startswith("algo.advantage: must be a registered estimator")
    assert "token_gae" in text and "outcome_minus_half" in text and "no_such_estimator" in text
    with pytest.raises(ConfigError, match="algo.policy_loss: must be a registered policy loss"):
        load_config("sao", None, ["algo.policy_loss=reinforce"])


def test_an_estimator_that_needs_a_critic_refuses_a_run_without_one():
    register_advantage("critic_only_test", level="token", needs_critic=True)(outcome_minus_half)
    with pytest.raises(ConfigError, match="critic_only_test needs a critic"):
        load_config("sao", None, ["algo.advantage=critic_only_test", "critic.enabled=false"])
