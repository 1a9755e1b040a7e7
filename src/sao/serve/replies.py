"""One chat completion: generate through the engine thread, store, answer whole or streamed.

The completion is stored before the answer is complete: before the JSON response, or before the
server-sent event that carries `finish_reason`, so a client holding a finished reply can always
send feedback on it. What is stored as the reply is the message exactly as the client received it
(for a stream: the content deltas joined, and the tool calls), which is what a continued
conversation must send back to continue the trajectory.
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
from sao.serve.conversation import context_hash, reply_text
from sao.serve.protocol import ChatCompletionRequest, http_error
from sao.serve.service import Service
from sao.serve.sessions import TurnContext
from sao.serve.store import StoredCompletion
from sao.serve.tools import OFF, Answer, ContentStream, ToolPlan, answer, tool_call_deltas


class Reply:
    """One chat completion: generate, store, answer (whole or as server-sent events)."""

    def __init__(
        self,
        service: Service,
        body: ChatCompletionRequest,
        messages: list[dict[str, Any]],
        context: TurnContext,
        params: SamplingParams,
        plan: ToolPlan,
        episode_id: str | None = None,
    ) -> None:
        self.service = service
        self.body = body
        self.messages = messages
        self.context = context
        self.params = params
        self.plan = plan
        self.episode_id = episode_id
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.t0 = time.perf_counter()

    async def _tokens(self, stream: bool) -> AsyncIterator[list[int] | Completion]:
        service = self.service
        try:
            async for item in service.worker.generate(
                self.id,
                self.context.prompt_ids,
                self.params,
                service.stop_ids,
                stream,
                service.stop_strings,
            ):
                yield item
        except ValueError as err:
            raise http_error(400, str(err), "invalid_request_error") from None

    def _read(self, completion: Completion) -> Answer:
        text = reply_text(completion.token_ids, self.service.tokenizer)
        return answer(text, completion.finish_reason, self.plan)

    async def _store(self, completion: Completion, sent: Answer, parsed: Answer) -> None:
        """Persist the completion with `sent`, the message as the client got it."""
        trajectory = self.context.with_action(completion)
        trajectory["metadata"] = {"env": self.service.config.env.name, "completion_id": self.id}
        if self.episode_id is not None:
            trajectory["metadata"]["episode_id"] = self.episode_id
        message = sent.message
        stored = StoredCompletion(
            id=self.id,
            parent_id=self.context.parent_id,
            context_hash=context_hash([*self.messages, message]),
            messages=self.messages,
            content=sent.content or "",
            finish_reason=sent.finish_reason,
            trajectory=trajectory,
            episode_id=self.episode_id,
            kind=self.context.kind,
            tool_calls=len(parsed.tool_calls),
            malformed=parsed.malformed is not None,
            message=message,
        )
        await run_in_threadpool(self.service.store.add_completion, stored, self.service.key_id)
        metrics = self.service.metrics
        metrics.latency.observe(time.perf_counter() - self.t0)
        metrics.completion_tokens.inc(len(completion.token_ids))

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

    def _extras(self) -> dict[str, Any]:
        return {"parent_id": self.context.parent_id, "episode_id": self.episode_id}

    async def whole(self) -> dict[str, Any]:
        completion = None
        async for item in self._tokens(stream=False):
            completion = item
        assert isinstance(completion, Completion)
        parsed = self._read(completion)
        await self._store(completion, parsed, parsed)
        return {
            **self._head(max(completion.versions)),
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": parsed.message,
                    "logprobs": None,
                    "finish_reason": parsed.finish_reason,
                }
            ],
            "usage": self._usage(completion),
            **self._extras(),
        }

    async def events(self) -> AsyncIterator[str]:
        """Server-sent events as OpenAI sends them, ending with `data: [DONE]`: a first delta with
        the role, content deltas, then (for a reply with calls) `delta.tool_calls` deltas, and a
        last chunk with `finish_reason`."""
        try:
            version = self.service.worker.version
            content = ContentStream(self.plan)
            opened = self.plan.mode == OFF  # without tools the reply is content: say so at once
            if opened:
                yield self._chunk(version, {"role": "assistant", "content": ""})
            tokens: list[int] = []
            try:
                async for item in self._tokens(stream=True):
                    if isinstance(item, Completion):
                        completion = item
                        break
                    tokens += item
                    delta = content.delta(reply_text(tokens, self.service.tokenizer))
                    if delta:
                        if not opened:
                            yield self._chunk(version, {"role": "assistant", "content": ""})
                            opened = True
                        yield self._chunk(version, {"content": delta})
            except HTTPException as err:
                yield f"data: {json.dumps({'error': err.detail})}\n\n"
                return
            parsed = self._read(completion)
            version = max(completion.versions)
            sent = content.sent
            chunks: list[dict[str, Any]] = []
            if parsed.tool_calls:
                if not sent and parsed.content:
                    chunks.append({"content": parsed.content})
                    sent = parsed.content
                chunks += [{"tool_calls": deltas} for deltas in tool_call_deltas(parsed.tool_calls)]
            else:
                final = parsed.content or ""
                if final.startswith(sent) and len(final) > len(sent):
                    chunks.append({"content": final[len(sent) :]})
                    sent = final
            stored = sent or (None if parsed.tool_calls else "")
            as_sent = Answer(stored, parsed.tool_calls, parsed.finish_reason, parsed.malformed)
            await self._store(completion, as_sent, parsed)
            if not opened:  # the role comes with the first delta, as OpenAI sends it
                role = {"role": "assistant", "content": None if parsed.tool_calls else ""}
                chunks[:1] = [{**role, **chunks[0]}] if chunks else [role]
            for delta in chunks:
                yield self._chunk(version, delta)
            yield self._chunk(version, {}, parsed.finish_reason)
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

    def _chunk(self, version: int, delta: dict[str, Any], finish_reason: str | None = None) -> str:
        chunk = {
            **self._head(version),
            "object": "chat.completion.chunk",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
            **self._extras(),
        }
        return f"data: {json.dumps(chunk)}\n\n"
