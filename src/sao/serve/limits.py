"""Request limits: body size, requests per minute per key, concurrent generations.

A generation over the concurrency limit is refused with 429 at once (not queued): the engine's
batch is the queue, and a bounded number of in-flight requests keeps every caller's latency
bounded; a client retries after `Retry-After`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Limits:
    """What one server accepts.

    Attributes:
        max_body_bytes: request bodies above this get 413.
        max_prompt_tokens: prompts (the whole conversation so far, in tokens) above this get 400.
        max_tokens_cap: a `max_tokens` above this gets 400; it is also the default.
        requests_per_minute: per API key, over a sliding minute; above it 429.
        max_concurrent: generations in flight at once; above it 429.
    """

    max_body_bytes: int = 1 << 20
    max_prompt_tokens: int = 256
    max_tokens_cap: int = 96
    requests_per_minute: int = 600
    max_concurrent: int = 32

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"limits.{name}: must be an int >= 1, got {value!r}")


class RateLimiter:
    """Sliding one-minute window of request times per key."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> float | None:
        """None when the request may go ahead (and is counted); else seconds to wait."""
        now = self._clock()
        with self._lock:
            times = self._seen.setdefault(key, deque())
            while times and times[0] <= now - 60.0:
                times.popleft()
            if len(times) >= self.per_minute:
                return max(0.0, times[0] + 60.0 - now)
            times.append(now)
            return None


class ConcurrencyGate:
    """Counts generations in flight; `try_enter` refuses beyond the limit instead of waiting."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._active = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> int:
        return self._active

    def try_enter(self) -> bool:
        with self._lock:
            if self._active >= self.limit:
                return False
            self._active += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._active -= 1


def error_body(message: str, kind: str, code: str | None = None) -> str:
    """An OpenAI-style error body."""
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


class BodySizeLimit:
    """ASGI middleware: 413 for a body over `max_bytes`, by its declared length or as it arrives.

    The body is read here (at most `max_bytes` plus one chunk) and replayed to the app, so a body
    without a declared length is refused before any handler sees it.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.max_bytes:
                await self._refuse(send)
                return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Callable) -> None:
        body = error_body(
            f"request body larger than {self.max_bytes} bytes",
            "invalid_request_error",
            "body_too_large",
        ).encode("utf-8")
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
