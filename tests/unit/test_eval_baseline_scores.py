"""`sao eval --baseline-scores`: a baseline's scores reused only when scored exactly as now."""

import json

import pytest

import sao.evaluation.held_out as held_out
import sao.models.policy as policy_module
from sao.cli import main
from sao.config import ConfigError, load_config
from sao.evaluation.scores_file import reusable_scores, weights_digest


def _policy(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(path.name.encode())
    return path


@pytest.fixture
def scoring(monkeypatch):
    """`evaluate` stubbed: each policy scores as its directory's name says; calls are counted."""
    calls = []

    def evaluate(policy, tokenizer, config, n, *, seed, samples, progress):
        calls.append(policy)
        scores = [1.0, 0.0, 1.0, 1.0] if policy == "model" else [0.0, 0.0, 1.0, 0.0]
        return {
            "accuracy": sum(scores) / n,
            "accuracy_ci95": [0.0, 1.0],
            "task_scores": scores[:n],
            "mean_turns": 1.0,
            "tool_call_rate": 0.0,
            "format_error_rate": 0.0,
            "n": n,
            "samples": samples,
        }

    monkeypatch.setattr(policy_module, "load_policy", lambda path: (path.name, None))
    monkeypatch.setattr(held_out, "evaluate", evaluate)
    return calls


def _first_eval(tmp_path):
    model, baseline = _policy(tmp_path / "model"), _policy(tmp_path / "baseline")
    config = load_config("sao", None, ["env.name=calc"])
    first = tmp_path / "first.json"
    assert held_out.run_eval_command(config, model, 4, str(first), 0, baseline=baseline) == 0
    return config, model, baseline, first


def test_the_record_names_the_policy_its_weights_and_the_settings(tmp_path, scoring):
    config, model, baseline, first = _first_eval(tmp_path)
    saved = json.loads(first.read_text())
    record = saved["baseline"]["scored"]
    assert record["policy"] == str(baseline.resolve())
    assert record["weights_sha256"] == weights_digest(baseline) != weights_digest(model)
    assert (record["n"], record["seed"], record["samples"]) == (4, 0, 1)
    assert record["settings"]["rollout.temperature"] == config.rollout.temperature
    assert saved["scored"]["policy"] == str(model.resolve())


def test_reused_scores_give_the_same_paired_difference_without_scoring_again(tmp_path, scoring):
    config, model, _, first = _first_eval(tmp_path)
    assert scoring == ["model", "baseline"]
    reused = reusable_scores(first, config, n=4, seed=0, samples=1)
    second = tmp_path / "second.json"
    assert (
        held_out.run_eval_command(
            config,
            model,
            4,
            str(second),
            0,
            baseline_scores=reused,
            baseline_scores_from=str(first),
        )
        == 0
    )
    assert scoring == ["model", "baseline", "model"]
    before, after = json.loads(first.read_text()), json.loads(second.read_text())
    assert after["paired_difference"] == before["paired_difference"]
    assert after["baseline"]["task_scores"] == before["baseline"]["task_scores"]
    assert after["baseline"]["scores_from"] == str(first)
    # the second eval's file serves a third in turn
    assert reusable_scores(second, config, n=4, seed=0, samples=1)["task_scores"] == [0, 0, 1, 0]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"n": 3}, "scored with n=4, this eval uses 3"),
        ({"seed": 1}, "scored with seed=0"),
        ({"samples": 2}, "scored with samples=1"),
        ({"overrides": ["rollout.temperature=0.5"]}, "rollout.temperature=1.0"),
        ({"overrides": ["env.max_turns=2"]}, "env.max_turns="),
    ],
)
def test_scores_taken_any_other_way_are_refused_by_name(tmp_path, scoring, change, named):
    _, _, _, first = _first_eval(tmp_path)
    config = load_config("sao", None, ["env.name=calc", *change.get("overrides", [])])
    wanted = {
        "n": 4,
        "seed": 0,
        "samples": 1,
        **{k: v for k, v in change.items() if k != "overrides"},
    }
    with pytest.raises(ConfigError, match="--baseline-scores") as refused:
        reusable_scores(first, config, **wanted)
    assert named in str(refused.value) and "\n" not in str(refused.value)


def test_changed_weights_or_a_file_without_a_record_are_refused(tmp_path, scoring):
    config, _, baseline, first = _first_eval(tmp_path)
    (baseline / "model.safetensors").write_bytes(b"trained further")
    with pytest.raises(ConfigError, match="its weights changed since"):
        reusable_scores(first, config, n=4, seed=0, samples=1)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"baseline": {"task_scores": [1.0]}}))
    with pytest.raises(ConfigError, match="no scores with a record"):
        reusable_scores(old, config, n=4, seed=0, samples=1)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a readable eval JSON"):
        reusable_scores(tmp_path / "bad.json", config, n=4, seed=0, samples=1)


def test_the_command_refuses_both_baselines_and_a_bad_file_in_one_line(tmp_path, capsys):
    model, baseline = _policy(tmp_path / "model"), _policy(tmp_path / "baseline")
    (tmp_path / "bad.json").write_text("{}")
    argv = ["eval", "--model", str(model), "--env", "calc", "--n", "4"]
    assert main([*argv, "--baseline", str(baseline), "--baseline-scores", "x.json"]) == 2
    assert main([*argv, "--baseline-scores", str(tmp_path / "bad.json")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "give one" in lines[0] and "no scores with a record" in lines[1]
