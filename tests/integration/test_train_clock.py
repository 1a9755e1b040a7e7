"""The training clock: evals at points of training time, taken off the clock with the rollout side
paused, and the sample and train counts logged beside it."""

from __future__ import annotations

import time

import pytest

from sao.models.policy import load_policy
from sao.runtime.local_backend import LocalBackend
from sao.runtime.run_dir import read_metrics
from sao.runtime.train import train
from small_run import small_config


def test_evals_by_training_time_are_off_the_clock(tiny_policy_dir, tmp_path):
    # A point every microsecond of training: an eval is due at every step.
    config = small_config(
        tiny_policy_dir, "train.steps=3", "train.eval_every=0", "train.eval_every_s=0.000001"
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    summary = train(config, run_dir, progress=False)
    rows = read_metrics(run_dir)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert rows[0]["time/train_s"] == 0.0 and rows[0]["rollout/trajectories_sampled"] == 0
    assert rows[0]["time/value_pretrain_s"] > 0.0  # the small run pretrains the critic
    steps = rows[1:]
    assert all("eval/accuracy" in r for r in steps)
    assert [r["rollout/trajectories_trained"] for r in steps] == [4, 8, 12]
    assert all(
        r["rollout/trajectories_sampled"] >= r["rollout/trajectories_trained"] for r in steps
    )
    clock = [r["time/train_s"] for r in steps]
    assert clock == sorted(clock)
    # Every eval's seconds add up to the running total, and none of them is on the clock.
    totals = [r["time/eval_total_s"] for r in steps]
    assert totals == pytest.approx(
        [sum(r["time/eval_s"] for r in steps[: k + 1]) for k in range(3)]
    )
    # Rates divide by training time too: with an eval at every step, a rate over wall time
    # would come out far lower.
    for r in steps:
        rate = r["rollout/trajectories_trained"] / r["time/train_s"]
        assert r["perf/trajectories_per_s"] == pytest.approx(rate, rel=0.05)
        assert 0.0 <= r["perf/learner_idle_frac"] <= 1.0
        shares = [r[f"perf/engine_{k}_frac"] for k in ("decode", "env", "swap", "idle")]
        assert all(0.0 <= v <= 1.0 for v in shares)
        assert sum(shares) == pytest.approx(1.0)
        assert shares[0] > 0.0  # the engine decoded
        assert r["perf/engine_batch_mean"] >= 1.0
    # Training time plus eval time fit in the run's wall time (which also holds the start-up,
    # value pretraining and the first eval): an eval counted on the clock would count twice.
    assert steps[-1]["time/train_s"] + totals[-1] <= summary["wall_s"]
    # The learner's own seconds are part of the training time, and its rate is tokens over them.
    learner_s = [r["time/learner_step"] for r in steps]
    assert all(s > 0.0 for s in learner_s) and sum(learner_s) < steps[-1]["time/train_s"]
    for r in steps:
        rate = r["learner/rank_tokens_total"] / r["time/learner_step"]
        assert r["perf/learner_tokens_per_s"] == pytest.approx(rate)
    assert summary["learner_s"] == pytest.approx(sum(learner_s))
    tokens = sum(r["learner/rank_tokens_total"] for r in steps)
    assert summary["learner_tokens_per_s"] == pytest.approx(tokens / sum(learner_s))
    assert 0.1 < summary["peak_rss_gb"] < 64
    phases = summary["peak_rss_gb_by_phase"]
    if phases:  # empty where the kernel does not let a process reset its high-water mark
        assert set(phases) == {
            "warm_start",
            "loading",
            "value_pretraining",
            "evals",
            "training",
            "checkpoints",
            "saving_policy",
        }
        assert max(phases.values()) <= summary["peak_rss_gb"]
        assert all(v > 0.1 for v in phases.values())


def test_a_paused_rollout_samples_nothing_until_resumed(tiny_policy_dir):
    config = small_config(tiny_policy_dir)
    policy, tokenizer = load_policy(tiny_policy_dir)
    backend = LocalBackend.build(config, policy, tokenizer)
    backend.start()
    try:
        assert len(backend.next_batch(2, timeout=120)) == 2
        backend.pause_rollout()
        admitted = backend.rollout_stats()["admitted"]
        completed = backend.rollout_stats()["completed"]
        time.sleep(0.3)  # whatever the machine's speed: a paused thread ticks not at all
        assert backend.rollout_stats()["admitted"] == admitted
        assert backend.rollout_stats()["completed"] == completed
        backend.resume_rollout()
        # The pause is not the engine's idle time: it is kept apart from the wall it divides.
        assert backend.scheduler.stats.paused_s >= 0.3
        assert len(backend.next_batch(2, timeout=120)) == 2
    finally:
        backend.close()


def test_eval_every_s_is_refused_on_the_ray_backend(tiny_policy_dir):
    from sao.config import ConfigError

    with pytest.raises(ConfigError, match="train.eval_every_s: only the local backend"):
        small_config(tiny_policy_dir, "train.backend=ray", "train.eval_every_s=10")


def test_evals_at_steps_pause_the_rollout_side_too(tiny_policy_dir, tmp_path, monkeypatch):
    # Without `train.eval_every_s` an eval is off the clock as well, so rollouts must not run on
    # through it: the time-to-accuracy curves read evals at steps too.
    calls: list[str] = []
    pause, resume = LocalBackend.pause_rollout, LocalBackend.resume_rollout
    monkeypatch.setattr(
        LocalBackend, "pause_rollout", lambda self: (calls.append("pause"), pause(self))[1]
    )
    monkeypatch.setattr(
        LocalBackend, "resume_rollout", lambda self: (calls.append("resume"), resume(self))[1]
    )
    config = small_config(tiny_policy_dir, "train.steps=2", "train.eval_every=1")
    assert config.train.eval_every_s is None
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    train(config, run_dir, progress=False)
    assert calls == ["pause", "resume"] * 2
