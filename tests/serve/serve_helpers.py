"""Helpers for the service tests: a small config, a service, a live server on a free port."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from sao.config import load_config
from sao.serve.app import create_app
from sao.serve.limits import Limits
from sao.serve.service import Service, build_service

SMALL = [
    "env.name=style_stream",
    "train.batch_size=2",
    "rollout.max_new_tokens=8",
    "rollout.concurrency=4",
    "env.max_tokens=192",
]


def small_config(preset: str = "sao", *extra: str):
    return load_config(preset, None, [*SMALL, *extra])


def make_service(
    policy_dir: str, db_path, *, preset: str = "sao", extra=(), api_key=None, warmup=1, **limits
) -> Service:
    config = small_config(preset, *extra)
    base = {"max_prompt_tokens": 160, "max_tokens_cap": 8, "max_concurrent": 4}
    return build_service(
        config, policy_dir, db_path, api_key, Limits(**{**base, **limits}), warmup_batches=warmup
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_server(service: Service) -> Iterator[str]:
    """uvicorn on a free loopback port in a thread; yields the base URL."""
    port = free_port()
    config = uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


STYLE_PROMPT = "Styles: cute, chuunibyou, classical, pirate.\nWrite one line about the moon.\n"


def user(text: str = STYLE_PROMPT) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]
