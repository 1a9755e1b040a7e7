"""The command line: one config path for every command, one line for a config error."""

import pytest
import yaml

from sao.cli import main
from sao.config import PRESETS, load_config, save_config
from sao.envs.registry import known_env_names
from sao.presets import is_algorithm_key, leaf_items


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("train", "sft", "eval", "presets", "config", "inspect"):
        assert command in out


def test_config_prints_the_resolved_tree(capsys):
    assert main(["config", "--preset", "grpo", "--env", "style_stream"]) == 0
    tree = yaml.safe_load(capsys.readouterr().out)
    assert tree["preset"] == "grpo" and tree["rollout"]["group_size"] == 8
    assert tree["env"]["name"] == "style_stream" and tree["env"]["max_turns"] == 1


def test_bad_override_is_one_line_and_exit_code_2(capsys):
    assert main(["config", "--set", "algo.eps_low=1.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "sao config: algo.eps_low: Input should be less than 1, got 1.5"


@pytest.mark.parametrize("argv", [["config", "--env", "nope"], ["sft", "--env", "nope"]])
def test_unknown_environment_names_the_known_ones(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "env.name: unknown environment 'nope'; known: calc, code_repair" in err


def test_sft_takes_overrides_and_names_a_bad_one(capsys):
    assert main(["sft", "--env", "calc", "--set", "sft.micro_batch_tokens=many"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sao sft: sft.micro_batch_tokens:")


def test_sft_overrides_reach_the_sft_config(monkeypatch, tmp_path):
    import sao.warmstart.sft

    seen = {}
    monkeypatch.setattr(
        sao.warmstart.sft,
        "warm_start",
        lambda env, out, config, seed, model_path, env_options: seen.update(
            env=env, config=config, model_path=model_path, env_options=env_options
        ),
    )
    argv = ["sft", "--env", "code_repair", "--out", str(tmp_path), "--steps", "7"]
    assert main([*argv, "--set", "sft.micro_batch_tokens=2048"]) == 0
    assert seen["env"] == "code_repair"
    assert seen["config"].micro_batch_tokens == 2048 and seen["config"].steps == 7
    assert seen["config"].batch_size == 32  # code_repair's packaged sft section still applies
    assert seen["model_path"] is None  # the tiny default
    packaged = {"max_output_chars": 400, "timeout_s": 2.0, "unsubmitted_reward": -0.2}
    assert seen["env_options"] == packaged  # code_repair.yaml
    model = _fake_policy(tmp_path / "mine")
    assert main([*argv, "--set", f"model.path={model}"]) == 0
    assert seen["model_path"] == str(model)


def test_sft_takes_a_config_file_and_a_preset(monkeypatch, tmp_path):
    import sao.warmstart.sft

    seen = {}
    monkeypatch.setattr(
        sao.warmstart.sft,
        "warm_start",
        lambda env, out, config, seed, model_path, env_options: seen.update(out=out, seed=seed),
    )
    (tmp_path / "mine.yaml").write_text("train:\n  seed: 5\nmodel:\n  warm_start_dir: ws_{env}\n")
    monkeypatch.chdir(tmp_path)
    argv = ["sft", "--config", "mine.yaml", "--preset", "grpo_dis", "--env", "style_stream"]
    assert main(argv) == 0
    # The same warm-start directory `sao train` would look in, under the same config.
    assert str(seen["out"]) == "ws_style_stream" and seen["seed"] == 5


def _env_names():
    return [
        f"{family}:basic_arithmetic" if family == "reasoning_gym" else family
        for family in known_env_names()
    ]


def _algorithm_settings(argv, capsys):
    assert main(["config", *argv]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # no algorithm override to warn about
    tree = leaf_items(yaml.safe_load(captured.out))
    return {key: value for key, value in tree.items() if is_algorithm_key(key)}


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_preset_is_the_same_algorithm_on_every_environment(capsys, preset):
    reference = _algorithm_settings(["--preset", preset], capsys)
    assert set(reference) >= {"algo.lambda_actor", "algo.advantage", "critic.k_updates"}
    for env in _env_names():
        assert _algorithm_settings(["--env", env, "--preset", preset], capsys) == reference, env


def test_sao_on_code_repair_runs_skip_observation_gae_and_sao_mc_is_monte_carlo():
    sao = load_config("sao", overrides=["env.name=code_repair"])
    assert (sao.algo.advantage, sao.algo.adaptive_lambda_alpha) == ("token_gae", 1.5)
    mc = load_config("sao_mc", overrides=["env.name=code_repair"]).algo
    assert (mc.lambda_actor, mc.adaptive_lambda_alpha) == (1.0, None)
    fixed = load_config("sao_lambda095", overrides=["env.name=code_repair"]).algo
    assert (fixed.lambda_actor, fixed.adaptive_lambda_alpha) == (0.95, None)


def test_an_algorithm_override_is_named_on_stderr(capsys):
    assert main(["config", "--preset", "grpo", "--set", "algo.eps_high=0.3"]) == 0
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out)["algo"]["eps_high"] == 0.3  # honoured ...
    assert captured.err == "sao config: warning: algo.eps_high=0.3 overrides preset grpo's 0.28\n"


@pytest.mark.parametrize("command", ["eval", "sft"])
def test_commands_that_do_not_train_with_the_algorithm_name_no_override(command, capsys, tmp_path):
    # The config is read and checked before a missing model or a taken output stops the command.
    taken = tmp_path / "taken"
    taken.write_text("")
    args = ["--model", str(tmp_path / "absent")] if command == "eval" else ["--out", str(taken)]
    code = main([command, "--preset", "grpo", "--set", "algo.eps_high=0.3", *args])
    err = capsys.readouterr().err
    assert code != 0 and ("absent" in err or "taken" in err)
    assert "overrides preset" not in err


def test_presets_lists_each_preset_with_its_description(capsys):
    assert main(["presets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(PRESETS)
    assert lines[1].split(maxsplit=1)[1] == PRESETS[lines[1].split()[0]].description
    assert lines[0].split(maxsplit=1)[1] == PRESETS["sao"].description


def _fake_policy(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(b"")
    return path


def test_eval_run_uses_the_runs_own_config_and_policy(monkeypatch, tmp_path):
    import sao.evaluation.held_out

    run = tmp_path / "run"
    run.mkdir()
    overrides = ["env.name=code_repair", "rollout.top_p=0.9", "train.seed=3"]
    save_config(load_config("grpo_dis", overrides=overrides), run / "config.yaml")
    _fake_policy(run / "policy")
    seen = {}
    monkeypatch.setattr(
        sao.evaluation.held_out,
        "run_eval_command",
        lambda config, model, **kw: seen.update(kw, config=config, model=model) or 0,
    )
    assert main(["eval", "--run", str(run), "--set", "rollout.temperature=0.7"]) == 0
    config = seen["config"]
    assert config.preset == "grpo_dis" and config.env.name == "code_repair"
    assert (config.rollout.top_p, config.rollout.temperature) == (0.9, 0.7)
    assert seen["model"] == run / "policy"
    assert seen["n"] == config.train.eval_n == 100 and seen["seed"] == 3


def test_eval_takes_preset_config_and_temperature_like_train(monkeypatch, tmp_path):
    import sao.evaluation.held_out

    model = _fake_policy(tmp_path / "policy")
    seen = {}
    monkeypatch.setattr(
        sao.evaluation.held_out,
        "run_eval_command",
        lambda config, model, **kw: seen.update(config=config) or 0,
    )
    argv = ["eval", "--model", str(model), "--env", "style_stream", "--preset", "grpo"]
    assert main([*argv, "--temperature", "0.4", "--set", "rollout.top_p=0.8"]) == 0
    config = seen["config"]
    assert config.preset == "grpo" and config.env.name == "style_stream"
    assert (config.rollout.temperature, config.rollout.top_p) == (0.4, 0.8)
