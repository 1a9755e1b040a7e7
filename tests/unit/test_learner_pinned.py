"""Two learner steps of every preset give the metrics and weights pinned in `learner_pins.json`
(recorded before the learner's refactor; see `tests/pins.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from test_learner import make_trajectories, moe_policy

from pins import assert_close
from sao.config import PRESETS, load_config
from sao.learner import Learner

PINS = Path(__file__).with_name("learner_pins.json")
_FAST_LR = ["actor.lr=1e-3", "critic.optim.lr=1e-3"]
CASES: dict[str, tuple[str, list[str]]] = {name: (name, []) for name in sorted(PRESETS)}
CASES["sao+options"] = (
    "sao",
    ["algo.whiten_advantages=true", "critic.value_clip=0.2", "algo.agg=seq-mean-token-mean"],
)


def _fingerprint(model: torch.nn.Module | None) -> list[float] | None:
    if model is None:
        return None
    params = [p.detach().double() for p in model.parameters()]
    return [float(sum(p.sum() for p in params)), float(sum(p.abs().sum() for p in params))]


def learner_run(case: str) -> dict[str, Any]:
    """Two steps on fixed trajectories (rewards 0/1, groups of 4): metrics and weights."""
    preset, overrides = CASES[case]
    torch.manual_seed(0)
    policy = moe_policy()
    learner = Learner(policy, load_config(preset, overrides=[*_FAST_LR, *overrides]))
    steps = [learner.step(make_trajectories(policy, 8, seed=seed, group_size=4)) for seed in (0, 1)]
    run = {
        "steps": steps,
        "policy": _fingerprint(learner.policy),
        "critic": _fingerprint(learner.critic),
    }
    return json.loads(json.dumps(run))


@pytest.mark.parametrize("case", sorted(CASES))
def test_learner_steps_give_the_pinned_metrics_and_weights(case):
    assert_close(learner_run(case), json.loads(PINS.read_text())[case], case)


if __name__ == "__main__":
    pins = {case: learner_run(case) for case in CASES}
    PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
