"""Procedural `calc` problems: integer arithmetic and short multi-step word problems.

Difficulty levels (the policy is a tiny character-level model, so even level 1 is beyond its
mental arithmetic; the tool is what makes it reliably right):

1. one operation: `47*38`, `512+879`, `903-458`.
2. two operations or a 3x3-digit product: `347*29+18`, `518*704`.
3. three or four operands up to 5 digits, brackets, exact division: `(48213-967)*53`, `2236/43+5120`.
4. word problems of one or two lines whose answer needs two operations (one needs a week = 7 days).

Every problem carries a Python `expression` whose value is the answer, written in the order the
text states the numbers, so "translate, then run" is always a correct strategy. Division appears
only where it is exact, so every answer is an integer.
"""

from __future__ import annotations

import ast
import operator
import random
from collections.abc import Callable
from dataclasses import dataclass

DIFFICULTIES: tuple[int, ...] = (1, 2, 3, 4)
NAMES: tuple[str, ...] = ("Ann", "Tom", "Sam", "Mia", "Ben", "Eva")


@dataclass(frozen=True)
class CalcProblem:
    """One generated problem.

    Attributes:
        question: the text after `Q: ` (e.g. `"347*29+18=?"`).
        expression: a Python expression whose value is `answer`.
        answer: the integer answer.
        difficulty: 1..4.
        kind: `"arith"` or `"word"`.
    """

    question: str
    expression: str
    answer: int
    difficulty: int
    kind: str


_Draw = Callable[[random.Random], tuple[str, int]]


def _arith(expression: str) -> tuple[str, int]:
    value = evaluate_expression(expression)
    if value != int(value):
        raise AssertionError(f"non-integer arithmetic problem {expression}")
    return expression, int(value)


def _level1(rng: random.Random) -> tuple[str, int]:
    op = rng.choice("*+-")
    if op == "*":
        return _arith(f"{rng.randint(12, 99)}*{rng.randint(12, 99)}")
    a, b = rng.randint(100, 999), rng.randint(100, 999)
    if op == "-":
        a, b = max(a, b), min(a, b)
    return _arith(f"{a}{op}{b}")


def _level2(rng: random.Random) -> tuple[str, int]:
    a, b, c = rng.randint(100, 999), rng.randint(12, 99), rng.randint(10, 99)
    form = rng.randrange(4)
    if form == 0:
        return _arith(f"{a}*{b}+{c}")
    if form == 1:
        return _arith(f"{a}*{b}-{c}")
    if form == 2:
        return _arith(f"{a}+{b}*{rng.randint(12, 99)}")
    return _arith(f"{a}*{rng.randint(100, 999)}")


def _level3(rng: random.Random) -> tuple[str, int]:
    form = rng.randrange(5)
    if form == 0:
        return _arith(
            f"({rng.randint(1000, 99999)}-{rng.randint(100, 999)})*{rng.randint(12, 999)}"
        )
    if form == 1:
        return _arith(f"({rng.randint(1000, 99999)}+{rng.randint(100, 999)})*{rng.randint(12, 99)}")
    if form == 2:
        a, b = rng.randint(100, 9999), rng.randint(12, 99)
        c, d = rng.randint(12, 99), rng.randint(12, 99)
        if a * b < c * d:
            a, b, c, d = c, d, a, b
        return _arith(f"{a}*{b}-{c}*{d}")
    if form == 3:
        divisor = rng.randint(12, 99)
        return _arith(f"{divisor * rng.randint(100, 999)}/{divisor}+{rng.randint(100, 9999)}")
    return _arith(f"{rng.randint(100, 999)}*{rng.randint(12, 99)}*{rng.randint(12, 99)}")


def _word(rng: random.Random) -> tuple[str, str, int]:
    """A word problem: (question, expression, answer)."""
    name = rng.choice(NAMES)
    form = rng.randrange(6)
    if form == 0:
        a, b = rng.randint(12, 99), rng.randint(12, 99)
        c = rng.randint(10, min(999, a * b - 1))
        text = f"{a} boxes hold {b} pens each. {c} pens are sold. How many are left?"
        return text, f"{a}*{b}-{c}", a * b - c
    if form == 1:
        a, b, c = rng.randint(100, 999), rng.randint(12, 99), rng.randint(100, 999)
        text = f"{name} earns {a} a day for {b} days and spends {c}. How much is left?"
        return text, f"{a}*{b}-{c}", a * b - c
    if form == 2:
        per_tray, trays = rng.randint(12, 99), rng.randint(100, 999)
        broken = rng.randint(10, trays - 1)
        text = f"{per_tray * trays} eggs are packed {per_tray} per tray. {broken} trays break. How many trays are whole?"
        return text, f"{per_tray * trays}/{per_tray}-{broken}", trays - broken
    if form == 3:
        a, b, c = rng.randint(12, 99), rng.randint(12, 99), rng.randint(100, 999)
        text = f"A farm has {a} rows of {b} trees and plants {c} more. How many trees?"
        return text, f"{a}*{b}+{c}", a * b + c
    if form == 4:
        a, b, c = rng.randint(100, 999), rng.randint(12, 99), rng.randint(12, 99)
        text = f"{name} has {a} coins and gets {b} bags of {c} coins. How many coins now?"
        return text, f"{a}+{b}*{c}", a + b * c
    a, b = rng.randint(12, 99), rng.randint(12, 52)
    text = f"{name} reads {a} pages a day for {b} weeks. How many pages?"
    return text, f"{a}*{b}*7", a * b * 7


_ARITH_LEVELS: dict[int, _Draw] = {1: _level1, 2: _level2, 3: _level3}


def generate_problem(rng: random.Random, difficulty: int) -> CalcProblem:
    """Draw one problem of `difficulty` (1..4) using `rng` only."""
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty: must be one of {DIFFICULTIES}, got {difficulty!r}")
    if difficulty in _ARITH_LEVELS:
        expression, answer = _ARITH_LEVELS[difficulty](rng)
        return CalcProblem(f"{expression}=?", expression, answer, difficulty, "arith")
    question, expression, answer = _word(rng)
    return CalcProblem(question, expression, answer, difficulty, "word")


_BINARY_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
}


def evaluate_expression(expression: str) -> float:
    """Evaluate an arithmetic expression of numbers, `+ - * / //`, unary minus and brackets.

    Used to check problems and the teacher's (possibly slipped) expressions without running
    arbitrary code.

    Raises:
        ValueError: if `expression` holds anything else (names, calls, other operators).
    """

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
            return _BINARY_OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise ValueError(f"expression: unsupported element {ast.dump(node)[:40]} in {expression!r}")

    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"expression: not valid arithmetic: {expression!r}") from exc
    return walk(tree)
