"""The request bodies the service accepts (OpenAI's shapes, strictly typed) and how they are read.

Bodies are parsed by hand rather than by FastAPI's signature binding so that the order of checks
is fixed (auth, then rate limit, then the body) and so that JSON that does not parse is a 400 while
JSON of the wrong shape is a 422, each with a one-line message and never a 500.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from fastapi import HTTPException, Request
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["text"]
    text: StrictStr


class FunctionCall(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: StrictStr
    arguments: StrictStr


class ToolCallItem(BaseModel):
    """One call of an assistant message, as OpenAI returns it (and clients send it back)."""

    model_config = ConfigDict(extra="ignore")
    id: StrictStr
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    """One message; content is a string, a list of text parts (joined), or null (an assistant
    message that only calls tools)."""

    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: StrictStr | list[TextPart] | None = None
    tool_calls: list[ToolCallItem] | None = None
    tool_call_id: StrictStr | None = None
    name: StrictStr | None = None

    @model_validator(mode="after")
    def _content_or_calls(self) -> ChatMessage:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content: null is only for an assistant message with tool_calls")
        return self

    def as_dict(self) -> dict[str, Any]:
        """The message as the server handles it: `role` (`developer` is OpenAI's newer
        `system`), `content` (parts joined; None stays None), and the tool fields when present."""
        content = self.content
        if isinstance(content, list):
            content = "".join(part.text for part in content)
        role = "system" if self.role == "developer" else self.role
        out: dict[str, Any] = {"role": role, "content": content}
        if self.tool_calls:
            out["tool_calls"] = [call.model_dump() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None and role == "tool":
            out["name"] = self.name
        return out


class FunctionDefinition(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: StrictStr = Field(min_length=1, max_length=128)
    description: StrictStr | None = None
    parameters: dict[str, Any] | None = None


class ToolDefinition(BaseModel):
    """A declared tool: OpenAI's `{"type": "function", "function": {name, description,
    parameters}}`."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["function"]
    function: FunctionDefinition

    def as_dict(self) -> dict[str, Any]:
        return {"type": "function", "function": self.function.model_dump(exclude_none=True)}


class NamedFunction(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: StrictStr


class NamedToolChoice(BaseModel):
    """`tool_choice: {"type": "function", "function": {"name": ...}}`."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: StrictBool = False


class ChatCompletionRequest(BaseModel):
    """`POST /v1/chat/completions`. Fields the service does not use are ignored, as OpenAI's
    unknown optional fields would be; fields it cannot honour are refused by the route."""

    model_config = ConfigDict(extra="ignore")
    model: StrictStr
    messages: list[ChatMessage] = Field(min_length=1)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    n: StrictInt | None = None
    max_tokens: StrictInt | None = Field(None, ge=1)
    max_completion_tokens: StrictInt | None = Field(None, ge=1)
    temperature: Number | None = None
    top_p: Number | None = None
    stop: Any = None
    tools: list[ToolDefinition] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: StrictBool | None = None


class FeedbackRequest(BaseModel):
    """`POST /v1/feedback`: a finite reward for a completion id or for an episode id, or instead
    `env_error`, saying that a tool or the environment failed (recorded, never trained)."""

    model_config = ConfigDict(extra="forbid")
    id: StrictStr | None = None
    episode_id: StrictStr | None = None
    reward: Number | None = None
    env_error: Annotated[StrictStr, Field(min_length=1, max_length=4096)] | None = None

    @model_validator(mode="after")
    def _one_target(self) -> FeedbackRequest:
        if (self.id is None) == (self.episode_id is None):
            raise ValueError("give exactly one of id (a completion) and episode_id")
        if (self.reward is None) == (self.env_error is None):
            raise ValueError(
                "give exactly one of reward (a finite number) and env_error (what failed, when "
                "a tool or the environment did)"
            )
        return self


Body = TypeVar("Body", bound=BaseModel)


def http_error(status: int, message: str, kind: str, code: str | None = None) -> HTTPException:
    """An HTTPException whose detail becomes an OpenAI-style error body."""
    return HTTPException(status, {"message": message, "type": kind, "param": None, "code": code})


async def read_body(request: Request, model: type[Body]) -> Body:
    """Parse and validate a JSON body.

    Raises:
        HTTPException: 400 when the body is not a JSON object, 422 naming the first bad field.
    """
    raw = await request.body()
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise http_error(400, f"body is not valid JSON: {err}", "invalid_request_error") from None
    if not isinstance(data, dict):
        raise http_error(400, "body must be a JSON object", "invalid_request_error")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise http_error(
            422, f"{where}: {first['msg']}", "invalid_request_error", "invalid_value"
        ) from None
