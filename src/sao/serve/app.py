"""The HTTP API (FastAPI): OpenAI's chat completions and models, plus feedback, status, metrics.

    POST /v1/chat/completions   one reply (streamed as server-sent events with `stream: true`);
                                header `X-Episode-Id` names the episode the call belongs to;
                                the reply's `id` is the handle for feedback outside episodes
    GET  /v1/models             the served model and its policy version
    POST /v1/feedback           {"id" | "episode_id", "reward" | "env_error"} -> 200 accepted (or
                                env_error: recorded, never trained) | 404 | 409 | 422
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
from jinja2 import TemplateError
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
from sao.serve.store import (
    ENV_ERROR,
    OPEN,
    CompletionInEpisode,
    DuplicateFeedback,
    EpisodeClosed,
    UnknownCompletion,
    UnknownEpisode,
)
from sao.serve.tools import ToolPlan, plan_tools

EPISODE_HEADER = "x-episode-id"
_MAX_EPISODE_ID = 256


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

    def current_counts() -> dict[str, int]:
        service.store.drop_idle_episodes(service.idle_before())
        return service.store.counts()

    @app.get("/v1/status", dependencies=guarded)
    async def status() -> dict[str, Any]:
        counts = await run_in_threadpool(current_counts)
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
        service.metrics.set_counts(await run_in_threadpool(current_counts))
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    @app.post("/v1/feedback", dependencies=guarded)
    async def feedback(request: Request) -> dict[str, str]:
        body = await read_body(request, FeedbackRequest)
        if body.episode_id is not None:
            answer = await _episode_feedback(service, body.episode_id, body.reward, body.env_error)
        else:
            assert body.id is not None
            answer = await _completion_feedback(service, body.id, body.reward, body.env_error)
        if body.env_error is None:
            service.live.notify()
        return answer

    @app.post("/v1/chat/completions", dependencies=guarded)
    async def chat_completions(request: Request) -> Any:
        body = await read_body(request, ChatCompletionRequest)
        episode_id = _episode_id(request)
        messages, params, plan = _check_request(service, body)
        context = await run_in_threadpool(_context, service, messages, plan, episode_id)
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
        reply = Reply(service, body, messages, context, params, plan, episode_id)
        if body.stream:
            return StreamingResponse(reply.events(), media_type="text/event-stream")
        try:
            return await reply.whole()
        finally:
            service.gate.leave()
            service.metrics.in_flight.set(service.gate.active)

    return app


def _episode_id(request: Request) -> str | None:
    """The `X-Episode-Id` header, or None; 400 for an empty or overlong one."""
    value = request.headers.get(EPISODE_HEADER)
    if value is None:
        return None
    if not value.strip() or len(value) > _MAX_EPISODE_ID:
        raise http_error(
            400,
            f"X-Episode-Id: must be 1 to {_MAX_EPISODE_ID} characters, not blank",
            "invalid_request_error",
        )
    return value


def _context(
    service: Service, messages: list[dict[str, Any]], plan: ToolPlan, episode_id: str | None
) -> Any:
    """The turn's context (see `sao.serve.sessions`), the forced call opening appended."""
    tip = None
    if episode_id is not None:
        service.store.drop_idle_episodes(service.idle_before())
        episode = service.store.episode(episode_id)
        if episode is not None and episode.state != OPEN:
            raise http_error(
                409,
                f"episode {episode_id!r} has ended ({episode.state}); name a new X-Episode-Id",
                "conflict_error",
                "episode_closed",
            )
        tip = service.store.completion(episode.tip) if episode is not None else None
    try:
        context = turn_context(
            messages,
            plan.tools,
            service.renderer,
            service.store.completion_by_context,
            episode_tip=tip,
            in_episode=episode_id is not None,
        )
    except (ValueError, TypeError, TemplateError) as err:  # the chat template refused them
        raise http_error(
            400, f"messages: the chat template cannot render them: {err}", "invalid_request_error"
        ) from None
    if plan.forced_text:
        context = context.extended(service.renderer.encode(plan.forced_text))
    return context


async def _episode_feedback(
    service: Service, episode_id: str, reward: float | None, error: str | None
) -> dict[str, str]:
    """A reward for the episode, or `error`: its tool or environment failed, so it ends without
    training (a failure that is not the policy's must not teach it anything)."""
    try:
        completion_id = await run_in_threadpool(
            service.store.add_episode_feedback,
            episode_id,
            0.0 if reward is None else reward,
            service.idle_before(),
            error,
        )
    except UnknownEpisode:
        raise http_error(404, f"no episode with id {episode_id!r}", "not_found_error") from None
    except EpisodeClosed as err:
        raise http_error(
            409,
            f"episode {episode_id!r} has ended ({err.state}): it takes one reward, within "
            f"serve.episode_timeout_s={service.config.serve.episode_timeout_s:g} s of its last call",
            "conflict_error",
            "episode_closed",
        ) from None
    return {"episode_id": episode_id, "id": completion_id, "status": _status(error)}


async def _completion_feedback(
    service: Service, completion_id: str, reward: float | None, error: str | None
) -> dict[str, str]:
    try:
        await run_in_threadpool(
            service.store.add_feedback, completion_id, 0.0 if reward is None else reward, error
        )
    except UnknownCompletion:
        raise http_error(
            404, f"no completion with id {completion_id!r}", "not_found_error"
        ) from None
    except CompletionInEpisode as err:
        raise http_error(
            409,
            f"completion {completion_id!r} belongs to episode {err.episode_id!r}: reward the "
            'episode ({"episode_id": ..., "reward": ...})',
            "conflict_error",
            "completion_in_episode",
        ) from None
    except DuplicateFeedback:
        raise http_error(
            409, f"completion {completion_id!r} already has a reward", "conflict_error"
        ) from None
    return {"id": completion_id, "status": _status(error)}


def _status(error: str | None) -> str:
    """A feedback answer's status: `accepted` (a reward, to be trained) or `env_error` (recorded,
    never trained)."""
    return "accepted" if error is None else ENV_ERROR


def _check_request(
    service: Service, body: ChatCompletionRequest
) -> tuple[list[dict[str, Any]], SamplingParams, ToolPlan]:
    """The request's messages, sampling settings and tool plan, or a 400/404 naming what cannot
    be served."""
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
    try:
        plan = plan_tools(body, service.tool_format)
    except ValueError as err:
        raise refuse(str(err)) from None
    params = SamplingParams(rollout.temperature, rollout.top_p, max_tokens)
    return messages, params, plan
