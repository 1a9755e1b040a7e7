"""scripts/calc_failures.py: what a failed calc episode's text shows."""

from repo_scripts import load_script

calc_failures = load_script("calc_failures")
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
