"""The scripted `calc` teacher: format, controlled mistakes, accuracy."""

from __future__ import annotations

import random
import re

import pytest

from sao.envs.calc.env import CalcEnv
from sao.envs.calc.problems import evaluate_expression
from sao.envs.calc.teacher import (
    CalcTeacher,
    demonstrations,
    slip_expression,
    summarize,
    teacher_arithmetic_runner,
)
from sao.envs.text_protocol import numbers_match

TOOL_DEMO = re.compile(
    r"Q: [^\n]+\n<python>print\(([^)\n]*(?:\)[^)\n]*)*)\)</python>"
    r"<output>([^<]+)</output><answer>\2</answer>"
)
MENTAL_DEMO = re.compile(r"Q: [^\n]+\n<answer>-?\d+</answer>")


def teacher(**kwargs) -> CalcTeacher:
    return CalcTeacher(env=CalcEnv(runner=teacher_arithmetic_runner), **kwargs)


def test_demonstrations_follow_one_of_two_exact_formats() -> None:
    for demo in demonstrations(200, seed=0, teacher=teacher()):
        pattern = TOOL_DEMO if demo.used_tool else MENTAL_DEMO
        assert pattern.fullmatch(demo.text), demo.text
        assert demo.turns[-1].observation == ""


def test_demonstrations_are_short() -> None:
    stats = summarize(demonstrations(300, seed=1, teacher=teacher()))
    assert stats.max_chars < 300
    assert stats.mean_chars < 120


def test_a_careful_teacher_that_always_uses_the_tool_is_always_right() -> None:
    demos = demonstrations(150, seed=2, teacher=teacher(p_no_tool=0.0, p_slip=0.0))
    assert all(d.reward == 1.0 and d.used_tool and not d.slipped for d in demos)


def test_slips_and_wrong_mental_arithmetic_are_always_wrong() -> None:
    slipping = demonstrations(100, seed=3, teacher=teacher(p_no_tool=0.0, p_slip=1.0))
    assert all(d.slipped and d.reward == 0.0 for d in slipping)
    never_right = {d: 0.0 for d in (1, 2, 3, 4)}
    mental = demonstrations(
        100, seed=3, teacher=teacher(p_no_tool=1.0, mental_accuracy=never_right)
    )
    assert all(not d.used_tool and d.reward == 0.0 for d in mental)


def test_reward_agrees_with_the_reference_answer() -> None:
    for demo in demonstrations(200, seed=4, teacher=teacher()):
        final = demo.turns[-1].action.removeprefix("<answer>").removesuffix("</answer>")
        assert demo.reward == float(numbers_match(final, demo.task.answer))


def test_default_teacher_is_imperfect_but_mostly_right() -> None:
    stats = summarize(demonstrations(1000, seed=5, teacher=teacher()))
    assert 0.5 < stats.accuracy < 0.75
    assert 0.58 < stats.tool_rate < 0.72
    assert set(stats.accuracy_by_difficulty) == {1, 2, 3, 4}


def test_segments_mark_only_actions() -> None:
    demo = demonstrations(1, seed=6, teacher=teacher(p_no_tool=0.0, p_slip=0.0))[0]
    segments = demo.segments()
    assert [is_action for _, is_action in segments] == [False, True, False, True]
    assert "".join(text for text, _ in segments) == demo.text


def test_demonstrations_are_deterministic_in_the_seed() -> None:
    first = [d.text for d in demonstrations(50, seed=7, teacher=teacher())]
    again = [d.text for d in demonstrations(50, seed=7, teacher=teacher())]
    other = [d.text for d in demonstrations(50, seed=8, teacher=teacher())]
    assert first == again != other


def test_slip_changes_the_value_and_keeps_division_exact() -> None:
    rng = random.Random(0)
    for expression in ["347*29+18", "(48213-967)*53", "2236/43+5120", "95*60*7", "12+34"]:
        for _ in range(50):
            slipped = slip_expression(expression, rng)
            value = evaluate_expression(slipped)
            assert value != evaluate_expression(expression)
            assert value == int(value)
            assert not re.search(r"(^|[^\d])0\d", slipped)


def test_bad_knobs_name_the_field() -> None:
    with pytest.raises(ValueError, match="p_no_tool"):
        CalcTeacher(p_no_tool=1.5)
    with pytest.raises(ValueError, match="p_slip"):
        CalcTeacher(p_slip=-0.1)
    with pytest.raises(ValueError, match="mental_accuracy"):
        CalcTeacher(mental_accuracy={1: 0.5})
    with pytest.raises(ValueError, match="split"):
        demonstrations(1, seed=0, split="dev")
    with pytest.raises(ValueError, match="expression"):
        slip_expression("x+1", random.Random(0))
