"""A `tool_calc` agent written with LangGraph and `langchain-openai`.

    python examples/agents/langgraph_agent.py --url http://127.0.0.1:8000 --episodes 20

The graph is the usual ReAct loop built by hand: a `model` node (a `ChatOpenAI` whose base URL is
the server, with the `calculator` tool bound) and a `tools` node (LangGraph's `ToolNode`, which
runs the calls and appends `tool` messages); after each model call the graph goes to `tools` while
the reply calls a tool and the turn limit is not reached, else it ends. `X-Episode-Id` rides on
every call as one of the client's `default_headers`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolInvocationError

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_common import (  # noqa: E402
    BAD_ARGUMENTS,
    EPISODE_HEADER,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    EpisodeResult,
    Server,
    calculator,
    fingerprint_version,
    finish,
    main,
)

from sao.envs import Task  # noqa: E402


@tool(TOOL_NAME, description=TOOL_DESCRIPTION)
def calculator_tool(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return calculator(expression)


def bad_arguments(error: ToolInvocationError) -> str:
    """The tool message when the model's arguments do not fit the tool (a misspelt key)."""
    return BAD_ARGUMENTS


def tool_node() -> ToolNode:
    """The `tools` node: runs each call of the last reply, answering bad arguments as the
    environment does."""
    return ToolNode([calculator_tool], handle_tool_errors=bad_arguments)


def build_graph(server: Server, episode_id: str, max_turns: int) -> Any:
    """The compiled graph of one episode (its client carries the episode's header)."""
    model = ChatOpenAI(
        model=server.model,
        base_url=server.openai_base_url,
        api_key=server.openai_api_key,
        default_headers={EPISODE_HEADER: episode_id},
        max_retries=8,
    ).bind_tools([calculator_tool])

    def call_model(state: MessagesState) -> dict[str, list[Any]]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        messages = state["messages"]
        model_calls = sum(isinstance(m, AIMessage) for m in messages)
        if messages[-1].tool_calls and model_calls < max_turns:
            return "tools"
        return END

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", tool_node())
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile()


def run_episode(task: Task, server: Server, episode_id: str, max_turns: int) -> EpisodeResult:
    """One episode of `task`; see the module docstring."""
    graph = build_graph(server, episode_id, max_turns)
    state = graph.invoke(
        {"messages": [HumanMessage(task.prompt)]}, {"recursion_limit": 2 * max_turns + 2}
    )
    messages = state["messages"]
    replies = [m for m in messages if isinstance(m, AIMessage)]
    last = replies[-1]
    final = "" if last.tool_calls else str(last.content)
    return finish(
        task,
        episode_id,
        final,
        tool_calls=sum(isinstance(m, ToolMessage) for m in messages),
        model_calls=len(replies),
        policy_version=fingerprint_version(last.response_metadata.get("system_fingerprint")),
    )


if __name__ == "__main__":
    sys.exit(main("langgraph_agent", run_episode))
