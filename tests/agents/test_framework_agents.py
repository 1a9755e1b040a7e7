"""The `examples/agents/` agents against a real `sao serve`: each framework's episodes arrive as
episodes, every call after an episode's first continues its trajectory, every tool call the agent
ran is counted, and every episode gets exactly one reward."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from agents_helpers import subprocess_env

from sao.formats.tags import TOOL_OPEN
from sao.serve.simulate_agents import AGENT_FILES, default_agents_dir, load_agent

EPISODES = 6  # the test warm start calls the tool in ~3 of 4 episodes: at least one call
MAX_TURNS = 3
COUNTS = (
    "episodes_started",
    "episodes_rewarded",
    "continued",
    "restarted",
    "tool_calls",
    "malformed_tool_calls",
    "completions",
    "feedback",
)


def _counts(status: dict) -> dict[str, int]:
    return {name: status[name] for name in COUNTS}


def _delta(before: dict, after: dict) -> dict[str, int]:
    return {name: after[name] - before[name] for name in COUNTS}


@pytest.mark.parametrize("agent", list(AGENT_FILES))
def test_each_framework_runs_scored_episodes_the_server_counts(agent, live_server):
    module = load_agent(agent)
    common = sys.modules["agent_common"]
    server = common.Server(live_server.url, None, live_server.model)
    tasks = common.tool_calc_tasks(EPISODES, seed=list(AGENT_FILES).index(agent))
    before = _counts(live_server.status())
    results = common.run_episodes(
        module.run_episode, tasks, server, prefix=f"test-{agent}", max_turns=MAX_TURNS
    )
    delta = _delta(before, _counts(live_server.status()))

    model_calls = sum(r.model_calls for r in results)
    tool_calls = sum(r.tool_calls for r in results)
    assert delta == {
        "episodes_started": EPISODES,
        "episodes_rewarded": EPISODES,  # one reward per episode, by episode id
        "continued": model_calls - EPISODES,  # every later call of an episode continued it
        "restarted": 0,
        "tool_calls": tool_calls,  # every call the server returned, the agent ran
        # A call block that does not parse comes back as content, which ends the episode.
        "malformed_tool_calls": sum(TOOL_OPEN in r.final for r in results),
        "completions": model_calls,
        "feedback": EPISODES,
    }
    assert tool_calls >= 1, "the warm start should call the calculator"
    assert len({r.episode_id for r in results}) == EPISODES
    score = sys.modules["agent_common"].finish
    for task, result in zip(tasks, results, strict=True):
        assert result.task_id == task.task_id
        assert 1 <= result.model_calls <= MAX_TURNS
        # The reward posted is the score of the final reply, and 0 without one.
        rescored = score(task, result.episode_id, result.final, 0, 0)
        assert result.reward == rescored.reward
        assert result.solved == (result.reward == 1.0)


def test_example_script_prints_the_counts_the_server_saw(live_server):
    before = _counts(live_server.status())
    script = default_agents_dir() / "openai_loop.py"
    done = subprocess.run(
        [sys.executable, str(script), "--url", live_server.url, "--episodes", "3", "--seed", "7"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stdout.strip().splitlines()[-1]
    match = re.fullmatch(
        r"openai_loop: 3 episodes, solved (\d+) \((\d\.\d\d)\), "
        r"tool calls (\d+), model calls (\d+), rewards posted 3",
        line,
    )
    assert match is not None, line
    solved, share, tool_calls, model_calls = match.groups()
    assert float(share) == round(int(solved) / 3, 2)
    delta = _delta(before, _counts(live_server.status()))
    assert delta["episodes_started"] == 3 and delta["episodes_rewarded"] == 3
    assert delta["tool_calls"] == int(tool_calls)
    assert delta["completions"] == int(model_calls)


def test_example_script_refuses_a_bad_count():
    script = Path(default_agents_dir()) / "openai_loop.py"
    done = subprocess.run(
        [sys.executable, str(script), "--episodes", "0"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "openai_loop: --episodes must be >= 1"
