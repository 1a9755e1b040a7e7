"""The HTTP API (FastAPI): OpenAI's chat completions and models, plus feedback, status, metrics.

    POST /v1/chat/completions   one reply (streamed as server-sent events with `stream: true`);
                                its `id` is the handle for feedback
    GET  /v1/models             the served model and its policy version
    POST /v1/feedback           {"id", "reward"} -> 200 accepted | 404 | 409 | 422
    GET  /v1/status             counts, policy version, the learner's last metrics
    GET  /metrics               Prometheus text
    GET  /health                no auth

Every route but `/health` needs `Authorization: Bearer <key>` when the server has a key.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from sao.rollout.requests import SamplingParams
from sao.serve.auth import bearer_matches
from sao.serve.limits import BodySizeLimit
from sao.serve.metrics import CONTENT_TYPE
from sao.serve.protocol import (
    ChatCompletionRequest,
    FeedbackRequest,
    http_error,
    read_body,
)
from sao.serve.replies import Reply
from sao.serve.service import Service
from sao.serve.sessions import turn_context
from sao.serve.store import DuplicateFeedback, UnknownCompletion


def create_app(service: Service, manage_lifecycle: bool = True) -> FastAPI:
    """The API over `service`; with `manage_lifecycle` the app starts and closes its threads."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            service.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                service.close()

    app = FastAPI(title="sao serve", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.add_middleware(BodySizeLimit, max_bytes=service.limits.max_body_bytes)
    routes = {"/health", "/metrics", "/v1/models", "/v1/status", "/v1/feedback",
              "/v1/chat/completions"}  # fmt: skip

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        endpoint = request.url.path if request.url.path in routes else "other"
        service.metrics.requests.labels(endpoint=endpoint, status=str(response.status_code)).inc()
        return response

    @app.exception_handler(HTTPException)
    async def openai_error(_: Request, err: HTTPException) -> JSONResponse:
        detail = err.detail
        if not isinstance(detail, dict):
            detail = {"message": str(detail), "type": "invalid_request_error", "param": None}
        return JSONResponse({"error": detail}, status_code=err.status_code, headers=err.headers)

    async def authorize(request: Request) -> None:
        if service.api_key is not None and not bearer_matches(
            request.headers.get("authorization"), service.api_key
        ):
            raise HTTPException(
                401,
                {
                    "message": "missing or wrong API key",
                    "type": "authentication_error",
                    "param": None,
                    "code": "invalid_api_key",
                },
                headers={"WWW-Authenticate": "Bearer"},
            )
        wait = service.rate.allow(service.key_id)
        if wait is not None:
            raise HTTPException(
                429,
                {
                    "message": f"more than {service.rate.per_minute} requests per minute",
                    "type": "rate_limit_error",
                    "param": None,
                    "code": "rate_limit_exceeded",
                },
                headers={"Retry-After": str(max(1, round(wait)))},
            )

    guarded = [Depends(authorize)]

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "policy_version": service.worker.version}

    @app.get("/v1/models", dependencies=guarded)
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": service.model_name,
                    "object": "model",
                    "created": int(service.started_at),
                    "owned_by": "sao",
                    "policy_version": service.worker.version,
                }
            ],
        }

    @app.get("/v1/status", dependencies=guarded)
    async def status() -> dict[str, Any]:
        counts = await run_in_threadpool(service.store.counts)
        return {
            "policy_version": service.worker.version,
            **counts,
            "in_flight": service.gate.active,
            "preset": service.config.preset,
            "env": service.config.env.name,
            "uptime_s": time.time() - service.started_at,
            "learner": service.live.status(),
        }

    @app.get("/metrics", dependencies=guarded)
    async def metrics() -> Response:
        service.metrics.policy_version.set(service.worker.version)
        service.metrics.set_counts(await run_in_threadpool(service.store.counts))
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    @app.post("/v1/feedback", dependencies=guarded)
    async def feedback(request: Request) -> dict[str, str]:
        body = await read_body(request, FeedbackRequest)
        try:
            await run_in_threadpool(service.store.add_feedback, body.id, body.reward)
        except UnknownCompletion:
            raise http_error(404, f"no completion with id {body.id!r}", "not_found_error") from None
        except DuplicateFeedback:
            raise http_error(
                409, f"completion {body.id!r} already has a reward", "conflict_error"
            ) from None
        service.live.notify()
        return {"id": body.id, "status": "accepted"}

    @app.post("/v1/chat/completions", dependencies=guarded)
    async def chat_completions(request: Request) -> Any:
        body = await read_body(request, ChatCompletionRequest)
        messages, params = _check_request(service, body)
        context = await run_in_threadpool(
            turn_context, messages, service.tokenizer, service.store.completion_by_context
        )
        if len(context.prompt_ids) > service.limits.max_prompt_tokens:
            raise http_error(
                400,
                f"prompt has {len(context.prompt_ids)} tokens, the limit is "
                f"{service.limits.max_prompt_tokens}",
                "invalid_request_error",
                "context_length_exceeded",
            )
        if not service.gate.try_enter():
            raise HTTPException(
                429,
                {
                    "message": f"{service.limits.max_concurrent} generations already in flight",
                    "type": "rate_limit_error",
                    "param": None,
                    "code": "too_many_generations",
                },
                headers={"Retry-After": "1"},
            )
        service.metrics.in_flight.set(service.gate.active)
        reply = Reply(service, body, messages, context, params)
        if body.stream:
            return StreamingResponse(reply.events(), media_type="text/event-stream")
        try:
            return await reply.whole()
        finally:
            service.gate.leave()
            service.metrics.in_flight.set(service.gate.active)

    return app


def _check_request(
    service: Service, body: ChatCompletionRequest
) -> tuple[list[dict[str, str]], SamplingParams]:
    """The request's messages and sampling settings, or a 400/404 naming what cannot be served."""
    rollout = service.config.rollout

    def refuse(message: str, code: str = "unsupported_value") -> HTTPException:
        return http_error(400, message, "invalid_request_error", code)

    if body.model != service.model_name:
        raise http_error(
            404,
            f"model {body.model!r} is not served here; use {service.model_name!r}",
            "not_found_error",
            "model_not_found",
        )
    if body.n is not None and body.n != 1:
        raise refuse(f"n: must be 1 (one reply per request, single rollout), got {body.n}")
    if body.stop is not None:
        raise refuse("stop: not supported; replies end at the environment's closing tag or EOS")
    for name, served in (("temperature", rollout.temperature), ("top_p", rollout.top_p)):
        asked = getattr(body, name)
        if asked is not None and abs(asked - served) > 1e-9:
            raise refuse(
                f"{name}: this server samples at {served} (the learner's DIS ratio needs the "
                f"served distribution), got {asked}"
            )
    cap = service.limits.max_tokens_cap
    max_tokens = body.max_completion_tokens or body.max_tokens or cap
    if max_tokens > cap:
        raise refuse(f"max_tokens: at most {cap}, got {max_tokens}", "max_tokens_exceeded")
    messages = [m.as_dict() for m in body.messages]
    if messages[-1]["role"] == "assistant":
        raise refuse("messages: the last message must not be the assistant's")
    params = SamplingParams(rollout.temperature, rollout.top_p, max_tokens)
    return messages, params
