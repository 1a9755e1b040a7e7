"""Environment errors on the tiny model: a `sao train` run on `flaky_calc` (an environment that
raises on chosen steps, registered from outside the package: `tests/flaky_env.py`) keeps each
errored trajectory on disk with its error, counts it, never trains it, and stops with one line
when errors are too many."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sao.config import load_config
from sao.learner.step import Learner
from sao.models.policy import load_policy
from sao.plumbing.stopped import RunStopped
from sao.runtime.checkpoints import load_latest_checkpoint
from sao.runtime.env_errors import EnvErrorWatch, is_env_error, is_set_aside, take_batch
from sao.runtime.local_backend import LocalBackend
from sao.runtime.run_dir import read_metrics, read_trajectories
from sao.runtime.train import train
from small_run import SMALL_RUN, small_config

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"
FLAKY = ("env.name=flaky_calc", "env.options={fail_every: 3}")


@pytest.fixture(scope="module")
def flaky():
    """`flaky_calc` registered as `--import flaky_env` registers it, for this module only: tests
    of the registry that run later see the built-in environments alone."""
    from sao.envs import registry

    before = dict(registry._REGISTERED)
    yield importlib.import_module("flaky_env")
    registry._REGISTERED.clear()
    registry._REGISTERED.update(before)
    sys.modules.pop("flaky_env", None)


def spy_on_training(monkeypatch) -> list[list[dict]]:
    """Every batch `Learner.step` trains, as its trajectories' metadata."""
    trained: list[list[dict]] = []
    step = Learner.step

    def spy(self, trajectories):
        trained.append([dict(t.metadata) for t in trajectories])
        return step(self, trajectories)

    monkeypatch.setattr(Learner, "step", spy)
    return trained


def test_errored_trajectories_are_kept_counted_and_never_trained(
    flaky, tiny_policy_dir, tmp_path, monkeypatch
):
    trained = spy_on_training(monkeypatch)
    config = small_config(tiny_policy_dir, *FLAKY, "train.steps=3", "train.mode=sync")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    summary = train(config, run_dir, progress=False)

    logged = read_trajectories(run_dir)
    errored = [t for t in logged if is_env_error(t)]
    assert errored, "the run met no environment error: the test proves nothing"
    for t in errored:
        assert t.metadata["error"].startswith(f"RuntimeError: {flaky.MESSAGE} at step 1 of ")
        assert flaky.chosen(t.metadata["task_id"], 3) and t.reward == 0.0
    assert all(not flaky.chosen(t.metadata["task_id"], 3) for t in logged if not is_env_error(t))

    # Never trained: every batch the learner stepped on is B good trajectories, under the weights
    # that train on them (sync), and the errored ones were replaced rather than trained.
    assert len(trained) == 3
    assert all(len(batch) == 4 for batch in trained)
    assert all(m["end_reason"] != "env_error" for batch in trained for m in batch)
    assert [{m["admitted_version"] for m in batch} for batch in trained] == [{0}, {1}, {2}]
    _, record = load_latest_checkpoint(run_dir)
    errored_taken = sorted(record.set_aside_indices)
    assert errored_taken and set(errored_taken) <= {t.metadata["index"] for t in errored}
    assert not set(errored_taken) & set(record.trained_indices)
    assert len(record.trained_indices) == 12

    # Counted, step by step, and in the summary.
    rows = [r for r in read_metrics(run_dir) if r["step"] > 0]
    assert len(rows) == 3 and all("rollout/env_errors" in r for r in rows)
    assert sum(r["rollout/env_errors"] for r in rows) == len(errored_taken)
    assert all(r["rollout/end_env_error"] == 0.0 for r in rows)
    assert summary["env_errors"] == len(errored_taken)
    assert summary["trajectories_set_aside"] == len(errored_taken)
    assert summary["trajectories_trained"] == 12
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk["env_errors"] == summary["env_errors"]

    # A resumed run owes no replacement for the errors already set aside, and trains none.
    resumed = train(
        config.model_copy(update={"train": config.train.model_copy(update={"steps": 4})}),
        run_dir,
        resume=True,
        progress=False,
    )
    assert len(trained) == 4 and len(trained[-1]) == 4
    assert all(m["end_reason"] != "env_error" for m in trained[-1])
    assert {m["admitted_version"] for m in trained[-1]} == {3}
    assert resumed["trajectories_trained"] == 16
    assert resumed["env_errors"] >= summary["env_errors"]


