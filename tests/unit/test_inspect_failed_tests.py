"""`sao inspect failed-tests`: the command after each failed test, by turns left."""

import json

from sao.analysis import failed_tests as failed_test_choices
from sao.cli import main


def _episode(events, reward):
    return {"reward": reward, "metadata": {"info": {"events": events}}}


RETRIED = _episode(["replace", "test_failed", "replace", "test_passed", "submit"], 1.0)
GAVE_UP = _episode(["replace", "test_failed", "submit"], 0.0)
RAN_OUT = _episode(["replace", "test_failed", "replace", "test_failed", "error"], 0.0)


def test_each_choice_is_keyed_by_the_turns_left_when_it_was_made():
    table = failed_test_choices.choices([RETRIED, GAVE_UP, RAN_OUT], max_turns=5)
    assert dict(table[3]) == {("replace", True): 1, ("submit", False): 1, ("replace", False): 1}
    assert dict(table[1]) == {("error", False): 1}
    assert set(table) == {3, 1}


def test_runs_are_pooled_and_described_with_shares_and_payouts():
    one = failed_test_choices.choices([RETRIED, GAVE_UP], max_turns=5)
    two = failed_test_choices.choices([GAVE_UP, RAN_OUT], max_turns=5)
    lines = failed_test_choices.describe(failed_test_choices.merge([one, two]))
    assert lines == [
        "  3 turns left,    4 choices: replace 50% (paid 1/2), submit 50% (paid 0/2)",
        "  1 turn left,    1 choices: error 100% (paid 0/1)",
    ]


def test_the_command_line_reads_a_run_directory(tmp_path, capsys):
    (tmp_path / "config.yaml").write_text("env:\n  max_turns: 5\n")
    rows = [RETRIED, GAVE_UP, RAN_OUT]
    (tmp_path / "trajectories.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main(["inspect", "failed-tests", str(tmp_path), "--episodes", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "first 1 episodes of 1 run(s):"
    assert out[1] == "  3 turns left,    1 choices: replace 100% (paid 1/1)"
    assert out[-1] == "  1 turn left,    1 choices: error 100% (paid 0/1)"
