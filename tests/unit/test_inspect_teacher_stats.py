"""`sao inspect teacher-stats --env NAME`: one command for every environment's teacher."""

import pytest

from sao.cli import main


def _stats(capsys, *argv):
    assert main(["inspect", "teacher-stats", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_calc_prints_accuracy_tool_use_and_an_example(capsys):
    lines = _stats(capsys, "--env", "calc", "--n", "4", "--p-no-tool", "0")
    assert lines[0] == "demonstrations      4 (test, seed 0)"
    assert lines[2] == "tool use            1.000"
    assert lines[lines.index("example:") + 1].startswith("Q: ")


def test_code_repair_prints_the_mistake_mix_in_process_by_default(capsys):
    lines = _stats(capsys, "--env", "code_repair", "--n", "4", "--split", "train")
    assert lines[0] == "demonstrations      4 (train, seed 0, in-process)"
    assert any(line.startswith("retry rate ") for line in lines)


def test_style_stream_prints_a_line_per_preferred_style(capsys):
    lines = _stats(capsys, "--env", "style_stream", "--n", "8", "--request-rate", "0")
    styles = [line.split()[1] for line in lines if line.startswith("preferred ")]
    assert styles == ["cute", "chuunibyou", "classical", "pirate"]
    assert lines[4].startswith("requested share     0.000")


def test_reasoning_gym_takes_its_dataset_from_the_env_name(capsys):
    lines = _stats(capsys, "--env", "reasoning_gym:basic_arithmetic", "--n", "3", "--seed", "1")
    assert lines[0] == "reasoning_gym:basic_arithmetic: 3 demonstrations (seed 1)"
    assert _stats(capsys, "--env", "reasoning_gym", "--n", "3", "--seed", "1")[0] == lines[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "nope"], "--env: no teacher for 'nope'"),
        (["--env", "calc:x"], "--env: no teacher for 'calc:x'"),
        (["--env", "calc", "--sandbox"], "--sandbox: applies to --env code_repair, not calc"),
        (["--env", "code_repair", "--p-bad", "0.2"], "--p-bad: applies to --env style_stream"),
        (["--env", "calc", "--n", "0"], "--n: must be >= 1, got 0"),
    ],
)
def test_bad_input_is_one_line(capsys, argv, message):
    assert main(["inspect", "teacher-stats", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"sao inspect teacher-stats: {message}")
