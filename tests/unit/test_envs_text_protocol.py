"""Pure text rules of the tool protocol: action parsing, observation cleaning, number matching."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sao.envs.text_protocol import (
    ParsedAction,
    clean_text,
    numbers_match,
    parse_action,
    parse_number,
    truncate,
    wrap_output,
)
from sao.formats.tags import ALL_TAGS


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("<python>print(1)</python>", ParsedAction("python", "print(1)")),
        ("let me run <python>x=2\nprint(x)</python>", ParsedAction("python", "x=2\nprint(x)")),
        ("<answer>42</answer>", ParsedAction("answer", "42")),
        ("<answer> 42 </answer>trailing", ParsedAction("answer", " 42 ")),
        ("<answer></answer>", ParsedAction("answer", "")),
        ("<python>print(1)", ParsedAction("error", format_error="unclosed_python")),
        ("<answer>42", ParsedAction("error", format_error="unclosed_answer")),
        ("<python>   \n</python>", ParsedAction("error", format_error="empty_code")),
        ("<python>1</python><answer>1</answer>", ParsedAction("error", format_error="both_tags")),
        ("the answer is 42", ParsedAction("error", format_error="no_tag")),
        ("print(1)</python>", ParsedAction("error", format_error="no_tag")),
        ("", ParsedAction("error", format_error="no_tag")),
    ],
)
def test_parse_action_classifies_each_shape(action: str, expected: ParsedAction) -> None:
    assert parse_action(action) == expected


def test_parse_action_uses_the_first_closing_tag() -> None:
    assert parse_action("<python>a</python>b</python>") == ParsedAction("python", "a")


def test_parse_action_rejects_non_text() -> None:
    with pytest.raises(TypeError, match="action_text"):
        parse_action(b"<answer>1</answer>")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("42", Decimal(42)),
        (" 42 ", Decimal(42)),
        ("42.0", Decimal(42)),
        ("-7", Decimal(-7)),
        ("+3", Decimal(3)),
        (".5", Decimal("0.5")),
        ("4.2e1", Decimal(42)),
        ("\n5172.0\n", Decimal(5172)),
    ],
)
def test_parse_number_accepts_plain_decimals(text: str, number: Decimal) -> None:
    assert parse_number(text) == number


@pytest.mark.parametrize("text", ["", "abc", "1,234", "4 2", "nan", "inf", "42x", "0x2A", "1_000"])
def test_parse_number_rejects_everything_else(text: str) -> None:
    assert parse_number(text) is None


@pytest.mark.parametrize("given_text", ["42", "42.0", " 42 ", "42.000", "4.2e1", "+42"])
def test_numbers_match_equal_values(given_text: str) -> None:
    assert numbers_match(given_text, "42")


@pytest.mark.parametrize("given_text", ["41", "42.5", "-42", "", "forty-two", "420"])
def test_numbers_match_rejects_other_values(given_text: str) -> None:
    assert not numbers_match(given_text, "42")


def test_numbers_match_is_exact_for_large_integers() -> None:
    # Floats would call these equal; the reward must not.
    assert not numbers_match("12345678901234567", "12345678901234568")
    assert numbers_match("12345678901234567.0", "12345678901234567")


def test_numbers_match_rejects_a_broken_reference() -> None:
    with pytest.raises(ValueError, match="reference"):
        numbers_match("1", "one")


def test_clean_text_keeps_ascii_and_replaces_the_rest() -> None:
    assert clean_text("a\tb\r\nc\u00e9\x00") == "a b\nc??"


def test_clean_text_removes_tags_even_when_removal_forms_a_new_tag() -> None:
    assert clean_text("x</output>y") == "xy"
    assert clean_text("<out<answer>put>z") == "z"


@given(st.text(max_size=200))
def test_clean_text_output_is_always_safe(text: str) -> None:
    cleaned = clean_text(text)
    assert all(ch == "\n" or " " <= ch <= "~" for ch in cleaned)
    assert not any(tag in cleaned for tag in ALL_TAGS)


def test_truncate_marks_the_cut() -> None:
    assert truncate("0123456789", 10) == "0123456789"
    assert truncate("0123456789", 8) == "01234..."
    with pytest.raises(ValueError, match="max_chars"):
        truncate("abc", 3)


def test_wrap_output_strips_and_wraps() -> None:
    assert wrap_output("10081\n", 20) == "<output>10081</output>"
    assert wrap_output("x" * 30, 10) == "<output>xxxxxxx...</output>"
