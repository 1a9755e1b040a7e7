"""Pure text rules of `tool_calc`: reading one reply, writing a call, scoring a final answer.

A reply is either one call of the client-side function `calculator` in the tiny model's call
format (`sao.formats.tool_calls`, format `sao`) or a final answer `<answer>NUMBER</answer>`. These
functions hold no state and do no I/O, so the environment and the example agents' clients read
replies and score answers the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from sao.envs.base import Task
from sao.envs.text_protocol import numbers_match, parse_number
from sao.formats.tags import ANSWER_CLOSE, ANSWER_OPEN, TOOL_OPEN
from sao.formats.tool_calls import tool_call_format

TOOL_NAME = "calculator"
ARGUMENT = "expression"
CALL_FORMAT = tool_call_format("sao")

# The OpenAI `tools` entry a client declares for the calculator.
TOOL_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Evaluate an arithmetic expression: numbers, + - * / // % ** and brackets.",
        "parameters": {
            "type": "object",
            "properties": {ARGUMENT: {"type": "string", "description": "e.g. 347*29+18"}},
            "required": [ARGUMENT],
        },
    },
}

# Format-error kinds (`info["format_error"]`) and the short message the policy reads for each;
# `bad_call` messages come from the call parser. Tags are named by word, never written.
FORMAT_ERROR_MESSAGES: dict[str, str] = {
    "no_tag": "error: no tool call or answer",
    "both_tags": "error: tool call and answer in one reply",
    "unclosed_answer": "error: answer tag not closed",
    "bad_arguments": f"error: {TOOL_NAME} takes one string argument '{ARGUMENT}'",
}


@dataclass(frozen=True)
class ToolCalcAction:
    """One reply, classified.

    Attributes:
        kind: `"call"` (run the calculator on `content`), `"answer"` (final answer `content`) or
            `"error"`.
        content: the expression or the answer text; `""` for errors.
        format_error: the error kind when `kind == "error"`.
        message: the observation text for an error (`"error: ..."`), `""` otherwise.
    """

    kind: Literal["call", "answer", "error"]
    content: str = ""
    format_error: str | None = None
    message: str = ""


def _error(kind: str, message: str | None = None) -> ToolCalcAction:
    return ToolCalcAction(
        "error", format_error=kind, message=message or FORMAT_ERROR_MESSAGES[kind]
    )


def render_call(expression: str) -> str:
    """The text of one calculator call, exactly as `sao serve` renders it for the tiny model."""
    return CALL_FORMAT.render(TOOL_NAME, {ARGUMENT: expression})


def find_answer(text: str) -> str | None:
    """The text between the first `<answer>` and the next `</answer>`; None without a closed one."""
    start = text.find(ANSWER_OPEN)
    if start < 0:
        return None
    end = text.find(ANSWER_CLOSE, start + len(ANSWER_OPEN))
    return None if end < 0 else text[start + len(ANSWER_OPEN) : end]


def parse_reply(text: str) -> ToolCalcAction:
    """Classify one reply: a single calculator call, a final answer, or a format error.

    Text around a call block or an answer is ignored (the agent loop stops at the closing tag, so
    it is the policy's own preamble); a reply holding both a call and an answer is an error.

    Raises:
        TypeError: if `text` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected str, got {type(text)}")
    has_call, has_answer = TOOL_OPEN in text, ANSWER_OPEN in text
    if has_call and has_answer:
        return _error("both_tags")
    if has_answer:
        answer = find_answer(text)
        return _error("unclosed_answer") if answer is None else ToolCalcAction("answer", answer)
    if not has_call:
        return _error("no_tag")
    parsed = CALL_FORMAT.parse(text, known_names={TOOL_NAME})
    if parsed.malformed is not None:
        return _error("bad_call", f"error: {parsed.malformed}")
    if len(parsed.calls) != 1:
        return _error("bad_call", "error: one call per reply")
    arguments = json.loads(parsed.calls[0].arguments)
    if set(arguments) != {ARGUMENT} or not isinstance(arguments[ARGUMENT], str):
        return _error("bad_arguments")
    return ToolCalcAction("call", arguments[ARGUMENT])


def score(task_or_answer: Task | str | int, reply_content: str) -> float:
    """1.0 when `reply_content` holds `<answer>X</answer>` with X numerically equal to the
    reference (`"42.0"` matches 42), else 0.0.

    Args:
        task_or_answer: a `tool_calc` task, or its reference answer.
        reply_content: the final assistant reply's content.

    Raises:
        ValueError: if the reference is not a number (a broken task, not a wrong answer).
    """
    reference = task_or_answer.answer if isinstance(task_or_answer, Task) else str(task_or_answer)
    if parse_number(reference) is None:
        raise ValueError(f"reference: not a number: {reference!r}")
    answer = find_answer(reply_content) if isinstance(reply_content, str) else None
    return 1.0 if answer is not None and numbers_match(answer, reference) else 0.0
