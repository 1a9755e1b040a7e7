"""The `calculator` tool: exact arithmetic, and refusals of everything else."""

from __future__ import annotations

from fractions import Fraction

import pytest

from sao.envs.tool_calc.calculator import (
    MAX_DIGITS,
    MAX_EXPONENT,
    MAX_EXPRESSION_CHARS,
    calculate,
    evaluate,
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("347*29+18", "10081"),
        ("2236/43+5120", "5172"),  # exact division stays whole: not 5172.0
        ("(48213-967)*53", "2504038"),
        ("  7 + 8 ", "15"),
        ("-3//2", "-2"),
        ("17 % 5", "2"),
        ("-(4-10)", "6"),
        ("+5", "5"),
        ("2**10", "1024"),
        ("2**-2", "0.25"),
        ("1/3", "0.3333333333333333"),
        ("0.1+0.2", "0.3"),  # exact decimals, not binary floats
        ("1.5*4", "6"),
        ("123456789*987654321", "121932631112635269"),
        ("10**59", "1" + "0" * 59),
    ],
)
def test_exact_results(expression: str, expected: str) -> None:
    assert evaluate(expression) == expected


def test_calculate_returns_exact_values() -> None:
    assert calculate("6/4") == Fraction(3, 2)
    assert calculate("6/3") == 2 and type(calculate("6/3")) is int


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("x+1", "name 'x' not allowed"),
        ("__import__('os').system('true')", "function calls not allowed"),
        ("abs(-3)", "function calls not allowed"),
        ("(1).real", "Attribute not allowed"),
        ("[1, 2]", "List not allowed"),
        ("'a'*3", "str constants not allowed"),
        ("True+1", "bool constants not allowed"),
        ("1 if 1 else 2", "IfExp not allowed"),
        ("3 << 2", "operator LShift not allowed"),
        ("~3", "operator Invert not allowed"),
        ("1;2", "invalid syntax"),
        ("import os", "invalid syntax"),
        ("", "empty expression"),
        ("   ", "empty expression"),
        ("1/0", "division by zero"),
        ("1//(2-2)", "division by zero"),
        ("5%0", "modulo by zero"),
        ("0**-1", "division by zero"),
        ("2**0.5", "exponent must be a whole number"),
        (f"2**{MAX_EXPONENT + 1}", f"exponent larger than {MAX_EXPONENT}"),
        ("9**9**9", f"exponent larger than {MAX_EXPONENT}"),
        ("2**1000000000", f"exponent larger than {MAX_EXPONENT}"),
        (f"10**{MAX_DIGITS}", f"number with more than {MAX_DIGITS} digits"),
        ("99999999999**64", f"number with more than {MAX_DIGITS} digits"),
        ("1e308*10", f"number with more than {MAX_DIGITS} digits"),
        ("1e999", "number out of range"),
        (
            "1" * (MAX_EXPRESSION_CHARS + 1),
            f"expression longer than {MAX_EXPRESSION_CHARS} characters",
        ),
    ],
)
def test_refusals_are_one_error_line(expression: str, reason: str) -> None:
    assert evaluate(expression) == f"error: {reason}"


def test_a_non_string_argument_is_an_error_result() -> None:
    assert evaluate(12) == "error: expression must be a string"  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expression: expected str"):
        calculate(12)  # type: ignore[arg-type]


def test_agrees_with_python_on_whole_number_arithmetic() -> None:
    for expression in ("12*34-56", "(7+8)*(9-10)", "100//7*7+100%7", "-2**4", "(-2)**3"):
        assert evaluate(expression) == str(eval(expression))  # noqa: S307 -- trusted literals
