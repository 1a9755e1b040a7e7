"""A `tool_calc` agent written with the OpenAI Agents SDK (`openai-agents`), fully offline.

    python examples/agents/agents_sdk.py --url http://127.0.0.1:8000 --episodes 20

The agent's model is an `OpenAIChatCompletionsModel` over an `AsyncOpenAI` client whose base URL
is the server; tracing is disabled (nothing leaves the machine). The SDK runs the tool loop: it
calls the `calculator` function tool the agent declares, sends the result back as a `tool`
message, and stops at a reply without calls, or raises `MaxTurnsExceeded` after `max_turns` model
calls. `X-Episode-Id` rides on every call through `ModelSettings.extra_headers`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunHooks,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_common import (  # noqa: E402
    BAD_ARGUMENTS,
    EPISODE_HEADER,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    EpisodeResult,
    Server,
    calculator,
    finish,
    main,
)

from sao.envs import Task  # noqa: E402

set_tracing_disabled(True)


class _ModelCalls(RunHooks[Any]):
    """Counts the model calls of one run and the function calls they made (every one, also those
    whose arguments the SDK refused before running the tool)."""

    def __init__(self) -> None:
        self.count = 0
        self.tool_calls = 0

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.count += 1
        self.tool_calls += sum(
            getattr(item, "type", None) == "function_call" for item in response.output
        )


def _bad_arguments(context: Any, error: Exception) -> str:
    """The tool result when the SDK cannot call the tool with the model's arguments."""
    return BAD_ARGUMENTS


@function_tool(
    name_override=TOOL_NAME,
    description_override=TOOL_DESCRIPTION,
    failure_error_function=_bad_arguments,
)
def calculator_tool(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: e.g. 347*29+18
    """
    return calculator(expression)


async def _run(task: Task, server: Server, episode_id: str, max_turns: int) -> EpisodeResult:
    # One client per episode: an AsyncOpenAI client belongs to the event loop it first ran on.
    client = AsyncOpenAI(
        base_url=server.openai_base_url, api_key=server.openai_api_key, max_retries=8
    )
    agent = Agent(
        name="tool_calc",
        model=OpenAIChatCompletionsModel(model=server.model, openai_client=client),
        model_settings=ModelSettings(extra_headers={EPISODE_HEADER: episode_id}),
        tools=[calculator_tool],
    )
    hooks = _ModelCalls()
    try:
        result = await Runner.run(agent, task.prompt, max_turns=max_turns, hooks=hooks)
        final = str(result.final_output or "")
    except (MaxTurnsExceeded, ModelBehaviorError):
        final = ""
    finally:
        await client.close()
    return finish(task, episode_id, final, hooks.tool_calls, hooks.count)


def run_episode(task: Task, server: Server, episode_id: str, max_turns: int) -> EpisodeResult:
    """One episode of `task` on its own event loop (so threads can run episodes side by side)."""
    return asyncio.run(_run(task, server, episode_id, max_turns))


if __name__ == "__main__":
    sys.exit(main("agents_sdk", run_episode))
