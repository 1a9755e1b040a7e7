"""The staleness overlay loads over every preset and sets what docs/learner.md says."""

from pathlib import Path

import pytest

from sao.config import PRESETS, load_config

OVERLAY = Path(__file__).resolve().parents[2] / "examples" / "staleness.yaml"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_overlay_applies_over_every_preset_and_leaves_the_algorithm_alone(preset):
    config = load_config(preset, OVERLAY)
    assert config.rollout.precision == "bf16"
    assert (config.rollout.concurrency, config.rollout.max_ahead) == (128, 8)
    assert config.actor.lr == 3e-4
    assert config.algo == load_config(preset).algo
