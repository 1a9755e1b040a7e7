"""A warm start records what it was trained on, and a stale one is named when a run uses it."""

import json

import pytest

import sao.warmstart.record as record_module
from sao.config import SFTConfig, load_config
from sao.runtime.starting_policy import starting_policy
from sao.warmstart.record import (
    RECORD_FILE,
    options_beyond_defaults,
    stale_reason,
    teacher_fingerprint,
    write_record,
)
from sao.warmstart.sft import warm_start


def _write(directory, env="calc"):
    directory.mkdir(parents=True, exist_ok=True)
    write_record(directory, env, given_demonstrations=False, num_demonstrations=8, seed=0)


def test_a_fresh_record_fits_its_environment_and_no_other(tmp_path):
    _write(tmp_path, "calc")
    saved = json.loads((tmp_path / RECORD_FILE).read_text())
    assert saved["env"] == "calc" and saved["teacher_fingerprint"] == teacher_fingerprint("calc")
    assert stale_reason(tmp_path, "calc") is None
    assert "trained for env 'calc', not 'code_repair'" in stale_reason(tmp_path, "code_repair")


def test_a_changed_teacher_makes_the_record_stale(tmp_path, monkeypatch):
    _write(tmp_path, "calc")
    real = record_module.make_demonstrations

    def reworded(name, n, seed):
        return [
            [(text.replace("=", " equals "), is_action) for text, is_action in demo]
            for demo in real(name, n, seed)
        ]

    monkeypatch.setattr(record_module, "make_demonstrations", reworded)
    assert "changed since it was trained" in stale_reason(tmp_path, "calc")


def test_without_a_record_nothing_is_claimed(tmp_path):
    assert stale_reason(tmp_path, "calc") is None
    (tmp_path / RECORD_FILE).write_text("{not json")
    assert "unreadable" in stale_reason(tmp_path, "calc")


def test_a_run_starting_from_a_stale_warm_start_warns_on_stderr(tmp_path, capsys):
    policy = tmp_path / "policy"
    _write(policy, "calc")
    config = load_config("sao", None, ["env.name=code_repair", f"model.path={policy}"])
    assert starting_policy(config, progress=False) == policy
    err = capsys.readouterr().err
    assert "warning: the warm start at" in err and "trained for env 'calc'" in err
    assert f"sao sft --env code_repair --out {policy}" in err

    config = load_config("sao", None, ["env.name=calc", f"model.path={policy}"])
    starting_policy(config, progress=False)
    assert capsys.readouterr().err == ""


def test_sao_eval_names_a_stale_model_or_baseline_on_stderr(tmp_path, capsys, monkeypatch):
    import sao.evaluation.held_out as evaluation
    import sao.models.policy as policy_module

    model, baseline = tmp_path / "model", tmp_path / "baseline"
    _write(model, "code_repair")
    _write(baseline, "calc")
    monkeypatch.setattr(policy_module, "load_policy", lambda path: (None, None))
    scores = {
        "accuracy": 0.5,
        "accuracy_ci95": (0.1, 0.9),
        "n": 2,
        "samples": 1,
        "mean_turns": 1.0,
        "tool_call_rate": 0.0,
        "format_error_rate": 0.0,
        "task_scores": [1.0, 0.0],
    }
    monkeypatch.setattr(evaluation, "evaluate", lambda *args, **kwargs: dict(scores))
    config = load_config("sao", None, ["env.name=calc"])
    assert evaluation.run_eval_command(config, model, 2, None, 0, baseline=baseline) == 0
    err = capsys.readouterr().err
    assert f"sao eval: warning: the warm start at {model} may not fit" in err
    assert "trained for env 'code_repair', not 'calc'" in err
    assert f"warm start at {baseline}" not in err


def test_options_beyond_defaults_keeps_only_what_the_teacher_does_not_use():
    assert options_beyond_defaults("code_repair", {"max_output_chars": 400}) == {}
    assert options_beyond_defaults("code_repair", {"max_output_chars": 200, "timeout_s": 2.0}) == {
        "max_output_chars": 200
    }
    assert options_beyond_defaults("calc", {"no_such_option": 1}) == {"no_such_option": 1}


def test_options_beyond_defaults_leaves_out_options_that_change_only_rewards():
    reward_only = {"malformed_reward": -0.5, "unsubmitted_reward": -0.1, "grade_unsubmitted": False}
    assert options_beyond_defaults("code_repair", reward_only) == {}
    assert options_beyond_defaults("code_repair", {**reward_only, "max_turns": 3}) == {
        "max_turns": 3
    }


@pytest.mark.parametrize(("options", "noted"), [({"max_output_chars": 12}, True), ({}, False)])
def test_warm_start_saves_its_record_and_notes_options_its_teacher_ignores(
    tmp_path, capsys, monkeypatch, options, noted
):
    import sao.warmstart.sft as warmstart

    monkeypatch.setattr(warmstart, "train_sft", lambda *args, **kwargs: [1.0])
    out = tmp_path / "policy"
    config = SFTConfig(steps=1, batch_size=2, warmup_steps=1, num_demonstrations=4)
    warm_start("calc", out, config, progress=False, env_options=options)
    assert ("env.options {'max_output_chars': 12}" in capsys.readouterr().out) is noted
    saved = json.loads((out / RECORD_FILE).read_text())
    assert saved["demonstrations"] == "teacher" and saved["num_demonstrations"] == 4
    assert stale_reason(out, "calc") is None
