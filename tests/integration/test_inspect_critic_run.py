"""`sao inspect critic-ceiling run` on a whole tiny run: one row per kept checkpoint, each with
the run's logged explained variance, the checkpoint critic's and the oracle's ceiling."""

import json

from sao.cli import main
from sao.config import load_config
from sao.runtime.launch import write_config
from sao.runtime.train import train
from small_run import SMALL_RUN


def test_every_checkpoint_gets_its_critic_beside_the_ceiling(tiny_policy_dir, tmp_path, capsys):
    run_dir = tmp_path / "run"
    extra = [f"model.path={tiny_policy_dir}", "train.steps=2", "train.checkpoint_every=1"]
    config = load_config("sao", None, [*SMALL_RUN, *extra, "train.keep_checkpoints=3"])
    run_dir.mkdir()
    write_config(config, run_dir / "config.yaml")
    train(config, run_dir, progress=False)
    capsys.readouterr()

    argv = [str(run_dir), "--trajectories", "8", "--probes", "1", "--continuations", "2"]
    assert main(["inspect", "critic-ceiling", "run", *argv, "--window", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in out if line.startswith("{")]
    assert [r["step"] for r in rows] == [0, 1, 2]
    logged = {
        json.loads(line)["step"]: json.loads(line)["critic/vf_explained_var"]
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if "critic/vf_explained_var" in line
    }
    assert rows[0]["logged_ev"] != rows[0]["logged_ev"]  # NaN: no learner step before step 0
    if logged.get(2) is not None:  # null when the batch's returns had no variance
        assert rows[2]["logged_ev"] == logged[2]
    for row in rows:
        assert row["trajectories"] == 8
        assert len(row["ceiling_ev_95"]) == 2
        assert isinstance(row["critic_ev"], float)
    header = (
        "| step | logged EV (last 1 steps) | critic EV | ceiling EV (95%) | reward | replay gap"
    )
    assert [line for line in out if line.startswith("| step")][0].startswith(header)
    assert len([line for line in out if line.startswith("| ")]) == 4
    assert all(len(row["replay_gap_95"]) == 2 for row in rows)


def test_a_run_without_checkpoints_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "config.yaml").write_text("preset: sao\n")
    assert main(["inspect", "critic-ceiling", "run", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().endswith("has no checkpoints")


def test_the_logged_figure_is_the_mean_of_the_window_up_to_the_checkpoint():
    from sao.analysis.critic_run import _window_mean

    logged = {1: 0.1, 2: 0.2, 3: float("nan"), 4: 0.6}
    assert _window_mean(logged, 4, 3) == (0.2 + 0.6) / 2  # a NaN step does not count
    assert _window_mean(logged, 2, 1) == 0.2
    assert _window_mean(logged, 0, 5) != _window_mean(logged, 0, 5)  # none: NaN


def test_seed_redraws_the_trajectories_and_defaults_to_the_runs(tmp_path, monkeypatch):
    from sao.analysis import critic_run

    (tmp_path / "config.yaml").write_text("preset: sao\ntrain:\n  seed: 3\n")
    (tmp_path / "metrics.jsonl").write_text("")
    (tmp_path / "checkpoints" / "step_40").mkdir(parents=True)
    (tmp_path / "checkpoints" / "step_40" / "learner.pt").write_bytes(b"")
    seeds = []

    def measure(config, *args):
        seeds.append(config.train.seed)
        nan = float("nan")
        return {
            "critic_ev": nan,
            "ev_oracle": nan,
            "ev_oracle_95": [nan, nan],
            "reward_mean": 1.0,
            "trajectories": 8,
            "replay_gap": 0.0,
            "replay_gap_95": [-0.1, 0.1],
            "tool_errors_per_call": nan,
        }

    monkeypatch.setattr(critic_run, "measure", measure)
    assert main(["inspect", "critic-ceiling", "run", str(tmp_path)]) == 0
    assert main(["inspect", "critic-ceiling", "run", str(tmp_path), "--seed", "7"]) == 0
    assert seeds == [3, 7]
