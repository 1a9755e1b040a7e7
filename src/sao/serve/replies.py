"""One chat completion: generate through the engine thread, store, answer whole or streamed.

The completion is stored before the answer is complete: before the JSON response, or before the
server-sent event that carries `finish_reason`, so a client holding a finished reply can always
send feedback on its id.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool

from sao.rollout.requests import Completion, SamplingParams
from sao.serve.chat_format import context_hash, reply_text
from sao.serve.protocol import ChatCompletionRequest, http_error
from sao.serve.service import Service
from sao.serve.sessions import TurnContext
from sao.serve.store import StoredCompletion


class Reply:
    """One chat completion: generate, store, answer (whole or as server-sent events)."""

    def __init__(
        self,
        service: Service,
        body: ChatCompletionRequest,
        messages: list[dict[str, str]],
        context: TurnContext,
        params: SamplingParams,
    ) -> None:
        self.service = service
        self.body = body
        self.messages = messages
        self.context = context
        self.params = params
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.t0 = time.perf_counter()

    async def _tokens(self, stream: bool) -> AsyncIterator[list[int] | Completion]:
        try:
            async for item in self.service.worker.generate(
                self.id, self.context.prompt_ids, self.params, self.service.stop_ids, stream
            ):
                yield item
        except ValueError as err:
            raise http_error(400, str(err), "invalid_request_error") from None

    async def _store(self, completion: Completion) -> str:
        content = reply_text(completion.token_ids, self.service.tokenizer)
        trajectory = self.context.with_action(completion)
        trajectory["metadata"] = {"env": self.service.config.env.name, "completion_id": self.id}
        stored = StoredCompletion(
            id=self.id,
            parent_id=self.context.parent_id,
            context_hash=context_hash([*self.messages, {"role": "assistant", "content": content}]),
            messages=self.messages,
            content=content,
            finish_reason=completion.finish_reason,
            trajectory=trajectory,
        )
        await run_in_threadpool(self.service.store.add_completion, stored, self.service.key_id)
        metrics = self.service.metrics
        metrics.latency.observe(time.perf_counter() - self.t0)
        metrics.completion_tokens.inc(len(completion.token_ids))
        return content

    def _head(self, version: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "created": self.created,
            "model": self.service.model_name,
            "system_fingerprint": f"sao-v{version}",
        }

    def _usage(self, completion: Completion) -> dict[str, int]:
        prompt = len(self.context.prompt_ids)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": len(completion.token_ids),
            "total_tokens": prompt + len(completion.token_ids),
        }

    async def whole(self) -> dict[str, Any]:
        completion = None
        async for item in self._tokens(stream=False):
            completion = item
        assert isinstance(completion, Completion)
        content = await self._store(completion)
        return {
            **self._head(max(completion.versions)),
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": None,
                    "finish_reason": completion.finish_reason,
                }
            ],
            "usage": self._usage(completion),
            "parent_id": self.context.parent_id,
        }

    async def events(self) -> AsyncIterator[str]:
        """Server-sent events as OpenAI sends them, ending with `data: [DONE]`."""
        try:
            version = self.service.worker.version
            yield self._chunk(version, {"role": "assistant", "content": ""}, None)
            tokens: list[int] = []
            sent = ""
            try:
                async for item in self._tokens(stream=True):
                    if isinstance(item, Completion):
                        completion = item
                        break
                    tokens += item
                    text = reply_text(tokens, self.service.tokenizer)
                    if text.startswith(sent) and len(text) > len(sent) and "\ufffd" not in text:
                        yield self._chunk(version, {"content": text[len(sent) :]}, None)
                        sent = text
            except HTTPException as err:
                yield f"data: {json.dumps({'error': err.detail})}\n\n"
                return
            content = await self._store(completion)
            version = max(completion.versions)
            if content.startswith(sent) and len(content) > len(sent):
                yield self._chunk(version, {"content": content[len(sent) :]}, None)
            yield self._chunk(version, {}, completion.finish_reason)
            options = self.body.stream_options
            if options is not None and options.include_usage:
                usage_chunk = {
                    **self._head(version),
                    "object": "chat.completion.chunk",
                    "choices": [],
                    "usage": self._usage(completion),
                }
                yield f"data: {json.dumps(usage_chunk)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            self.service.gate.leave()
            self.service.metrics.in_flight.set(self.service.gate.active)

    def _chunk(self, version: int, delta: dict[str, str], finish_reason: str | None) -> str:
        chunk = {
            **self._head(version),
            "object": "chat.completion.chunk",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        return f"data: {json.dumps(chunk)}\n\n"
