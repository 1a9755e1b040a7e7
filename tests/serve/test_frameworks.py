"""Agent frameworks against `sao serve`: LangGraph's ReAct agent (through `langchain-openai`) and
the OpenAI Agents SDK each run a tool loop in one episode, and the server continues one trajectory
across their calls. The engine is scripted (a call, then an answer), so the loop is known."""

from __future__ import annotations

import asyncio

import pytest
from serve_helpers import make_service, running_server, scripted

CALL = '<tool>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool>'
ANSWER = "<answer>5</answer>"


def calculator(expression: str) -> str:
    """Add the integers of a sum such as `2+3`."""
    return str(sum(int(term) for term in expression.split("+")))


# The server's counts after one episode of a call and an answer: the second completion continues
# the first, in the one episode started.
ONE_CALL_EPISODE = {
    "completions": 2,
    "continued": 1,
    "restarted": 0,
    "tool_calls": 1,
    "episodes_started": 1,
}


def _episode_status(service):
    counts = service.store.counts()
    return {k: counts[k] for k in ONE_CALL_EPISODE}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("streaming", [False, True])
def test_a_langgraph_react_agent_runs_one_episode(policy_dir, tmp_path, streaming):
    pytest.importorskip("langgraph.prebuilt")
    langchain_openai = pytest.importorskip("langchain_openai")
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    service = make_service(policy_dir, tmp_path / "s.db", extra=["train.batch_size=64"])
    scripted(service, [CALL, ANSWER], eos=False)
    with running_server(service) as url:
        model = langchain_openai.ChatOpenAI(
            model="tiny-policy",
            base_url=f"{url}/v1",
            api_key="none",
            max_retries=0,
            streaming=streaming,
            default_headers={"X-Episode-Id": "langgraph-1"},
        )
        agent = create_react_agent(model, [tool(calculator)])
        result = agent.invoke({"messages": [("user", "What is 2+3?")]})
        status = _episode_status(service)
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    assert result["messages"][2].content == "5"
    assert result["messages"][-1].content == ANSWER
    assert status == ONE_CALL_EPISODE


@pytest.mark.parametrize("streamed", [False, True])
def test_an_openai_agents_sdk_agent_runs_one_episode(policy_dir, tmp_path, streamed):
    agents = pytest.importorskip("agents")
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)  # nothing leaves the machine
    service = make_service(policy_dir, tmp_path / "s.db", extra=["train.batch_size=64"])
    scripted(service, [CALL, ANSWER], eos=False)
    with running_server(service) as url:
        client = AsyncOpenAI(
            base_url=f"{url}/v1",
            api_key="none",
            max_retries=0,
            default_headers={"X-Episode-Id": "agents-sdk-1"},
        )
        agent = agents.Agent(
            name="adder",
            instructions="Add numbers with the calculator.",
            model=agents.OpenAIChatCompletionsModel(model="tiny-policy", openai_client=client),
            tools=[agents.function_tool(calculator)],
        )
        if streamed:

            async def run():
                result = agents.Runner.run_streamed(agent, "What is 2+3?")
                async for _ in result.stream_events():
                    pass
                return result

            result = asyncio.run(run())
        else:
            result = agents.Runner.run_sync(agent, "What is 2+3?")
        status = _episode_status(service)
    assert result.final_output == ANSWER
    assert status == ONE_CALL_EPISODE
