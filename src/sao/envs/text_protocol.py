"""Pure text rules of the tool protocol: parsing actions, cleaning observations, matching numbers.

The policy writes `<python>CODE</python>` to run code or `<answer>X</answer>` to finish. These
functions hold no state and do no I/O, so the environment that uses them stays plumbing only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

from sao.formats.tags import (
    ALL_TAGS,
    ANSWER_CLOSE,
    ANSWER_OPEN,
    OUTPUT_CLOSE,
    OUTPUT_OPEN,
    PYTHON_CLOSE,
    PYTHON_OPEN,
)

# Format-error kinds, as recorded in `info["format_error"]`, and the short message the policy
# reads for each. Messages name tags by word, not by tag token, so an observation never contains
# a tag the policy could mistake for its own output.
FORMAT_ERROR_MESSAGES: dict[str, str] = {
    "no_tag": "error: no python or answer tag",
    "both_tags": "error: python and answer tags in one action",
    "unclosed_python": "error: python tag not closed",
    "unclosed_answer": "error: answer tag not closed",
    "empty_code": "error: empty code",
}

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class ParsedAction:
    """One action, classified.

    Attributes:
        kind: `"python"` (run `content`), `"answer"` (final answer `content`) or `"error"`.
        content: the code or the answer text between the tags; `""` for errors.
        format_error: the error kind (a key of `FORMAT_ERROR_MESSAGES`) when `kind == "error"`.
    """

    kind: Literal["python", "answer", "error"]
    content: str = ""
    format_error: str | None = None


def _between(text: str, open_tag: str, close_tag: str) -> str | None:
    """Text between the first `open_tag` and the next `close_tag`; None if not closed."""
    start = text.index(open_tag) + len(open_tag)
    end = text.find(close_tag, start)
    return None if end < 0 else text[start:end]


def parse_action(action_text: str) -> ParsedAction:
    """Classify one action.

    Text before the opening tag and after the first closing tag is ignored: the agent loop stops
    at the closing tag, so anything around it is the policy's own preamble.

    Raises:
        TypeError: if `action_text` is not a string.
    """
    if not isinstance(action_text, str):
        raise TypeError(f"action_text: expected str, got {type(action_text)}")
    has_python = PYTHON_OPEN in action_text
    has_answer = ANSWER_OPEN in action_text
    if has_python and has_answer:
        return ParsedAction("error", format_error="both_tags")
    if has_answer:
        answer = _between(action_text, ANSWER_OPEN, ANSWER_CLOSE)
        if answer is None:
            return ParsedAction("error", format_error="unclosed_answer")
        return ParsedAction("answer", content=answer)
    if has_python:
        code = _between(action_text, PYTHON_OPEN, PYTHON_CLOSE)
        if code is None:
            return ParsedAction("error", format_error="unclosed_python")
        if not code.strip():
            return ParsedAction("error", format_error="empty_code")
        return ParsedAction("python", content=code)
    return ParsedAction("error", format_error="no_tag")


def clean_text(text: str) -> str:
    """Make tool output safe to insert: printable ASCII and newlines only, no tag strings.

    Tabs become spaces, other characters `?`; tag strings are removed until none is left (a
    removal may join two halves into a new tag).
    """
    chars = []
    for ch in text.replace("\r\n", "\n").replace("\t", " "):
        chars.append(ch if ch == "\n" or " " <= ch <= "~" else "?")
    cleaned = "".join(chars)
    while any(tag in cleaned for tag in ALL_TAGS):
        for tag in ALL_TAGS:
            cleaned = cleaned.replace(tag, "")
    return cleaned


def truncate(text: str, max_chars: int) -> str:
    """Cut `text` to at most `max_chars` characters, marking a cut with a trailing `...`."""
    if max_chars < 4:
        raise ValueError(f"max_chars: must be >= 4, got {max_chars}")
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 3] + "..."


def wrap_output(text: str, max_chars: int) -> str:
    """The observation for one tool call: cleaned, stripped, truncated, inside output tags."""
    return OUTPUT_OPEN + truncate(clean_text(text).strip(), max_chars) + OUTPUT_CLOSE


def parse_number(text: str) -> Decimal | None:
    """Parse a plain decimal number (`"42"`, `" 42.0 "`, `"-7"`, `"4.2e1"`); None otherwise.

    Surrounding whitespace is allowed; thousands separators, words, `nan` and `inf` are not.
    """
    stripped = text.strip()
    if not _NUMBER.fullmatch(stripped):
        return None
    try:
        return Decimal(stripped)
    except InvalidOperation:
        return None


def numbers_match(given: str, reference: str) -> bool:
    """Whether two texts parse to the same number exactly (`"42.0"` matches `"42"`).

    Raises:
        ValueError: if `reference` is not a number (a broken task, not a wrong answer).
    """
    ref = parse_number(reference)
    if ref is None:
        raise ValueError(f"reference: not a number: {reference!r}")
    got = parse_number(given)
    return got is not None and got == ref
