"""`train.learner_ranks`: a whole `sao train` run whose learner is two gloo ranks sharding the
tiny model with FSDP2, its checkpoint resumed by a one-process learner, and a failing rank."""

from __future__ import annotations

import json

import pytest
import torch

from sao.models.policy import load_policy
from sao.runtime.checkpoints import load_latest_checkpoint
from sao.runtime.learner_ranks import LearnerRanks
from sao.runtime.train import train
from small_run import small_config


def test_a_run_on_two_learner_ranks_trains_and_resumes_on_one(
    tiny_policy_dir, tmp_path, monkeypatch
):
    started = []
    start = LearnerRanks.__init__

    def spy(self, policy, config, *rest):
        started.append(config.train.learner_ranks)
        start(self, policy, config, *rest)

    monkeypatch.setattr(LearnerRanks, "__init__", spy)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = small_config(
        tiny_policy_dir, "train.learner_ranks=2", "train.steps=2", "train.checkpoint_every=1"
    )
    summary = train(config, run_dir, progress=False)
    assert started == [2]
    assert summary["steps"] == 2 and summary["trajectories_trained"] == 8
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in rows if "actor/grad_norm" in r]
    assert len(trained) == 2 and all(r["actor/grad_norm"] > 0 for r in trained)
    # Each rank trained part of the batch of 4: the busiest took at least half, not all.
    for r in trained:
        total, busiest = r["learner/rank_tokens_total"], r["learner/rank_tokens_max"]
        assert total / 2 <= busiest < total

    # The checkpoint is whole (the one-process layout) and the saved policy is the ranks' weights.
    state, record = load_latest_checkpoint(run_dir)
    assert state["version"] == record.step == 2
    saved, _ = load_policy(run_dir / "policy")
    for name, tensor in saved.state_dict().items():
        torch.testing.assert_close(tensor, state["policy"][name], msg=name)

    resumed = train(
        small_config(tiny_policy_dir, "train.steps=3"), run_dir, resume=True, progress=False
    )
    assert resumed["steps"] == 3 and resumed["trajectories_trained"] == 12
    assert started == [2]  # the resumed run's learner was one process


def test_a_failing_rank_stops_the_call_with_its_error(tiny_policy_dir):
    policy, tokenizer = load_policy(tiny_policy_dir)
    config = small_config(
        tiny_policy_dir,
        "train.learner_ranks=2",
        "critic.enabled=false",
        "algo.advantage=running_mean",
        "algo.adaptive_lambda_alpha=null",
    )
    learner = LearnerRanks(policy, config, None, tokenizer.pad_token_id)
    try:
        with pytest.raises(RuntimeError, match=r"learner rank \d: step failed: .*no trajectories"):
            learner.step([])
        with pytest.raises(RuntimeError, match="after close"):
            learner.state_dict()
    finally:
        learner.close()
