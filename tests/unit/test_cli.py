"""The command line: help lists the commands, config errors are one line with exit code 2."""

import pytest
import yaml

from sao.cli import main


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("train", "sft", "eval", "presets", "config"):
        assert command in out


def test_config_prints_the_resolved_tree(capsys):
    assert main(["config", "--preset", "grpo", "--env", "style_stream"]) == 0
    tree = yaml.safe_load(capsys.readouterr().out)
    assert tree["preset"] == "grpo" and tree["rollout"]["group_size"] == 8
    assert tree["env"]["name"] == "style_stream" and tree["env"]["max_turns"] == 1


def test_bad_override_is_one_line_and_exit_code_2(capsys):
    assert main(["config", "--set", "algo.eps_low=1.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "sao: config error: algo.eps_low: Input should be less than 1, got 1.5"


@pytest.mark.parametrize("argv", [["config", "--env", "nope"], ["sft", "--env", "nope"]])
def test_unknown_environment_names_the_known_ones(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "env.name: unknown environment 'nope'; known: calc, code_repair" in err


def test_sft_takes_overrides_and_names_a_bad_one(capsys):
    assert main(["sft", "--env", "calc", "--set", "sft.micro_batch_tokens=many"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sao: config error: sft.micro_batch_tokens:")


def test_sft_overrides_reach_the_sft_config(monkeypatch, tmp_path):
    import sao.warmstart

    seen = {}
    monkeypatch.setattr(
        sao.warmstart,
        "warm_start",
        lambda env, out, config, seed, model_path: seen.update(
            env=env, config=config, model_path=model_path
        ),
    )
    argv = ["sft", "--env", "code_repair", "--out", str(tmp_path), "--steps", "7"]
    assert main([*argv, "--set", "sft.micro_batch_tokens=2048"]) == 0
    assert seen["env"] == "code_repair"
    assert seen["config"].micro_batch_tokens == 2048 and seen["config"].steps == 7
    assert seen["config"].batch_size == 32  # code_repair's packaged sft section still applies
    assert seen["model_path"] is None  # the tiny default
    assert main([*argv, "--set", f"model.path={tmp_path}"]) == 0
    assert seen["model_path"] == str(tmp_path)
