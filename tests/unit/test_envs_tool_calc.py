"""`tool_calc`: reading replies, stepping the environment, scoring final answers."""

from __future__ import annotations

import pytest

from sao.envs.base import Task
from sao.envs.tool_calc.env import ToolCalcEnv
from sao.envs.tool_calc.protocol import find_answer, parse_reply, render_call, score
from sao.envs.tool_calc.tasks import ToolCalcTaskSource

CALL = '<tool>{"name": "calculator", "arguments": {"expression": "347*29+18"}}</tool>'


def task(answer: str = "10081") -> Task:
    return Task("tool_calc-t", "Q: 347*29+18=?\n", answer, {"expression": "347*29+18"})


def started(max_turns: int = 4) -> ToolCalcEnv:
    env = ToolCalcEnv(max_turns=max_turns)
    assert env.reset(task()) == "Q: 347*29+18=?\n"
    return env


def test_render_call_is_the_tool_call_format_text() -> None:
    assert render_call("347*29+18") == CALL


@pytest.mark.parametrize(
    ("text", "kind", "content", "error"),
    [
        (CALL, "call", "347*29+18", None),
        ("let me compute " + CALL, "call", "347*29+18", None),
        ('<tool>{"name": "calculator", "arguments": "{\\"expression\\": \\"1+1\\"}"}</tool>',
         "call", "1+1", None),
        ("<answer>10081</answer>", "answer", "10081", None),
        ("<answer> 7 </answer>", "answer", " 7 ", None),
        ("10081", "error", "", "no_tag"),
        (CALL + "<answer>1</answer>", "error", "", "both_tags"),
        ("<answer>10081", "error", "", "unclosed_answer"),
        ('<tool>{"name": "calculator"', "error", "", "bad_call"),
        ("<tool>{name: calculator}</tool>", "error", "", "bad_call"),
        ('<tool>{"name": "python", "arguments": {"code": "1"}}</tool>', "error", "", "bad_call"),
        ('<tool>{"name": "calculator", "arguments": {}}</tool>', "error", "", "bad_arguments"),
        ('<tool>{"name": "calculator", "arguments": {"expression": 5}}</tool>',
         "error", "", "bad_arguments"),
        ('<tool>{"name": "calculator", "arguments": {"expression": "1", "x": 2}}</tool>',
         "error", "", "bad_arguments"),
    ],
)  # fmt: skip
def test_parse_reply(text: str, kind: str, content: str, error: str | None) -> None:
    action = parse_reply(text)
    assert (action.kind, action.content, action.format_error) == (kind, content, error)


def test_parse_reply_error_messages() -> None:
    assert parse_reply("hi").message == "error: no tool call or answer"
    assert parse_reply('<tool>{"name": "calculator"').message == "error: call block not closed"
    assert parse_reply("<tool>[1]</tool>").message == "error: call is not a JSON object"
    assert (
        parse_reply('<tool>{"name": "python", "arguments": {}}</tool>').message
        == "error: call to undeclared function 'python'"
    )
    assert (
        parse_reply('<tool>{"name": "calculator", "arguments": {}}</tool>').message
        == "error: calculator takes one string argument 'expression'"
    )


def test_a_call_then_the_right_answer() -> None:
    env = started()
    first = env.step(CALL)
    assert (first.observation, first.reward, first.done) == ("<output>10081</output>", 0.0, False)
    assert first.info["tool_called"] and first.info["tool_error"] is None
    last = env.step("<answer>10081</answer>")
    assert (last.observation, last.reward, last.done) == ("", 1.0, True)
    assert last.info["end_reason"] == "answer" and last.info["correct"]


@pytest.mark.parametrize(("answer", "reward"), [("10081", 1.0), ("10081.0", 1.0), ("10080", 0.0)])
def test_answer_reward_is_an_exact_numeric_match(answer: str, reward: float) -> None:
    result = started().step(f"<answer>{answer}</answer>")
    assert (result.reward, result.done, result.info["end_reason"]) == (reward, True, "answer")
    assert not result.info["tool_called"]


def test_a_non_numeric_answer_scores_zero_and_is_a_format_error() -> None:
    result = started().step("<answer>ten thousand</answer>")
    assert (result.reward, result.done) == (0.0, True)
    assert result.info["format_error"] == "answer_not_a_number"


def test_calculator_refusals_are_observations_not_format_errors() -> None:
    env = started()
    result = env.step(render_call("10081/0"))
    assert result.observation == "<output>error: division by zero</output>"
    assert (result.reward, result.done) == (0.0, False)
    assert result.info["tool_called"] and result.info["tool_error"] == "calculator"
    assert result.info["format_error"] is None
    injected = env.step(render_call("__import__('os').system('echo hi')"))
    assert injected.observation == "<output>error: function calls not allowed</output>"


