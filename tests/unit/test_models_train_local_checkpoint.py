"""`sao train` on a locally made BPE checkpoint with a chat template (dense Qwen3 and Qwen3-MoE)."""

from __future__ import annotations

import json

import pytest
import torch

from sao.config import load_config
from sao.models.policy import load_policy
from sao.runtime.run_dir import read_trajectories
from sao.runtime.train import train

SMALL = [
    "train.steps=2",
    "train.batch_size=4",
    "rollout.concurrency=4",
    "rollout.max_new_tokens=12",
    "rollout.temperature=0.8",
    "env.max_tokens=160",
    "env.max_turns=2",
    "train.eval_n=2",
    "train.eval_every=0",
    "critic.pretrain.num_trajectories=4",
    "critic.pretrain.max_steps=2",
    "critic.pretrain.batch_size=4",
]


@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_train_runs_on_a_local_bpe_checkpoint(kind, request, tmp_path) -> None:
    start_dir = request.getfixturevalue(f"bpe_qwen3_{kind}_dir")
    config = load_config("sao", None, [*SMALL, f"model.path={start_dir}"])
    summary = train(config, tmp_path, progress=False)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert summary["trajectories_trained"] == 8
    # The first batch was sampled by the weights the learner starts from: the learner's fp32
    # recomputation on the same ids gives the engine's log-probs back (DIS ratio 1).
    assert steps[0]["actor/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    start, tokenizer = load_policy(start_dir)
    for trajectory in read_trajectories(tmp_path):
        assert tokenizer.decode(trajectory.token_ids[:4]).startswith("<|im_start|>user\n")
    saved, saved_tokenizer = load_policy(tmp_path / "policy")
    assert saved_tokenizer.chat_template == tokenizer.chat_template
    pairs = zip(saved.parameters(), start.parameters(), strict=True)
    assert any(not torch.equal(a, b) for a, b in pairs)
