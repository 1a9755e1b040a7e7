"""The runtime on the tiny model: scheduler, queue, weight swaps, sync equivalence, resume."""

from __future__ import annotations

import json

import pytest
import torch

from sao.config import load_config
from sao.evaluation.stats import resolution_line, tasks_to_resolve
from sao.learner.step import Learner
from sao.models.policy import build_tiny_policy, load_policy
from sao.models.tokenizer import build_tokenizer
from sao.runtime.drift import StepShares, ending_shares, step_shares
from sao.runtime.local_backend import LocalBackend
from sao.runtime.report import closing_line
from sao.runtime.run_dir import read_metrics, read_trajectories
from sao.runtime.train import train
from small_run import SMALL_RUN, small_config

SMALL = SMALL_RUN


def run_steps(config, steps):
    """Train `steps` learner steps through a LocalBackend; return the learner."""
    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    policy = build_tiny_policy(tokenizer, seed=0)
    learner = Learner(policy, config, pad_token_id=tokenizer.pad_token_id)
    backend = LocalBackend.build(config, learner.policy, tokenizer)
    backend.start()
    batches = []
    try:
        for _ in range(steps):
            batch = backend.next_batch(config.train.batch_size, timeout=120)
            assert len(batch) == config.train.batch_size
            batches.append(batch)
            learner.step(batch)
            backend.publish_weights(learner)
    finally:
        backend.close()
    return learner, batches


def test_async_with_staleness_zero_trains_exactly_like_sync(tiny_policy_dir):
    # Inline environment steps: tool-completion order must not reshuffle decode batches.
    exact = ("rollout.env_workers=0",)
    sync_learner, sync_batches = run_steps(
        small_config(tiny_policy_dir, "train.mode=sync", *exact), 2
    )
    async_learner, async_batches = run_steps(
        small_config(tiny_policy_dir, "train.mode=async", "rollout.max_staleness=0", *exact), 2
    )
    for version, (a, b) in enumerate(zip(sync_batches, async_batches, strict=True)):
        assert [t.token_ids for t in a] == [t.token_ids for t in b]
        assert all(t.staleness(version) == 0 for t in b)
    for (name, p), q in zip(
        sync_learner.policy.named_parameters(), async_learner.policy.parameters(), strict=True
    ):
        assert torch.equal(p, q), name
    for p, q in zip(
        sync_learner.critic.parameters(), async_learner.critic.parameters(), strict=True
    ):
        assert torch.equal(p, q)


def test_published_weights_reach_the_engine(tiny_policy_dir):
    # max_ahead=0: batch k may only start once weights k are published, so every one of its
    # action tokens must carry version k -- proof that the engine picked the weights up.
    config = small_config(tiny_policy_dir, "rollout.max_ahead=0")
    learner, batches = run_steps(config, 3)
    for version, batch in enumerate(batches):
        versions = {
            v for t in batch for v, m in zip(t.policy_versions, t.action_mask, strict=True) if m
        }
        assert versions == {version}
    indices = [t.metadata["index"] for batch in batches for t in batch]
    assert len(indices) == len(set(indices)), "a trajectory was handed out twice"


def test_grpo_releases_whole_groups_only(tiny_policy_dir):
    config = load_config(
        "grpo",
        None,
        [
            *SMALL,
            f"model.path={tiny_policy_dir}",
            "rollout.group_size=4",
            "train.batch_size=8",
            "rollout.concurrency=8",
        ],
    )
    learner, batches = run_steps(config, 1)
    groups: dict[int, int] = {}
    for t in batches[0]:
        groups[t.metadata["group_id"]] = groups.get(t.metadata["group_id"], 0) + 1
    assert sorted(groups.values()) == [4, 4]
    prompts = {t.metadata["group_id"]: t.metadata["task_id"] for t in batches[0]}
    assert all(t.metadata["task_id"] == prompts[t.metadata["group_id"]] for t in batches[0])


