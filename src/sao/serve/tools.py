"""OpenAI tool calling over sampled text: what a request asks, and the message a reply becomes.

A request's `tools` and `tool_choice` become a `ToolPlan`:

    no tools, or tool_choice "none"   the reply is content, never parsed (a chat template still
                                      renders the tools, as it wants them)
    "auto" (the default with tools)   the reply is parsed; calls become `message.tool_calls`
    "required"                        the format's opening (its open tag) is appended to the
                                      context as forced tokens, then the reply is sampled and
                                      parsed; a reply that does not parse is malformed
    {"type": "function", ...}         the same, the opening running up to the arguments of the
                                      named function: `<tool_call>\\n{"name": "NAME", "arguments": `

Forced tokens are context, not actions: action mask 0, never trained. The text parsed is the
forced opening followed by the sampled text; what trains is always the sampled ids.

A reply with calls: `content` is the text outside the call blocks (None when empty), `tool_calls`
`[{"id": "call_...", "type": "function", "function": {"name", "arguments": JSON text}}]`,
`finish_reason` "tool_calls". A malformed reply (a block that does not parse, a function the
request did not declare, several calls with `parallel_tool_calls: false`): the whole text as
content, `finish_reason` "stop" ("length" when it ran out of tokens), counted.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sao.formats.tool_calls import ToolCallFormat
from sao.serve.protocol import ChatCompletionRequest, NamedToolChoice

OFF, AUTO, REQUIRED, NAMED = "off", "auto", "required", "named"


@dataclass(frozen=True)
class ToolPlan:
    """How one request's reply is read (module docstring)."""

    format: ToolCallFormat
    tools: list[dict[str, Any]] = field(default_factory=list)
    mode: str = OFF
    forced_name: str | None = None
    parallel: bool = True

    @property
    def names(self) -> set[str]:
        return {tool["function"]["name"] for tool in self.tools}

    @property
    def forced_text(self) -> str:
        """The call's opening appended to the context before sampling ("" when nothing is
        forced)."""
        if self.mode == REQUIRED:
            return self.format.opening()
        if self.mode == NAMED:
            return self.format.opening(self.forced_name)
        return ""


def plan_tools(body: ChatCompletionRequest, tool_format: ToolCallFormat) -> ToolPlan:
    """The request's tool plan.

    Raises:
        ValueError: a tool_choice that needs tools without any, or names an undeclared function.
    """
    tools = [tool.as_dict() for tool in body.tools or ()]
    choice = body.tool_choice
    parallel = body.parallel_tool_calls is not False
    if choice is None:
        choice = "auto" if tools else "none"
    if choice == "none":
        return ToolPlan(tool_format, tools, OFF, parallel=parallel)
    if not tools:
        raise ValueError("tool_choice: asks for a tool call, but the request declares no tools")
    plan = ToolPlan(tool_format, tools, AUTO, parallel=parallel)
    if choice == "auto":
        return plan
    if choice == "required":
        return ToolPlan(tool_format, tools, REQUIRED, parallel=parallel)
    assert isinstance(choice, NamedToolChoice)
    if choice.function.name not in plan.names:
        raise ValueError(
            f"tool_choice: function {choice.function.name!r} is not among the declared tools"
        )
    return ToolPlan(tool_format, tools, NAMED, choice.function.name, parallel)


@dataclass(frozen=True)
class Answer:
    """The assistant message a reply becomes, and what it counts as."""

    content: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    malformed: str | None = None

    @property
    def message(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        return out


def answer(text: str, finish_reason: str, plan: ToolPlan) -> Answer:
    """Read the sampled `text` (decoded, without a closing EOS) under `plan`."""
    if plan.mode == OFF:
        return Answer(text, [], finish_reason)
    full = plan.forced_text + text
    parsed = plan.format.parse(full, plan.names)
    malformed = parsed.malformed
    if malformed is None and not plan.parallel and len(parsed.calls) > 1:
        malformed = f"{len(parsed.calls)} calls with parallel_tool_calls false"
    if malformed is not None:
        return Answer(full, [], "length" if finish_reason == "length" else "stop", malformed)
    if not parsed.calls:
        return Answer(text, [], finish_reason)
    calls = [
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in parsed.calls
    ]
    return Answer(parsed.content or None, calls, "tool_calls")


class ContentStream:
    """The part of a reply that can be streamed as content while it is being sampled.

    Without tool parsing, all of it. With `auto`, the text before the first call block, holding
    back a tail that may be the start of the open tag. With a forced call, nothing: the reply is a
    call, sent once parsed.
    """

    def __init__(self, plan: ToolPlan) -> None:
        self.plan = plan
        self.sent = ""

    def delta(self, text: str) -> str:
        """New content to send now, given the reply's `text` so far ("" when none)."""
        if self.plan.mode in (REQUIRED, NAMED):
            return ""
        visible = text
        if self.plan.mode == AUTO:
            visible = _before_open_tag(text, self.plan.format.open_tag)
        if "\ufffd" in visible or not visible.startswith(self.sent):
            return ""
        new = visible[len(self.sent) :]
        self.sent = visible
        return new


def _before_open_tag(text: str, open_tag: str) -> str:
    at = text.find(open_tag)
    if at >= 0:
        return text[:at]
    for keep in range(min(len(open_tag) - 1, len(text)), 0, -1):
        if text.endswith(open_tag[:keep]):
            return text[:-keep]
    return text


def tool_call_deltas(calls: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Streamed `delta.tool_calls` lists as OpenAI sends them: per call, one delta with its index,
    id, type and name (arguments ""), then one with its arguments."""
    out: list[list[dict[str, Any]]] = []
    for index, call in enumerate(calls):
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        head = {"name": name, "arguments": ""}
        out.append([{"index": index, "id": call["id"], "type": "function", "function": head}])
        out.append([{"index": index, "function": {"arguments": arguments}}])
    return out
