"""Tool-call parsers: what each format reads from sampled text, and what it refuses."""

from __future__ import annotations

import json

import pytest

from sao.formats.tool_calls import ParsedReply, ToolCall, tool_call_format

HERMES = tool_call_format("hermes")
SAO = tool_call_format("sao")


def test_no_call_is_plain_content() -> None:
    assert HERMES.parse("  The answer is 4.\n") == ParsedReply(content="The answer is 4.")


def test_hermes_reads_a_qwen_style_block_and_the_text_around_it() -> None:
    text = (
        "Let me compute.\n<tool_call>\n"
        '{"name": "calculator", "arguments": {"expression": "2+2"}}\n</tool_call>'
    )
    parsed = HERMES.parse(text)
    assert parsed.malformed is None
    assert parsed.content == "Let me compute."
    assert parsed.calls == (ToolCall("calculator", '{"expression": "2+2"}'),)


def test_several_calls_keep_their_order() -> None:
    text = SAO.render("a", {"x": 1}) + " and " + SAO.render("b", {"y": "z"})
    parsed = SAO.parse(text)
    assert [call.name for call in parsed.calls] == ["a", "b"]
    assert [json.loads(call.arguments) for call in parsed.calls] == [{"x": 1}, {"y": "z"}]
    assert parsed.content == "and"


@pytest.mark.parametrize("fmt", [HERMES, SAO], ids=lambda f: f.name)
def test_render_then_parse_round_trips(fmt) -> None:
    arguments = {"expression": "347*29+18", "note": "ünïcode"}
    parsed = fmt.parse(fmt.render("calculator", arguments))
    assert parsed.calls == (ToolCall("calculator", json.dumps(arguments, ensure_ascii=False)),)
    assert parsed.content == ""


def test_arguments_given_as_a_json_string_are_read_as_the_object() -> None:
    text = '<tool_call>{"name": "f", "arguments": "{\\"a\\": 2}"}</tool_call>'
    assert HERMES.parse(text).calls == (ToolCall("f", '{"a": 2}'),)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('<tool_call>{"name": "f", "arguments": {}}', "call block not closed"),
        ("<tool_call>{name: f}</tool_call>", "call is not valid JSON"),
        ("<tool_call>[1, 2]</tool_call>", "call is not a JSON object"),
        ('<tool_call>{"arguments": {}}</tool_call>', "call names no function"),
        (
            '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',
            "call arguments are not a JSON object",
        ),
        (
            '<tool_call>{"name": "f", "arguments": "{oops"}</tool_call>',
            "call arguments are not valid JSON",
        ),
    ],
)
def test_a_malformed_block_returns_the_whole_text_as_content(text: str, reason: str) -> None:
    parsed = HERMES.parse(text)
    assert parsed == ParsedReply(content=text.strip(), calls=(), malformed=reason)


def test_an_undeclared_function_is_malformed_when_names_are_known() -> None:
    text = SAO.render("rm_rf", {})
    assert (
        SAO.parse(text, known_names={"calculator"}).malformed
        == "call to undeclared function 'rm_rf'"
    )
    assert SAO.parse(text).calls[0].name == "rm_rf"


def test_an_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown tool-call format 'xml' \(known: hermes, sao\)"):
        tool_call_format("xml")