def test_grpo_sets_aside_a_group_with_an_errored_member_and_trains_whole_groups(
    flaky, tiny_policy_dir
):
    config = load_config(
        "grpo",
        None,
        [
            *SMALL_RUN,
            f"model.path={tiny_policy_dir}",
            *FLAKY,
            "rollout.group_size=4",
            "train.batch_size=8",
            "rollout.concurrency=8",
            "train.mode=sync",
        ],
    )
    torch.manual_seed(0)
    policy, tokenizer = load_policy(tiny_policy_dir)
    learner = Learner(policy, config, pad_token_id=tokenizer.pad_token_id)
    backend = LocalBackend.build(config, learner.policy, tokenizer)
    backend.start()
    watch = EnvErrorWatch(window=1000, max_rate=1.0)
    aside = []
    try:
        for _ in range(2):
            batch, set_aside = take_batch(backend, 8, watch, "memory")
            aside += set_aside
            groups: dict[int, list] = {}
            for t in batch:
                groups.setdefault(t.metadata["group_id"], []).append(t)
            assert sorted(map(len, groups.values())) == [4, 4]
            assert not any(map(is_set_aside, batch))
            learner.step(batch)
            backend.publish_weights(learner)
    finally:
        backend.close()
    assert aside, "no group met an environment error: the test proves nothing"
    by_group: dict[int, list] = {}
    for t in aside:
        by_group.setdefault(t.metadata["group_id"], []).append(t)
    for members in by_group.values():
        assert len(members) == 4 and any(map(is_env_error, members))
        assert all(m.metadata.get("group_env_error") for m in members if not is_env_error(m))


def test_value_pretraining_with_nothing_but_errors_stops_the_run(flaky, tiny_policy_dir, tmp_path):
    config = small_config(tiny_policy_dir, "env.name=flaky_calc", "env.options={fail_every: 1}")
    with pytest.raises(RunStopped, match="value pretraining: all 4 episodes ended in an env"):
        train(config, tmp_path, progress=False)
    assert not (tmp_path / "value_pretrain.jsonl").exists()


def test_too_many_errors_stop_sao_train_with_one_line(tiny_policy_dir, tmp_path):
    sets = [
        *SMALL_RUN,
        f"model.path={tiny_policy_dir}",
        "env.options={fail_every: 2}",
        "critic.pretrain.num_trajectories=0",
        "train.env_error_window=12",
        "train.max_env_error_rate=0.25",
    ]
    argv = ["train", "--import", "flaky_env", "--env", "flaky_calc", "--steps", "50"]
    argv += ["--out", str(tmp_path / "run")]
    for item in sets:
        argv += ["--set", item]
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}", "OMP_NUM_THREADS": "1"}
    env.pop("SAO_DEBUG", None)
    result = subprocess.run(
        [sys.executable, "-m", "sao.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("sao train: stopped: ")
    assert "of the last 12 episodes ended in an environment error" in line
    assert "more than train.max_env_error_rate=0.25; the errored trajectories are kept, " in line
    assert line.endswith(f"untrained, in {tmp_path / 'run' / 'trajectories.jsonl'}")
    logged = read_trajectories(tmp_path / "run")
    assert sum(map(is_env_error, logged)) > 3


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_failed_resets_are_replaced_and_counted(
    flaky, tiny_policy_dir, tmp_path, monkeypatch, mode
):
    trained = spy_on_training(monkeypatch)
    config = small_config(
        tiny_policy_dir,
        "env.name=flaky_calc",
        "env.options={fail_every: 0, fail_reset_every: 3}",
        "train.steps=2",
        f"train.mode={mode}",
    )
    summary = train(config, tmp_path, progress=False)
    assert [len(batch) for batch in trained] == [4, 4]
    assert not any(flaky.chosen(m["task_id"], 3) for batch in trained for m in batch)
    rows = [r for r in read_metrics(tmp_path) if r["step"] > 0]
    assert summary["env_errors"] == sum(r["rollout/env_errors"] for r in rows) > 0
    assert summary["trajectories_set_aside"] == 0  # a failed reset leaves no trajectory


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_resets_that_always_fail_stop_the_run(flaky, tiny_policy_dir, tmp_path, mode):
    config = small_config(
        tiny_policy_dir,
        "env.name=flaky_calc",
        "env.options={fail_every: 0, fail_reset_every: 1}",
        "critic.pretrain.num_trajectories=0",
        "train.env_error_window=8",
        f"train.mode={mode}",
    )
    with pytest.raises(RunStopped, match="8 of the last 8 episodes ended in an environment error"):
        train(config, tmp_path, progress=False)
