"""A two-step `train` of `sao` and of `grpo` writes the metrics pinned in `train_pins.json`
(recorded before the learner's refactor; see `tests/pins.py`).

Synchronous, with inline environment steps, so the run is bit-for-bit reproducible; this pins the
loop around the learner: value pretraining, fetching, stepping, publishing, evals, recording.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pins import assert_close
from sao.config import load_config
from sao.runtime.run_dir import read_metrics
from sao.runtime.train import train
from small_run import SMALL_RUN

PINS = Path(__file__).with_name("train_pins.json")
CASES = {"sao": [], "grpo": ["rollout.group_size=2"]}
_OVERRIDES = ["train.steps=2", "train.mode=sync", "rollout.env_workers=0"]
# Wall-clock metrics differ run to run; everything else a run writes is pinned.
_PINNED_PERF = ("perf/padding_frac", "perf/batch_padding_frac")


def train_run(preset: str, policy_dir: Path, run_dir: Path) -> list[dict[str, Any]]:
    """The metric rows of the run, wall-clock ones left out."""
    overrides = [*SMALL_RUN, f"model.path={policy_dir}", *_OVERRIDES, *CASES[preset]]
    train(load_config(preset, None, overrides), run_dir, progress=False)
    return [
        {k: v for k, v in row.items() if not k.startswith(("time/", "perf/")) or k in _PINNED_PERF}
        for row in read_metrics(run_dir)
    ]


@pytest.mark.parametrize("preset", sorted(CASES))
def test_a_short_train_run_writes_the_pinned_metrics(preset, tiny_policy_dir, tmp_path):
    pinned = json.loads(PINS.read_text())[preset]
    assert_close(train_run(preset, tiny_policy_dir, tmp_path), pinned, preset)


if __name__ == "__main__":
    from sao.models.policy import build_tiny_policy, save_policy
    from sao.models.tokenizer import build_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        policy_dir = Path(tmp) / "policy"
        tokenizer = build_tokenizer()
        save_policy(build_tiny_policy(tokenizer, seed=0), tokenizer, policy_dir)
        pins = {}
        for preset in CASES:
            (Path(tmp) / preset).mkdir()
            pins[preset] = train_run(preset, policy_dir, Path(tmp) / preset)
    PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
