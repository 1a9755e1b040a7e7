"""Function calls written in sampled text: small pure parsers, chosen by name.

A parser reads an assistant turn's text and returns its content and the function calls it makes,
as vLLM's `--tool-call-parser` does. It only reads: the ids that train are the sampled ids, never a
re-tokenisation of the parsed calls. Every format writes one call as a JSON object
`{"name": NAME, "arguments": {...}}` between two tags:

    hermes  Qwen and Hermes chat models: `<tool_call>\\n{...}\\n</tool_call>`, one block per call
    sao     the built-in tiny model: `<tool>{...}</tool>`, its tags single tokens

Text outside the blocks is the reply's content. A block that is not closed, not a JSON object, or
names no function makes the whole reply malformed: it is then returned as content, with the
reason, and no calls.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sao.formats.tags import TOOL_CLOSE, TOOL_OPEN


@dataclass(frozen=True)
class ToolCall:
    """One function call: its name and its arguments as JSON object text (OpenAI's shape)."""

    name: str
    arguments: str


@dataclass(frozen=True)
class ParsedReply:
    """What a parser read from one assistant turn.

    Attributes:
        content: the text outside the call blocks, stripped; the whole text when malformed.
        calls: the calls in the order written; empty when there are none or the reply is malformed.
        malformed: why a call block could not be read, or None.
    """

    content: str
    calls: tuple[ToolCall, ...] = ()
    malformed: str | None = None


@dataclass(frozen=True)
class ToolCallFormat:
    """One way of writing calls in text.

    Attributes:
        name: the name `serve.tool_parser` selects it by.
        open_tag: the text that starts a call block (matched exactly).
        close_tag: the text that ends it.
        separator: written inside the tags around the JSON object by `render`; any whitespace
            there is accepted by `parse`.
    """

    name: str
    open_tag: str
    close_tag: str
    separator: str = ""

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        """The text of one call in this format (what a teacher writes)."""
        body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        return f"{self.open_tag}{self.separator}{body}{self.separator}{self.close_tag}"

    def opening(self, name: str | None = None) -> str:
        """The text a call starts with: the open tag (and separator) and, for a `name`, the call
        object up to its arguments, exactly as `render` writes them (a forced call's prefix)."""
        head = self.open_tag + self.separator
        if name is None:
            return head
        return head + '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": '

    def parse(self, text: str, known_names: Collection[str] | None = None) -> ParsedReply:
        """Split `text` into content and calls.

        Args:
            text: the assistant turn as sampled (tags included).
            known_names: the functions the request declared; a call to any other is malformed.
                None accepts every name.
        """
        if self.open_tag not in text:
            return ParsedReply(content=text.strip())
        outside: list[str] = []
        calls: list[ToolCall] = []
        position = 0
        while (start := text.find(self.open_tag, position)) >= 0:
            outside.append(text[position:start])
            body_start = start + len(self.open_tag)
            end = text.find(self.close_tag, body_start)
            if end < 0:
                return ParsedReply(content=text.strip(), malformed="call block not closed")
            call, reason = _read_call(text[body_start:end], known_names)
            if call is None:
                return ParsedReply(content=text.strip(), malformed=reason)
            calls.append(call)
            position = end + len(self.close_tag)
        outside.append(text[position:])
        return ParsedReply(content="".join(outside).strip(), calls=tuple(calls))


def _read_call(
    body: str, known_names: Collection[str] | None
) -> tuple[ToolCall | None, str | None]:
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return None, "call is not valid JSON"
    if not isinstance(value, dict):
        return None, "call is not a JSON object"
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return None, "call names no function"
    if known_names is not None and name not in known_names:
        return None, f"call to undeclared function {name!r}"
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None, "call arguments are not valid JSON"
    if not isinstance(arguments, dict):
        return None, "call arguments are not a JSON object"
    return ToolCall(name=name, arguments=json.dumps(arguments, ensure_ascii=False)), None


TOOL_CALL_FORMATS: dict[str, ToolCallFormat] = {
    "hermes": ToolCallFormat("hermes", "<tool_call>", "</tool_call>", separator="\n"),
    "sao": ToolCallFormat("sao", TOOL_OPEN, TOOL_CLOSE),
}


def tool_call_format(name: str) -> ToolCallFormat:
    """The format called `name`.

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    if name not in TOOL_CALL_FORMATS:
        known = ", ".join(sorted(TOOL_CALL_FORMATS))
        raise ValueError(f"unknown tool-call format {name!r} (known: {known})")
    return TOOL_CALL_FORMATS[name]
