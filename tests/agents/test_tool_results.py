"""Each framework's tool answers a call exactly as the `tool_calc` environment does in training,
misspelt or mistyped arguments included, so a live episode reads like a training one."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys

import pytest

from sao.envs import make_env, make_task_source
from sao.envs.tool_calc.protocol import CALL_FORMAT, TOOL_NAME
from sao.formats.tags import OUTPUT_CLOSE, OUTPUT_OPEN
from sao.serve.simulate_agents import load_agent

BAD = "error: calculator takes one string argument 'expression'"
CASES = [
    ({"expression": "347*29+18"}, "10081"),
    ({"expression": "2236/43+5120"}, "5172"),
    ({"expression": "1/0"}, "error: division by zero"),
    ({"expression": "__import__('os')"}, "error: function calls not allowed"),
    ({"exgumesion": "6*7"}, BAD),  # a key the tiny model misspelt, as seen live
    ({"expression": 42}, BAD),
]


def _environment_result(arguments: dict) -> str:
    """What `tool_calc` puts inside `<output>` for this call during training."""
    env = make_env("tool_calc")
    env.reset(next(itertools.islice(make_task_source("tool_calc").stream("train", 0), 1)))
    observation = env.step(CALL_FORMAT.render(TOOL_NAME, arguments)).observation
    assert observation.startswith(OUTPUT_OPEN) and observation.endswith(OUTPUT_CLOSE)
    return observation[len(OUTPUT_OPEN) : -len(OUTPUT_CLOSE)]


def _openai_loop(arguments: str) -> str:
    return load_agent("openai").run_call(TOOL_NAME, arguments)


def _agents_sdk(arguments: str) -> str:
    from agents.tool_context import ToolContext

    tool = load_agent("agents_sdk").calculator_tool
    context = ToolContext(
        context=None, tool_name=TOOL_NAME, tool_call_id="call_1", tool_arguments=arguments
    )
    return asyncio.run(tool.on_invoke_tool(context, arguments))


def _langgraph(arguments: str) -> str:
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    module = load_agent("langgraph")
    graph = StateGraph(MessagesState)  # the agent's `tools` node, alone (it runs inside a graph)
    graph.add_node("tools", module.tool_node())
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    call = {"name": TOOL_NAME, "args": json.loads(arguments), "id": "call_1"}
    state = graph.compile().invoke({"messages": [AIMessage(content="", tool_calls=[call])]})
    message = state["messages"][-1]
    assert message.tool_call_id == "call_1"
    return message.content


@pytest.mark.parametrize("run_tool", [_openai_loop, _agents_sdk, _langgraph])
@pytest.mark.parametrize(("arguments", "expected"), CASES)
def test_tool_result_is_the_environments(run_tool, arguments, expected):
    assert _environment_result(arguments) == expected
    assert run_tool(json.dumps(arguments)) == expected
    assert sys.modules["agent_common"].run_tool_call(json.dumps(arguments)) == expected