@pytest.mark.parametrize(
    ("text", "observation"),
    [
        ("10081", "<output>error: no tool call or answer</output>"),
        ('<tool>{"name": "calculator", "arguments": {"expression": "1"}',
         "<output>error: call block not closed</output>"),
        ('<tool>{"name": "search", "arguments": {"q": "x"}}</tool>',
         "<output>error: call to undeclared function 'search'</output>"),
        ('<tool>{"name": "calculator", "arguments": {"expr": "1"}}</tool>',
         "<output>error: calculator takes one string argument 'expression'</output>"),
        ('<tool>{"name": "calculator", "arguments": {"expression": "1"}</tool>',
         "<output>error: call is not valid JSON</output>"),
    ],
)  # fmt: skip
def test_malformed_replies_cost_a_turn_with_an_error_observation(
    text: str, observation: str
) -> None:
    env = started()
    result = env.step(text)
    assert (result.observation, result.reward, result.done) == (observation, 0.0, False)
    assert result.info["format_error"] is not None and not result.info["tool_called"]
    assert env.step("<answer>10081</answer>").reward == 1.0  # the episode goes on


def test_running_out_of_turns_ends_with_zero_reward() -> None:
    env = started(max_turns=2)
    assert not env.step(CALL).done
    last = env.step(CALL)
    assert (last.observation, last.reward, last.done) == ("", 0.0, True)
    assert last.info["end_reason"] == "max_turns"
    with pytest.raises(RuntimeError, match="the episode has ended"):
        env.step("<answer>10081</answer>")


def test_an_answer_on_the_last_turn_still_counts() -> None:
    env = started(max_turns=2)
    env.step("oops")
    assert env.step("<answer>10081</answer>").reward == 1.0


def test_long_results_are_cut() -> None:
    env = ToolCalcEnv(max_output_chars=16)
    env.reset(task())
    assert env.step(render_call("10**30")).observation == "<output>1000000000000...</output>"


def test_bad_settings_and_tasks_are_refused() -> None:
    with pytest.raises(ValueError, match="max_output_chars: must be an int >= 16"):
        ToolCalcEnv(max_output_chars=8)
    with pytest.raises(ValueError, match="max_turns: must be an int >= 1"):
        ToolCalcEnv(max_turns=0)
    with pytest.raises(ValueError, match="task.answer: not a number"):
        ToolCalcEnv().reset(task(answer="many"))


def test_stop_tags_end_a_call_or_an_answer() -> None:
    assert ToolCalcEnv.stop_tags == ("</tool>", "</answer>")


def test_score_reads_the_answer_in_a_final_reply() -> None:
    assert score(task(), "<answer>10081</answer>") == 1.0
    assert score("10081", "The result is <answer>10081.0</answer>.") == 1.0
    assert score(10081, "<answer>10081</answer>") == 1.0
    assert score(task(), "<answer>10080</answer>") == 0.0
    assert score(task(), "10081") == 0.0
    assert score(task(), "<answer>10081") == 0.0
    assert find_answer("a<answer>1</answer><answer>2</answer>") == "1"
    with pytest.raises(ValueError, match="reference: not a number"):
        score("many", "<answer>1</answer>")


def test_tasks_carry_a_prompt_ending_in_a_newline_and_the_reference_expression() -> None:
    from sao.envs.tool_calc.calculator import evaluate

    source = ToolCalcTaskSource()
    train, test = source.train(200, seed=0), source.test(50, seed=0)
    assert not {t.prompt for t in train} & {t.prompt for t in test}
    for t in train + test:
        assert t.prompt.startswith("Q: ") and t.prompt.endswith("\n") and t.prompt.count("\n") == 1
        assert t.task_id.startswith("tool_calc-") and t.meta["env"] == "tool_calc"
        assert evaluate(t.meta["expression"]) == t.answer
    assert {t.meta["difficulty"] for t in train} == {1, 2, 3, 4}
    assert {t.meta["difficulty"] for t in ToolCalcTaskSource(difficulties=2).train(20, 0)} == {2}


def test_the_declared_tool_is_the_one_the_environment_accepts() -> None:
    from sao.envs.tool_calc import TOOL_SPEC

    function = TOOL_SPEC["function"]
    assert TOOL_SPEC["type"] == "function" and function["parameters"]["required"] == ["expression"]
    call = render_call("6*7").replace("calculator", function["name"])
    assert parse_reply(call).kind == "call"
