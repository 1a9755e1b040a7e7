"""Seeded bugs for `code_repair`: procedural edits of one line of a correct module.

Every family maps one source line to its candidate buggy versions; `missing_edge_case` instead
deletes a template's guard. Whether a candidate really is a bug (compiles, and some test input
now gives a different result) is checked by running it with `behaviour`, in process: the code is
ours -- a template and one of these edits -- never a model's, and templates have no `while` loops
or recursion, so it always ends quickly.
"""

from __future__ import annotations

import copy
import keyword
import re
from collections.abc import Callable, Sequence
from typing import Any

LINE_FAMILIES: tuple[str, ...] = (
    "off_by_one",
    "wrong_operator",
    "wrong_comparison",
    "swapped_arguments",
    "wrong_variable",
)
MISSING_EDGE_CASE = "missing_edge_case"
FAMILIES: tuple[str, ...] = (*LINE_FAMILIES, MISSING_EDGE_CASE)

_TOKEN = re.compile(r"\s+|[A-Za-z_]\w*|\d+|<=|>=|==|!=|//|\S")
_ARITHMETIC = ("+", "-", "*", "//")
_COMPARISON_SWAPS: dict[str, tuple[str, ...]] = {
    "<": ("<=", ">"),
    "<=": ("<", ">="),
    ">": (">=", "<"),
    ">=": (">", "<="),
    "==": ("!=",),
    "!=": ("==",),
}
_SIMPLE_OPERAND = re.compile(r"\w+")
_BINDS_TIGHTER = ("*", "//", "%")
_NOT_VARIABLES = frozenset(keyword.kwlist) | {"len", "range", "abs", "print", "_"}


def tokens(line: str) -> list[str]:
    """Split a line into identifiers, numbers, operators, punctuation and whitespace runs."""
    return _TOKEN.findall(line)


def _is_operand_end(token: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_]\w*|\d+|[)\]]", token)) and token not in keyword.kwlist


def _previous_index(toks: list[str], i: int) -> int:
    """Position of the nearest non-space token before `i` (-1 at the start)."""
    for j in range(i - 1, -1, -1):
        if not toks[j].isspace():
            return j
    return -1


def _previous_code(toks: list[str], i: int) -> str:
    """The nearest non-space token before position `i` ("" at the start)."""
    j = _previous_index(toks, i)
    return toks[j] if j >= 0 else ""


def _next_code(toks: list[str], i: int) -> tuple[int, str]:
    for j in range(i + 1, len(toks)):
        if not toks[j].isspace():
            return j, toks[j]
    return len(toks), ""


def _binary_operator_positions(toks: list[str], ops: Sequence[str]) -> list[int]:
    return [i for i, t in enumerate(toks) if t in ops and _is_operand_end(_previous_code(toks, i))]


def _wrong_operator(toks: list[str], variables: Sequence[str]) -> list[str]:
    out = []
    for i in _binary_operator_positions(toks, (*_ARITHMETIC, "%")):
        choices = ("//",) if toks[i] == "%" else [op for op in _ARITHMETIC if op != toks[i]]
        out += ["".join(toks[:i] + [op] + toks[i + 1 :]) for op in choices]
    return out


def _wrong_comparison(toks: list[str], variables: Sequence[str]) -> list[str]:
    out = []
    for i, tok in enumerate(toks):
        for other in _COMPARISON_SWAPS.get(tok, ()):
            out.append("".join(toks[:i] + [other] + toks[i + 1 :]))
    return out


def _off_by_one(toks: list[str], variables: Sequence[str]) -> list[str]:
    out = []
    for i, tok in enumerate(toks):
        if tok.isdigit():
            op_index = _previous_index(toks, i)
            before = toks[op_index] if op_index >= 0 else ""
            value = int(tok)
            binary = op_index > 0 and _is_operand_end(_previous_code(toks, op_index))
            if tok == "1" and before in ("+", "-") and binary:
                # `n + 1` -> `n` rather than the odd-looking `n + 0`.
                start = _previous_index(toks, op_index) + 1
                out.append("".join(toks[:start] + toks[i + 1 :]))
                out.append("".join(toks[:i] + ["2"] + toks[i + 1 :]))
                continue
            out.append("".join(toks[:i] + [str(value + 1)] + toks[i + 1 :]))
            if value >= 1 and before != "-":
                out.append("".join(toks[:i] + [str(value - 1)] + toks[i + 1 :]))
        if tok == "len":
            j, nxt = _next_code(toks, i)
            close = _matching_close(toks, j) if nxt == "(" else None
            if close is not None and _next_code(toks, close)[1] not in ("-", "+"):
                out.append("".join(toks[: close + 1] + [" - 1"] + toks[close + 1 :]))
    return out


