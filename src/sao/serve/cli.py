"""Flags and entry points of `sao serve` and `sao simulate` (registered in `sao.cli`).

Nothing heavy is imported here: the parser is built on every `sao` call.
"""

from __future__ import annotations

import argparse
import sys

from sao.config import SAOConfig
from sao.serve.port import check_port_free, parse_port


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """`sao serve` flags (besides --preset/--config/--set/--env, added by `sao.cli`)."""
    parser.add_argument("--model", required=True, help="saved policy directory to serve")
    parser.add_argument(
        "--served-model-name",
        help="the model name clients send and /v1/models lists (default: the --model folder name)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=parse_port, default=8000, help="1 to 65535 (default 8000)")
    parser.add_argument(
        "--db", default="runs/serve/serve.db", help="SQLite file (reused: a restart resumes)"
    )
    parser.add_argument("--api-key", help="bearer key clients must send (or set SAO_API_KEY)")
    parser.add_argument(
        "--warmup-batches",
        type=int,
        default=2,
        help="critic-only batches before the first policy update (ignored without a critic)",
    )
    parser.add_argument("--max-body-bytes", type=int, default=1 << 20)
    parser.add_argument("--max-prompt-tokens", type=int, help="default: env.max_tokens - 1")
    parser.add_argument("--max-tokens-cap", type=int, help="default: rollout.max_new_tokens")
    parser.add_argument("--requests-per-minute", type=int, default=600, help="per API key")
    parser.add_argument(
        "--max-concurrent", type=int, help="generations in flight (default: rollout.concurrency)"
    )


def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    """`sao simulate` flags."""
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--api-key", help="bearer key (or set SAO_API_KEY)")
    parser.add_argument(
        "--env",
        help="environment whose users to simulate (default style_stream; tool_calc with --agent)",
    )
    parser.add_argument(
        "--agent",
        choices=("openai", "agents_sdk", "langgraph"),
        help="users are this examples/agents/ tool_calc agent (one episode per request)",
    )
    parser.add_argument("--max-turns", type=int, default=4, help="model calls per agent episode")
    parser.add_argument("--agents-dir", help="where the agent examples are (default: the source's)")
    parser.add_argument("--requests", type=int, default=256, help="conversations to run")
    parser.add_argument("--concurrency", type=int, default=4, help="users at once")
    parser.add_argument(
        "--switch-every", type=int, help="requests per preferred-style phase (env default if unset)"
    )
    parser.add_argument(
        "--request-rate",
        type=float,
        help="share of users who name the preferred style outright (default: none do)",
    )
    parser.add_argument("--window", type=int, default=32, help="requests per report window")
    parser.add_argument("--out", default="runs/simulate", help="report directory")
    parser.add_argument("--seed", type=int, default=0)


# Modules of the `serve` extra: without one, `sao serve` / `sao simulate` say which extra to install.
SERVE_EXTRA_MODULES = ("fastapi", "uvicorn", "prometheus_client", "httpx", "openai", "starlette")


def missing_serve_extra(err: ModuleNotFoundError, command: str) -> int | None:
    """Print one line naming the extra when `err` is a missing module of it; return the exit
    status (1), or None when the missing module is another one (the caller re-raises)."""
    root = (err.name or "").split(".")[0]
    if root not in SERVE_EXTRA_MODULES:
        return None
    print(
        f"{command}: the {root!r} package is not installed; install the serve extra: "
        "pip install 'sao[serve]'",
        file=sys.stderr,
    )
    return 1


def run_serve_command(config: SAOConfig, args: argparse.Namespace) -> int:
    """Build the service and run it under uvicorn until interrupted."""
    try:
        return _run_serve(config, args)
    except ModuleNotFoundError as err:
        status = missing_serve_extra(err, "sao serve")
        if status is None:
            raise
        return status


def _run_serve(config: SAOConfig, args: argparse.Namespace) -> int:
    import uvicorn

    from sao.serve.app import create_app
    from sao.serve.auth import check_bind, resolve_api_key
    from sao.serve.limits import Limits
    from sao.serve.service import build_service, default_limits

    api_key = resolve_api_key(args.api_key)
    base = default_limits(config)
    try:
        check_bind(args.host, api_key)
        check_port_free(args.host, args.port)  # before the model loads, not after
        limits = Limits(
            max_body_bytes=args.max_body_bytes,
            max_prompt_tokens=args.max_prompt_tokens or base.max_prompt_tokens,
            max_tokens_cap=args.max_tokens_cap or base.max_tokens_cap,
            requests_per_minute=args.requests_per_minute,
            max_concurrent=args.max_concurrent or base.max_concurrent,
        )
        service = build_service(
            config,
            args.model,
            args.db,
            api_key,
            limits,
            warmup_batches=args.warmup_batches,
            model_name=args.served_model_name,
        )
    except ValueError as err:
        print(f"sao serve: {err}", file=sys.stderr)
        return 2
    print(
        f"sao serve: {service.model_name} at policy version {service.worker.version} "
        f"({config.preset} on {config.env.name}), db {args.db}, "
        f"{'key required' if api_key else 'no key (loopback only)'}",
        file=sys.stderr,
    )
    uvicorn.run(create_app(service), host=args.host, port=args.port, log_level="warning")
    return 0


def run_simulate_command(args: argparse.Namespace) -> int:
    """Drive a running server with simulated users; write the adaptation report."""
    try:
        return _run_simulate(args)
    except ModuleNotFoundError as err:
        status = missing_serve_extra(err, "sao simulate")
        if status is None:
            raise
        return status


def _run_simulate(args: argparse.Namespace) -> int:
    import httpx
    import openai

    from sao.serve.auth import resolve_api_key
    from sao.serve.simulate import simulate

    try:
        if args.agent is not None:
            summary = _simulate_agents(args)
        else:
            summary = simulate(
                url=args.url,
                api_key=resolve_api_key(args.api_key),
                env=args.env or "style_stream",
                requests=args.requests,
                concurrency=args.concurrency,
                switch_every=args.switch_every,
                request_rate=args.request_rate,
                window=args.window,
                out=args.out,
                seed=args.seed,
            )
    except ValueError as err:
        print(f"sao simulate: {err}", file=sys.stderr)
        return 2
    except (httpx.HTTPError, openai.APIError) as err:
        # httpx adds a second line pointing at a web page: the first says what failed.
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"sao simulate: the server at {args.url} failed: {reason}", file=sys.stderr)
        return 1
    import json

    print(json.dumps(summary, indent=2))
    return 0


def _simulate_agents(args: argparse.Namespace) -> dict:
    """`sao simulate --agent`: refuse the style-stream settings, then run the agent crowd."""
    from sao.serve.auth import resolve_api_key
    from sao.serve.simulate_agents import AGENT_ENV, simulate_agents

    if args.env not in (None, AGENT_ENV):
        raise ValueError(
            f"--agent {args.agent}: the agents solve {AGENT_ENV}, not --env {args.env}"
        )
    if args.switch_every is not None:
        raise ValueError(f"--switch-every: {AGENT_ENV} has no preferred style to switch")
    if args.request_rate is not None:
        raise ValueError(f"--request-rate: {AGENT_ENV} has no preferred style to request")
    return simulate_agents(
        url=args.url,
        api_key=resolve_api_key(args.api_key),
        agent=args.agent,
        requests=args.requests,
        concurrency=args.concurrency,
        window=args.window,
        out=args.out,
        seed=args.seed,
        max_turns=args.max_turns,
        agents_dir=args.agents_dir,
    )
