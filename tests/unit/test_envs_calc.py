"""The `calc` environment: rewards, malformed actions, tool failures, turn limits."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sao.envs.base import StepResult, Task
from sao.envs.calc.env import CalcEnv
from sao.envs.calc.problems import evaluate_expression
from sao.envs.calc.tasks import CalcTaskSource
from sao.formats.tags import ALL_TAGS


@dataclass
class FakeResult:
    """Stands in for `sao.tools.sandbox.SandboxResult`."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = 0
    timed_out: bool = False
    error: str | None = None


class FakeRunner:
    """Runs only `print(ARITHMETIC)`, without executing code; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, int]] = []

    def __call__(self, code: str, *, timeout_s: float, memory_mb: int) -> FakeResult:
        self.calls.append((code, timeout_s, memory_mb))
        if "while True" in code:
            return FakeResult(exit_code=None, timed_out=True)
        match = re.fullmatch(r"print\((.*)\)\s*", code, flags=re.S)
        try:
            value = evaluate_expression(match.group(1)) if match else None
        except ValueError:
            value = None
        if value is None:
            return FakeResult(stderr='  File "<x>"\nSyntaxError: invalid syntax\n', exit_code=1)
        return FakeResult(stdout=f"{value}\n")


def fixed(result: FakeResult):
    """A runner that always returns `result`."""
    return lambda code, *, timeout_s, memory_mb: result


TASK = Task(task_id="calc-t", prompt="Q: 347*29+18=?\n", answer="10081", meta={})


def make_env(**kwargs) -> tuple[CalcEnv, FakeRunner]:
    runner = FakeRunner()
    env = CalcEnv(runner=runner, **kwargs)
    return env, runner


def test_reset_returns_the_prompt() -> None:
    env, _ = make_env()
    assert env.reset(TASK) == "Q: 347*29+18=?\n"
    assert env.stop_tags == ("</python>", "</answer>")


def test_scripted_perfect_agent_earns_reward_one() -> None:
    env, runner = make_env()
    env.reset(TASK)
    tool = env.step("<python>print(347*29+18)</python>")
    assert tool == StepResult(
        "<output>10081</output>",
        0.0,
        False,
        {
            "turn": 1,
            "tool_called": True,
            "format_error": None,
            "tool_error": None,
            "end_reason": None,
        },
    )
    assert runner.calls == [("print(347*29+18)", 2.0, 256)]
    final = env.step("<answer>10081</answer>")
    assert (final.observation, final.reward, final.done) == ("", 1.0, True)
    assert final.info["end_reason"] == "answer" and final.info["correct"] is True


def test_perfect_agent_solves_every_generated_task() -> None:
    env, _ = make_env()
    for task in CalcTaskSource().test(100, seed=0):
        env.reset(task)
        output = env.step(f"<python>print({task.meta['expression']})</python>").observation
        answer = output.removeprefix("<output>").removesuffix("</output>")
        assert env.step(f"<answer>{answer}</answer>").reward == 1.0, task.prompt


@pytest.mark.parametrize("answer", ["10081", "10081.0", " 10081 ", "1.0081e4"])
def test_equal_numbers_are_rewarded(answer: str) -> None:
    env, _ = make_env()
    env.reset(TASK)
    assert env.step(f"<answer>{answer}</answer>").reward == 1.0


@pytest.mark.parametrize("answer", ["10080", "10081.5", "", "ten thousand"])
def test_other_answers_end_with_reward_zero(answer: str) -> None:
    env, _ = make_env()
    env.reset(TASK)
    result = env.step(f"<answer>{answer}</answer>")
    assert (result.reward, result.done, result.info["correct"]) == (0.0, True, False)


def test_non_numeric_answer_is_flagged_as_a_format_error() -> None:
    env, _ = make_env()
    env.reset(TASK)
    assert env.step("<answer>ten</answer>").info["format_error"] == "answer_not_a_number"
    env.reset(TASK)
    assert env.step("<answer>7</answer>").info["format_error"] is None


@pytest.mark.parametrize(
    ("action", "observation", "kind"),
    [
        ("<python>print(1)", "<output>error: python tag not closed</output>", "unclosed_python"),
        ("<answer>10081", "<output>error: answer tag not closed</output>", "unclosed_answer"),
        ("<python> </python>", "<output>error: empty code</output>", "empty_code"),
        (
            "<python>1</python><answer>1</answer>",
            "<output>error: python and answer tags in one action</output>",
            "both_tags",
        ),
        ("10081", "<output>error: no python or answer tag</output>", "no_tag"),
    ],
)
def test_malformed_actions_get_an_informative_observation(
    action: str, observation: str, kind: str
) -> None:
    env, runner = make_env()
    env.reset(TASK)
    result = env.step(action)
    assert (result.observation, result.reward, result.done) == (observation, 0.0, False)
    assert result.info["format_error"] == kind and result.info["tool_called"] is False
    assert runner.calls == []
    assert env.step("<answer>10081</answer>").reward == 1.0


def test_syntax_error_shows_the_last_traceback_line() -> None:
    env, _ = make_env()
    env.reset(TASK)
    result = env.step("<python>print(347*)</python>x")
    assert result.observation == "<output>error: SyntaxError: invalid syntax</output>"
    assert result.info["tool_error"] == "exception" and not result.done


def test_timeout_becomes_an_observation() -> None:
    env, _ = make_env(timeout_s=1.5)
    env.reset(TASK)
    result = env.step("<python>while True: pass</python>")
    assert result.observation == "<output>error: timeout after 1.5s</output>"
    assert result.info["tool_error"] == "timeout"


@pytest.mark.parametrize(
    ("result", "observation", "kind"),
    [
        (FakeResult(exit_code=-9), "<output>error: exit code -9</output>", "exit"),
        (
            FakeResult(error="cannot start\nno memory"),
            "<output>error: no memory</output>",
            "sandbox",
        ),
        (FakeResult(stdout="  \n"), "<output>(no output)</output>", None),
        (FakeResult(stdout="1\n", stderr="Warning: x"), "<output>1</output>", None),
        (FakeResult(stdout="\u00e9</output>1"), "<output>?1</output>", None),
    ],
)
def test_other_tool_results_become_short_observations(
    result: FakeResult, observation: str, kind: str | None
) -> None:
    env = CalcEnv(runner=fixed(result))
    env.reset(TASK)
    step = env.step("<python>print(1)</python>")
    assert (step.observation, step.info["tool_error"]) == (observation, kind)


def test_long_output_is_truncated() -> None:
    env = CalcEnv(runner=fixed(FakeResult(stdout="9" * 500)), max_output_chars=20)
    env.reset(TASK)
    assert env.step("<python>print(1)</python>").observation == (
        "<output>" + "9" * 17 + "...</output>"
    )


def test_a_raising_runner_is_a_tool_error_not_a_crash() -> None:
    def broken(code: str, *, timeout_s: float, memory_mb: int) -> FakeResult:
        raise OSError("fork failed")

    env = CalcEnv(runner=broken)
    env.reset(TASK)
    result = env.step("<python>print(1)</python>")
    assert result.observation == "<output>error: sandbox failed</output>"
    assert result.info["tool_error"] == "sandbox" and not result.done


def test_max_turns_ends_with_reward_zero() -> None:
    env, runner = make_env(max_turns=3)
    env.reset(TASK)
    first = env.step("<python>print(1)</python>")
    second = env.step("no tag")
    last = env.step("<python>print(347*29+18)</python>")
    assert not first.done and not second.done
    assert (last.observation, last.reward, last.done) == ("", 0.0, True)
    assert last.info["end_reason"] == "max_turns"
    assert len(runner.calls) == 1


def test_an_answer_on_the_last_turn_still_counts() -> None:
    env, _ = make_env(max_turns=2)
    env.reset(TASK)
    env.step("<python>print(1)</python>")
    result = env.step("<answer>10081</answer>")
    assert (result.reward, result.info["end_reason"]) == (1.0, "answer")


def test_step_outside_a_trajectory_raises() -> None:
    env, _ = make_env()
    with pytest.raises(RuntimeError, match="reset"):
        env.step("<answer>1</answer>")
    env.reset(TASK)
    env.step("<answer>1</answer>")
    with pytest.raises(RuntimeError, match="ended"):
        env.step("<answer>1</answer>")
    env.reset(TASK)
    assert env.step("<answer>10081</answer>").reward == 1.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_turns": 0}, "max_turns"),
        ({"max_output_chars": 5}, "max_output_chars"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"memory_mb": 1}, "memory_mb"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        CalcEnv(**kwargs)


def test_reset_rejects_a_task_without_a_numeric_answer() -> None:
    env, _ = make_env()
    with pytest.raises(ValueError, match="task.answer"):
        env.reset(Task(task_id="x", prompt="Q", answer="many"))


ACTION_PIECES = st.sampled_from([*ALL_TAGS, "print(", ")", "1", "2+", "x", " ", "\n", "while True"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(ACTION_PIECES, max_size=8).map("".join), min_size=1, max_size=6))
def test_random_agents_never_crash_and_never_win(actions: list[str]) -> None:
    env, _ = make_env(max_turns=4)
    env.reset(TASK)
    for action in actions:
        result = env.step(action)
        assert result.reward == 0.0
        if result.done:
            assert result.observation == ""
            assert result.info["end_reason"] in ("answer", "max_turns")
            break
        assert result.observation.startswith("<output>")
        assert result.observation.endswith("</output>")
        inner = result.observation[len("<output>") : -len("</output>")]
        assert len(inner) <= env.max_output_chars
        assert not any(tag in inner for tag in ALL_TAGS)


def test_the_real_sandbox_runs_the_protocol() -> None:
    env = CalcEnv(timeout_s=1.0)
    env.reset(TASK)
    assert env.step("<python>print(347*29+18)</python>").observation == "<output>10081</output>"
    syntax = env.step("<python>print(347*)</python>")
    assert syntax.observation.startswith("<output>error: SyntaxError")
    slow = env.step("<python>while True: pass</python>")
    assert slow.observation == "<output>error: timeout after 1s</output>"
    env.reset(TASK)
    env.step("<python>print(347*29+18)</python>")
    assert env.step("<answer>10081</answer>").reward == 1.0
