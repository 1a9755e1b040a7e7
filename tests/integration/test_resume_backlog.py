"""Resuming a run whose checkpoint is older than its trajectory log, with holes in the log."""

from __future__ import annotations

import shutil
import signal

import pytest

from sao.config import load_config
from sao.models.policy import build_tiny_policy, save_policy
from sao.models.tokenizer import build_tokenizer
from sao.plumbing.durable import read_jsonl, rewrite_jsonl
from sao.runtime.checkpoints import checkpoint_steps, load_latest_checkpoint
from sao.runtime.train import train
from small_run import SMALL_RUN

SMALL = [
    *SMALL_RUN,
    "train.checkpoint_every=1",
    "train.keep_checkpoints=5",
]


class _Hung(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Hung


def test_resume_from_step_0_with_fewer_logged_than_a_batch_does_not_wait_forever(tmp_path):
    policy_dir = tmp_path / "policy"
    tokenizer = build_tokenizer()
    save_policy(build_tiny_policy(tokenizer, seed=0), tokenizer, policy_dir)
    config = load_config("sao", None, [*SMALL, f"model.path={policy_dir}", "train.steps=2"])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    train(config, run_dir, progress=False)

    # As after a kill right after step 0's checkpoint, with most of what was in flight lost:
    # only the first and the last logged trajectory survive, fewer than one batch.
    for step in checkpoint_steps(run_dir):
        if step > 0:
            shutil.rmtree(run_dir / "checkpoints" / f"step_{step}")
    rows = read_jsonl(run_dir / "trajectories.jsonl")
    rows.sort(key=lambda row: row["metadata"]["index"])
    survivors = [rows[0], rows[-1]]
    rewrite_jsonl(run_dir / "trajectories.jsonl", survivors)
    first, last = (row["metadata"]["index"] for row in survivors)
    assert last + 1 > 2 * config.train.batch_size, "the log must reach past step 0's admission"

    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(120)
    try:
        train(config, run_dir, resume=True, progress=False)
    except _Hung:
        pytest.fail("the resumed run waited for trajectories that can never arrive")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    _, record = load_latest_checkpoint(run_dir)
    trained = record.trained_indices
    assert len(trained) == len(set(trained)) == 8
    assert trained[:2] == [first, last], "the logged backlog must be trained first, each once"
