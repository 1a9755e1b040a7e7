"""The `calculator` tool: a safe evaluator of arithmetic expressions, exact on whole numbers.

`evaluate("347*29+18")` returns `"10081"`; anything it cannot or will not compute returns one line
starting `error: `. The expression is parsed with `ast` and only numbers, `+ - * / // % **`, unary
signs and brackets are walked; names, calls, attributes and every other construct are refused, and
nothing is ever executed. Arithmetic is exact (integers and fractions), so `2236/43` is `52`, not
`52.0`, and a non-whole result is written as the nearest float (`1/3` -> `0.3333333333333333`).

Bounds keep one call cheap whatever the caller sends: at most `MAX_EXPRESSION_CHARS` characters,
exponents up to `MAX_EXPONENT` in size, and no value (any intermediate one included) over
`MAX_DIGITS` digits. This module is what clients run on their side when the policy calls the
tool, and what the environment runs during training, so both see the same results.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from fractions import Fraction

MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 64
MAX_DIGITS = 60
_MAX_BITS = math.ceil(MAX_DIGITS * math.log2(10))

Number = int | Fraction


class CalculatorError(ValueError):
    """An expression the calculator refuses or cannot compute; the message is the reason."""


def _check_size(value: Number) -> Number:
    """`value` unless its numerator or denominator has more than `MAX_DIGITS` digits."""
    fraction = Fraction(value)
    for part in (abs(fraction.numerator), fraction.denominator):
        # The bit length rules out huge numbers before they are ever converted to text.
        if part.bit_length() > _MAX_BITS or len(str(part)) > MAX_DIGITS:
            raise CalculatorError(f"number with more than {MAX_DIGITS} digits")
    return value


def _power(base: Number, exponent: Number) -> Number:
    if Fraction(exponent).denominator != 1:
        raise CalculatorError("exponent must be a whole number")
    whole = int(exponent)
    if abs(whole) > MAX_EXPONENT:
        raise CalculatorError(f"exponent larger than {MAX_EXPONENT}")
    if base == 0 and whole < 0:
        raise CalculatorError("division by zero")
    return Fraction(base) ** whole


def _divide(left: Number, right: Number) -> Number:
    if right == 0:
        raise CalculatorError("division by zero")
    return Fraction(left) / Fraction(right)


def _floor_divide(left: Number, right: Number) -> Number:
    if right == 0:
        raise CalculatorError("division by zero")
    return Fraction(left) // Fraction(right)


def _modulo(left: Number, right: Number) -> Number:
    if right == 0:
        raise CalculatorError("modulo by zero")
    return Fraction(left) % Fraction(right)


_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _divide,
    ast.FloorDiv: _floor_divide,
    ast.Mod: _modulo,
    ast.Pow: _power,
}


def _describe(node: ast.AST) -> str:
    """A short name for a refused syntax element (never the caller's whole text)."""
    if isinstance(node, ast.Name):
        return f"name {node.id[:20]!r}"
    if isinstance(node, ast.Call):
        return "function calls"
    if isinstance(node, ast.Constant):
        return f"{type(node.value).__name__} constants"
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        return f"operator {type(node.op).__name__}"
    return type(node).__name__


def _walk(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        if type(node.value) is float and not math.isfinite(node.value):
            raise CalculatorError("number out of range")
        # Through the literal's text, so `0.1` is exactly one tenth, not the nearest binary float.
        value = node.value if type(node.value) is int else Fraction(repr(node.value))
        return _check_size(value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _walk(node.left), _walk(node.right)
        return _check_size(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _walk(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    raise CalculatorError(f"{_describe(node)} not allowed")


def calculate(expression: str) -> Number:
    """The exact value of `expression` (an `int`, or a `Fraction` when it is not whole).

    Raises:
        CalculatorError: for anything other than bounded arithmetic on numbers.
        TypeError: if `expression` is not a string.
    """
    if not isinstance(expression, str):
        raise TypeError(f"expression: expected str, got {type(expression)}")
    if not expression.strip():
        raise CalculatorError("empty expression")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError):
        raise CalculatorError("invalid syntax") from None
    try:
        value = _walk(tree.body)
    except RecursionError:
        raise CalculatorError("expression nested too deeply") from None
    fraction = Fraction(value)
    return fraction.numerator if fraction.denominator == 1 else fraction


def format_number(value: Number) -> str:
    """A whole number as its digits, anything else as the nearest float's shortest text."""
    fraction = Fraction(value)
    if fraction.denominator == 1:
        return str(fraction.numerator)
    return repr(float(fraction))


def evaluate(expression: str) -> str:
    """Run the calculator tool: the result as text, or `"error: REASON"`; never raises for bad
    input (a non-string argument is reported the same way)."""
    if not isinstance(expression, str):
        return "error: expression must be a string"
    try:
        return format_number(calculate(expression))
    except CalculatorError as err:
        return f"error: {err}"
