"""Helpers for the service tests: a small config, a service, a live server on a free port."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from sao.config import load_config
from sao.rollout.requests import Completion
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


def wait_for_status(client, predicate, timeout: float = 60.0) -> dict:
    """Poll `GET /v1/status` through `client` until `predicate(status)` holds; return that status.

    Raises:
        AssertionError: after `timeout` seconds, with the last status.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get("/v1/status").json()
        if predicate(status):
            return status
        time.sleep(0.05)
    raise AssertionError(f"timed out; last status {status}")


def user(text: str = STYLE_PROMPT) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


class ScriptedEngine:
    """An engine whose replies are scripted: each request gets the next text, tokenized, with
    log-prob -0.5 per token and the current version. It records every prompt it was given, so a
    test can check exactly what the server sampled from and what it did with a known reply."""

    def __init__(self, tokenizer, replies, eos: bool = True) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.eos = eos
        self.prompts: list[list[int]] = []
        self.version = 0
        self.is_paused = False
        self._ready: list[Completion] = []

    def has_work(self) -> bool:
        return bool(self._ready)

    def check_sampling(self, params) -> None:
        return None

    def submit(self, request_id, prompt_ids, params, stop_token_ids=(), stop_strings=()) -> None:
        self.prompts.append(list(prompt_ids))
        ids = self.tokenizer.encode(self.replies.pop(0), add_special_tokens=False)
        if self.eos:
            ids.append(self.tokenizer.eos_token_id)
        n = len(ids)
        self._ready.append(Completion(request_id, ids, [-0.5] * n, [self.version] * n, "stop"))

    def in_flight_tokens(self) -> dict[str, list[int]]:
        return {}

    def step(self) -> list[Completion]:
        done, self._ready = self._ready, []
        return done

    def update_weights(self, state_dict, version: int) -> None:
        self.version = version


def scripted(service: Service, replies, eos: bool = True) -> ScriptedEngine:
    """Put a `ScriptedEngine` in place of the service's engine (before the service starts)."""
    engine = ScriptedEngine(service.tokenizer, replies, eos)
    service.worker.engine = engine
    return engine


# A Qwen2.5-style chat template that renders tools, assistant tool calls and tool results (the
# shape of the templates real tool-calling checkpoints ship), for the BPE test checkpoint.
TOOLS_CHAT_TEMPLATE = (
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages[0].role == 'system' -%}{{- messages[0].content + '\\n\\n' -}}{%- endif -%}"
    "{{- '# Tools\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools><|im_end|>\\n' -}}"
    "{%- elif messages[0].role == 'system' -%}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'assistant' and not message.tool_calls -%}"
    "{{- '<|im_start|>assistant\\n' + message.content + '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant' -}}"
    "{%- if message.content -%}{{- '\\n' + message.content -}}{%- endif -%}"
    "{%- for call in message.tool_calls -%}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + call.function.name + \'", "arguments": \' -}}'
    "{{- (call.function.arguments | tojson) + '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}"
    "{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}"
    "{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}
