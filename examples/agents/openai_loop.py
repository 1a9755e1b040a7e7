"""A `tool_calc` agent written with the plain `openai` client: the tool loop by hand.

    python examples/agents/openai_loop.py --url http://127.0.0.1:8000 --episodes 20

Each episode: the task's prompt as the user message with `calculator` declared; while the reply
carries `tool_calls`, run each call and send its result back as a `tool` message; the reply
without calls is the final answer. `X-Episode-Id` rides on every call as `extra_headers`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_common import (  # noqa: E402
    CALCULATOR_TOOL,
    EPISODE_HEADER,
    TOOL_NAME,
    EpisodeResult,
    Server,
    fingerprint_version,
    finish,
    main,
    run_tool_call,
)

from sao.envs import Task  # noqa: E402


def run_call(name: str, arguments: str) -> str:
    """The tool result for one call the model made (errors go back to the model as text)."""
    if name != TOOL_NAME:  # the server only returns calls to declared functions
        return f"error: unknown tool {name!r}"
    return run_tool_call(arguments)


def run_episode(task: Task, server: Server, episode_id: str, max_turns: int) -> EpisodeResult:
    """One episode of `task`; see the module docstring."""
    client = openai.OpenAI(
        base_url=server.openai_base_url, api_key=server.openai_api_key, max_retries=8
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": task.prompt}]
    tool_calls = 0
    version = None
    for turn in range(1, max_turns + 1):
        reply = client.chat.completions.create(
            model=server.model,
            messages=messages,
            tools=[CALCULATOR_TOOL],
            extra_headers={EPISODE_HEADER: episode_id},
        )
        message = reply.choices[0].message
        version = fingerprint_version(reply.system_fingerprint)
        if not message.tool_calls:
            return finish(task, episode_id, message.content or "", tool_calls, turn, version)
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            tool_calls += 1
            result = run_call(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return finish(task, episode_id, "", tool_calls, max_turns, version)


if __name__ == "__main__":
    sys.exit(main("openai_loop", run_episode))