def test_train_writes_the_run_directory_and_resumes_without_loss(tiny_policy_dir, tmp_path):
    config = small_config(tiny_policy_dir, "train.steps=2", "train.checkpoint_every=1")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    summary = train(config, run_dir, progress=False)
    for name in ("metrics.jsonl", "trajectories.jsonl", "summary.json", "plots/reward.png"):
        assert (run_dir / name).exists(), name
    assert summary["trajectories_trained"] == 8
    assert set(summary) >= {"initial_accuracy", "final_accuracy", "wall_s"}
    gain = summary["accuracy_gain"]  # paired over the same held-out tasks
    assert gain["n"] == summary["eval_n"]
    expected = summary["final_accuracy"] - summary["initial_accuracy"]
    assert abs(gain["difference"] - expected) < 1e-9
    # The eval's resolution of train.eval_effect (default 0.10), from that paired gain.
    # A tiny policy may score every task alike: a measured SD of 0 is replaced by the 0.5 bound.
    resolution = summary["eval_resolution"]
    low, high = gain["difference_ci95"]
    expected_sd = gain["sd"] if gain["sd"] > 0 else 0.5
    assert resolution["power_sd"] == expected_sd
    assert resolution["sd_bounded"] == (gain["sd"] == 0)
    if not resolution["sd_bounded"]:
        assert resolution["half_width"] == pytest.approx((high - low) / 2)
    assert resolution["half_width"] == pytest.approx(1.96 * expected_sd / gain["n"] ** 0.5)
    assert resolution["effect"] == 0.10 and resolution["n"] == summary["eval_n"]
    assert resolution["resolves"] == (resolution["detection_chance"] >= 0.90 - 1e-6)
    assert resolution["eval_n_needed"] == tasks_to_resolve(expected_sd, 0.10)
    assert closing_line(summary) == f"sao train: {resolution_line(gain, resolution)}"
    completed_first = read_trajectories(run_dir)
    # Each step row carries how its trained batch ended, counted again from the trajectory log.
    book = json.loads((run_dir / "checkpoints" / "step_2" / "record.json").read_text())
    by_index = {t.metadata["index"]: t for t in completed_first}
    rows = [r for r in read_metrics(run_dir) if r["step"] > 0]
    for row, start in zip(rows, (0, 4), strict=True):
        batch = [by_index[i].metadata for i in book["trained_indices"][start : start + 4]]
        assert step_shares(row) == StepShares(row["step"], 4, ending_shares(batch))
        assert row["rollout/end_answer"] + row["rollout/end_no_answer"] == 1.0
        assert row["rollout/env_errors"] == 0  # calc never raised: nothing was set aside
    assert summary["env_errors"] == summary["trajectories_set_aside"] == 0
    # Two steps make windows of one step each: step 1 against step 2.
    drift = summary["drift"]
    assert drift["window_steps"] == 1 and drift["first_steps"] == [1, 1]
    assert drift["last_steps"] == [2, 2] and drift["warn_rise"] == 0.10
    p1, p2 = rows[0]["rollout/end_no_answer"], rows[1]["rollout/end_no_answer"]
    assert drift["first"]["no_answer"] == p1 and drift["last"]["no_answer"] == p2
    noise = 2 * (p1 * (1 - p1) / 4 + p2 * (1 - p2) / 4) ** 0.5
    assert drift["noise"] == pytest.approx(noise)
    assert drift["warned"] == (p2 - p1 > max(0.10, noise)) == drift["drifted_at_end"]

    # Continue to step 4, as after a kill: what completed but was not trained goes first.
    resumed = train(
        small_config(tiny_policy_dir, "train.steps=4"), run_dir, resume=True, progress=False
    )
    book = json.loads((run_dir / "checkpoints" / "step_4" / "record.json").read_text())
    trained = book["trained_indices"]
    assert len(trained) == len(set(trained)) == 16, "a trajectory was trained twice"
    leftover = {t.metadata["index"] for t in completed_first} - set(trained)
    # Only trajectories that completed after the last batch may remain untrained.
    assert all(i > max(trained[:8]) for i in leftover)
    assert resumed["trajectories_completed"] == len(read_trajectories(run_dir))
    assert resumed["trajectories_completed"] == (
        resumed["trajectories_trained"] + resumed["trajectories_untrained_in_queue"]
    )


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_both_backends_train_end_to_end(tiny_policy_dir, tmp_path, backend):
    config = small_config(tiny_policy_dir, "train.steps=2", f"train.backend={backend}")
    summary = train(config, tmp_path, progress=False)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(r["rollout/staleness_max"] <= 1 for r in steps)
    assert summary["trajectories_trained"] == 8
    logged = read_trajectories(tmp_path)
    assert len(logged) == summary["trajectories_completed"] >= 8
    # The learner's weights changed, so step 2's batch was scored by a different critic/policy.
    assert steps[0]["actor/entropy"] != steps[1]["actor/entropy"]
    # The trained policy is saved like a warm start, with the learner's final weights.
    saved, _ = load_policy(tmp_path / "policy")
    start, _ = load_policy(tiny_policy_dir)
    final = torch.load(tmp_path / "checkpoints" / "step_2" / "learner.pt", weights_only=False)
    for name, tensor in saved.state_dict().items():
        assert torch.equal(tensor, final["policy"][name]), name
    pairs = zip(saved.parameters(), start.parameters(), strict=True)
    assert any(not torch.equal(a, b) for a, b in pairs)


def test_cli_resume_takes_the_saved_config_and_new_steps(tiny_policy_dir, tmp_path):
    from sao.cli import main

    run_dir = tmp_path / "run"
    flags = [arg for item in [*SMALL, f"model.path={tiny_policy_dir}"] for arg in ("--set", item)]
    assert main(["train", "--out", str(run_dir), "--steps", "1", *flags]) == 0
    # Only --steps is given again: everything else (batch size, model) comes from config.yaml.
    assert main(["train", "--resume", str(run_dir), "--steps", "2"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["trajectories_trained"] == 8


def test_a_run_finished_early_on_resume_evaluates_its_last_step(
    tiny_policy_dir, tmp_path, monkeypatch
):
    """`--resume RUN --steps N` at a checkpoint that had no eval at its step (the run was set
    for more steps) must measure the final accuracy, not report the initial eval as final."""
    import shutil

    import sao.runtime.train as train_module

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    train(small_config(tiny_policy_dir, "train.steps=2", "train.checkpoint_every=1"), run_dir)
    shutil.rmtree(run_dir / "checkpoints" / "step_2")  # as if stopped after step 1's checkpoint
    calls = []
    real = train_module.held_out_eval

    def counted(*args, **kwargs):
        calls.append(1)
        return {**real(*args, **kwargs), "accuracy": 0.5}

    monkeypatch.setattr(train_module, "held_out_eval", counted)
    summary = train(
        small_config(tiny_policy_dir, "train.steps=1"), run_dir, resume=True, progress=False
    )
    assert len(calls) == 1 and summary["final_accuracy"] == 0.5
    book = json.loads((run_dir / "checkpoints" / "step_1" / "record.json").read_text())
    assert book["eval_accuracy_at_step"] == 0.5
