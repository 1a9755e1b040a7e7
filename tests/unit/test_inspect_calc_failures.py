"""`sao inspect calc-failures`: what a failed calc episode's text shows."""

import json

from sao.analysis import calc_failures

KINDS = calc_failures.KINDS
QUESTION = "Q: 26*59+7=?\n"


def kind(actions: str) -> str:
    return calc_failures.failure_kind(QUESTION, actions)


def test_an_answer_first_is_a_guess():
    assert kind("<answer>1541</answer>") == KINDS[0]


def test_a_call_without_output_has_no_tool_result():
    assert kind("<python>print(26*59+7)</python><answer>1541</answer>") == KINDS[1]


def test_a_digit_the_question_lacks_is_named():
    assert (
        kind("<python>print(26*39+7)</python><output>1021</output><answer>1021</answer>")
        == KINDS[2]
    )
    assert (
        kind("<python>print(26*59+7+7)</python><output>1548</output><answer>1548</answer>")
        == KINDS[2]
    )


def test_an_answer_that_is_not_the_output_is_named():
    assert (
        kind("<python>print(26*59+7)</python><output>1541</output><answer>1514</answer>")
        == KINDS[3]
    )


def test_the_last_call_counts_and_a_faithful_episode_is_the_last_kind():
    actions = (
        "<python>print(26*59+</python><output>error: syntax</output>"
        "<python>print(26*59-7)</python><output>1527</output><answer>1527</answer>"
    )
    assert kind(actions) == KINDS[4]


def test_the_command_sorts_the_latest_episodes_with_the_runs_tokenizer(tmp_path, capsys):
    from sao.cli import main
    from sao.models.tokenizer import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(tmp_path / "policy")

    def episode(actions: str, reward: float) -> dict:
        question = tokenizer.encode(QUESTION, add_special_tokens=False)
        tail = tokenizer.encode(actions, add_special_tokens=False)
        mask = [0] * len(question) + [1] * len(tail)
        return {"token_ids": question + tail, "action_mask": mask, "reward": reward}

    rows = [
        episode("<answer>1</answer>", 0.0),  # before the latest half: not counted
        episode("<answer>1541</answer>", 1.0),
        episode("<python>print(26*59+7)</python><output>1541</output><answer>1514</answer>", 0.0),
    ]
    (tmp_path / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["inspect", "calc-failures", str(tmp_path), "--last", "0.6"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "2 episodes, 1 failed"
    assert lines[3] == f"| {KINDS[0]} | 1 | 0 | 0.00 |"
    assert lines[6] == f"| {KINDS[3]} | 1 | 1 | 1.00 |"


def test_a_run_without_its_policy_is_one_line(tmp_path, capsys):
    from sao.cli import main

    assert main(["inspect", "calc-failures", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"sao inspect calc-failures: {tmp_path}: no policy/ (not a finished calc run)\n"