def _matching_close(toks: list[str], open_index: int) -> int | None:
    depth = 0
    for j in range(open_index, len(toks)):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(toks[j], 0)
        if depth == 0:
            return j
    return None


def _call_arguments(toks: list[str], open_index: int) -> list[tuple[int, int]] | None:
    """Token spans `[start, end)` of the top-level arguments of the call opened at `open_index`."""
    close = _matching_close(toks, open_index)
    if close is None:
        return None
    spans, start, depth = [], open_index + 1, 0
    for j in range(open_index + 1, close):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(toks[j], 0)
        if toks[j] == "," and depth == 0:
            spans.append((start, j))
            start = j + 1
    spans.append((start, close))
    return spans


def _strip_span(toks: list[str], span: tuple[int, int]) -> tuple[int, int]:
    start, end = span
    while start < end and toks[start].isspace():
        start += 1
    while end > start and toks[end - 1].isspace():
        end -= 1
    return start, end


def _swapped_arguments(toks: list[str], variables: Sequence[str]) -> list[str]:
    out = []
    for i, tok in enumerate(toks):
        if tok == "(" and re.fullmatch(r"[A-Za-z_]\w*", _previous_code(toks, i)):
            spans = _call_arguments(toks, i)
            if spans is None or _previous_code(toks, i) == "def":
                continue
            spans = [_strip_span(toks, s) for s in spans]
            for (a0, a1), (b0, b1) in zip(spans, spans[1:], strict=False):
                swapped = toks[:a0] + toks[b0:b1] + toks[a1:b0] + toks[a0:a1] + toks[b1:]
                out.append("".join(swapped))
    for i in _binary_operator_positions(toks, ("-", "//", "%")):
        left = _previous_index(toks, i)
        right, right_tok = _next_code(toks, i)
        if not (_SIMPLE_OPERAND.fullmatch(toks[left]) and _SIMPLE_OPERAND.fullmatch(right_tok)):
            continue
        # In `a - f(x)` or `2 * a - b` the neighbouring tokens are not the whole operands.
        if _next_code(toks, right)[1] in ("(", "[") or _previous_code(toks, left) in _BINDS_TIGHTER:
            continue
        swapped = list(toks)
        swapped[left], swapped[right] = toks[right], toks[left]
        out.append("".join(swapped))
    return out


def _wrong_variable(toks: list[str], variables: Sequence[str]) -> list[str]:
    out = []
    for i, tok in enumerate(toks):
        if tok in variables:
            out += ["".join(toks[:i] + [v] + toks[i + 1 :]) for v in variables if v != tok]
    return out


_MUTATORS: dict[str, Callable[[list[str], Sequence[str]], list[str]]] = {
    "off_by_one": _off_by_one,
    "wrong_operator": _wrong_operator,
    "wrong_comparison": _wrong_comparison,
    "swapped_arguments": _swapped_arguments,
    "wrong_variable": _wrong_variable,
}


def variables_of(lines: Sequence[str]) -> list[str]:
    """Parameter and local names of a module (not keywords, builtins or function names)."""
    functions = {m.group(1) for line in lines for m in re.finditer(r"def\s+(\w+)", line)}
    found: list[str] = []
    for line in lines:
        for tok in tokens(line):
            if (
                re.fullmatch(r"[A-Za-z_]\w*", tok)
                and tok not in _NOT_VARIABLES
                and tok not in functions
                and tok not in found
            ):
                found.append(tok)
    return found


def line_mutations(line: str, family: str, variables: Sequence[str]) -> list[str]:
    """Distinct candidate buggy versions of `line` for one line family (none for `def` lines).

    Raises:
        ValueError: if `family` is not one of `LINE_FAMILIES`.
    """
    if family not in _MUTATORS:
        raise ValueError(f"family: must be one of {LINE_FAMILIES}, got {family!r}")
    if not line.strip() or line.lstrip().startswith("def "):
        return []
    seen: list[str] = []
    for candidate in _MUTATORS[family](tokens(line), variables):
        if candidate != line and candidate not in seen:
            seen.append(candidate)
    return seen


def behaviour(source: str, entry: str, calls: Sequence[tuple]) -> list[tuple[str, Any]] | None:
    """Run our own module `source` in process: `("ok", value)` or `("raise", name)` per call.

    Returns None when the module does not compile or load, or has no function `entry`.
    """
    namespace: dict[str, Any] = {}
    try:
        exec(compile(source, "f.py", "exec"), namespace)
    except Exception:
        return None
    function = namespace.get(entry)
    if not callable(function):
        return None
    results: list[tuple[str, Any]] = []
    for args in calls:
        try:
            value = function(*copy.deepcopy(args))
            results.append(("ok", value) if type(value) in (int, bool, type(None)) else ("odd", 0))
        except Exception as err:
            results.append(("raise", type(err).__name__))
    return results
