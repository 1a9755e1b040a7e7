"""The request bodies the service accepts (OpenAI's shapes, strictly typed) and how they are read.

Bodies are parsed by hand rather than by FastAPI's signature binding so that the order of checks
is fixed (auth, then rate limit, then the body) and so that JSON that does not parse is a 400 while
JSON of the wrong shape is a 422, each with a one-line message and never a 500.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from fastapi import HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["text"]
    text: StrictStr


class ChatMessage(BaseModel):
    """One message; content is a string or a list of text parts (joined)."""

    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: StrictStr | list[TextPart]

    def as_dict(self) -> dict[str, str]:
        """`{"role", "content"}` with parts joined; `developer` is OpenAI's newer `system`."""
        content = (
            self.content
            if isinstance(self.content, str)
            else "".join(part.text for part in self.content)
        )
        role = "system" if self.role == "developer" else self.role
        return {"role": role, "content": content}


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


class FeedbackRequest(BaseModel):
    """`POST /v1/feedback`: a finite reward for a completion id."""

    model_config = ConfigDict(extra="forbid")
    id: StrictStr
    reward: Number


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
