"""What the three `tool_calc` agents share: tasks, the calculator tool, scoring, rewards, the CLI.

Each agent (`openai_loop.py`, `agents_sdk.py`, `langgraph_agent.py`) is one function

    run_episode(task, server, episode_id, max_turns) -> EpisodeResult

that sends the task's prompt as the user message with the `calculator` function declared, runs
the calculator itself whenever the model calls it, sends the result back as a `tool` message, and
stops at a final answer or after `max_turns` model calls. Every call of an episode carries the
header `X-Episode-Id`, so the server continues one trajectory across them. This module scores the
final reply and posts the episode's one reward to `POST /v1/feedback` by that episode id.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import openai

from sao.envs import Task, make_task_source
from sao.envs.tool_calc import TOOL_SPEC, evaluate, score
from sao.envs.tool_calc.protocol import ARGUMENT, FORMAT_ERROR_MESSAGES

EPISODE_HEADER = "X-Episode-Id"
# The function as OpenAI's chat-completions `tools` declares it (the plain client sends this; the
# frameworks build the same declaration from their own tool objects, with these texts).
CALCULATOR_TOOL: dict[str, Any] = TOOL_SPEC
TOOL_NAME: str = TOOL_SPEC["function"]["name"]
TOOL_DESCRIPTION: str = TOOL_SPEC["function"]["description"]
# What the environment answers, in training, to a call whose arguments are not one string
# `expression`; the agents answer the same, so a live episode reads as a training one.
BAD_ARGUMENTS: str = FORMAT_ERROR_MESSAGES["bad_arguments"]


@dataclass(frozen=True)
class Server:
    """Where the agents talk to: the base URL (no `/v1`), the bearer key and the served model."""

    url: str
    api_key: str | None
    model: str

    @property
    def openai_base_url(self) -> str:
        return self.url.rstrip("/") + "/v1"

    @property
    def openai_api_key(self) -> str:
        """What the OpenAI clients send (they need some key; a keyless server ignores it)."""
        return self.api_key or "none"

    @property
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


@dataclass(frozen=True)
class EpisodeResult:
    """One finished episode.

    Attributes:
        episode_id: the `X-Episode-Id` every call of the episode sent.
        task_id: the task's id.
        reward: the score of the final reply (0 without a final answer).
        solved: whether the final answer was right.
        tool_calls: calculator calls the model made (each answered with a tool message).
        model_calls: chat completions the episode used.
        final: the final reply's content ("" when the turn limit came first).
        policy_version: the served version of the last reply, when the framework exposes it.
    """

    episode_id: str
    task_id: str
    reward: float
    solved: bool
    tool_calls: int
    model_calls: int
    final: str
    policy_version: int | None = None


RunEpisode = Callable[[Task, Server, str, int], EpisodeResult]


def calculator(expression: str) -> str:
    """Run the calculator as the client-side tool: the value as text, or an `error: ` line."""
    return evaluate(expression)


def run_tool_call(arguments: str) -> str:
    """The tool result for one call's JSON `arguments`: the calculator's, or `BAD_ARGUMENTS` when
    they are not exactly one string `expression` (a misspelt key, a number)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return BAD_ARGUMENTS
    if (
        not isinstance(value, dict)
        or set(value) != {ARGUMENT}
        or not isinstance(value[ARGUMENT], str)
    ):
        return BAD_ARGUMENTS
    return calculator(value[ARGUMENT])


def finish(
    task: Task,
    episode_id: str,
    final: str,
    tool_calls: int,
    model_calls: int,
    policy_version: int | None = None,
) -> EpisodeResult:
    """Score the final reply of an episode."""
    reward = score(task, final)
    return EpisodeResult(
        episode_id=episode_id,
        task_id=task.task_id,
        reward=reward,
        solved=reward >= 1.0,
        tool_calls=tool_calls,
        model_calls=model_calls,
        final=final,
        policy_version=policy_version,
    )


def fingerprint_version(fingerprint: str | None) -> int | None:
    """The policy version in a reply's `system_fingerprint` (`sao-v12` -> 12)."""
    if fingerprint and fingerprint.startswith("sao-v") and fingerprint[5:].isdigit():
        return int(fingerprint[5:])
    return None


def tool_calc_tasks(count: int, seed: int = 0, split: str = "train") -> list[Task]:
    """The first `count` tasks of `tool_calc`'s `split` stream."""
    return list(itertools.islice(make_task_source("tool_calc").stream(split, seed), count))


def new_episode_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def post_reward(http: httpx.Client, episode_id: str, reward: float, attempts: int = 8) -> None:
    """Post an episode's reward, waiting out 429s as the server's `Retry-After` says."""
    for _ in range(attempts):
        response = http.post("/v1/feedback", json={"episode_id": episode_id, "reward": reward})
        if response.status_code != 429:
            response.raise_for_status()
            return
        time.sleep(float(response.headers.get("retry-after", "1")))
    response.raise_for_status()


def served_model(url: str, api_key: str | None) -> str:
    """The id of the model the server at `url` serves."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    response = httpx.get(url.rstrip("/") + "/v1/models", headers=headers, timeout=30)
    response.raise_for_status()
    return response.json()["data"][0]["id"]


def run_episodes(
    run_episode: RunEpisode,
    tasks: Sequence[Task],
    server: Server,
    *,
    prefix: str,
    max_turns: int = 4,
    concurrency: int = 1,
    on_result: Callable[[int, EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """Run one episode per task, `concurrency` at a time, posting each episode's reward as it
    ends; returns the results in task order."""
    with httpx.Client(
        base_url=server.url.rstrip("/"), headers=server.auth_headers, timeout=120
    ) as http:

        def one(item: tuple[int, Task]) -> EpisodeResult:
            index, task = item
            result = run_episode(task, server, new_episode_id(prefix), max_turns)
            post_reward(http, result.episode_id, result.reward)
            if on_result is not None:
                on_result(index, result)
            return result

        with ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(one, enumerate(tasks)))


def summary_line(name: str, results: Sequence[EpisodeResult]) -> str:
    """One line: episodes, solved share, tool calls."""
    episodes = len(results)
    solved = sum(r.solved for r in results)
    tools = sum(r.tool_calls for r in results)
    calls = sum(r.model_calls for r in results)
    share = solved / episodes if episodes else 0.0
    return (
        f"{name}: {episodes} episodes, solved {solved} ({share:.2f}), "
        f"tool calls {tools}, model calls {calls}, rewards posted {episodes}"
    )


def main(name: str, run_episode: RunEpisode, argv: Sequence[str] | None = None) -> int:
    """The command line every example shares."""
    parser = argparse.ArgumentParser(prog=name, description=f"{name}: tool_calc episodes")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the `sao serve` base URL")
    parser.add_argument("--api-key", default=os.environ.get("SAO_API_KEY"), help="bearer key")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--max-turns", type=int, default=4, help="model calls per episode")
    parser.add_argument("--concurrency", type=int, default=1, help="episodes at once")
    parser.add_argument("--seed", type=int, default=0, help="seed of the task stream")
    parser.add_argument("--jsonl", help="also write each episode as a JSON line here")
    args = parser.parse_args(argv)
    for flag in ("episodes", "max_turns", "concurrency"):
        if getattr(args, flag) < 1:
            print(f"{name}: --{flag.replace('_', '-')} must be >= 1", file=sys.stderr)
            return 2
    try:
        server = Server(args.url, args.api_key, served_model(args.url, args.api_key))
        results = run_episodes(
            run_episode,
            tool_calc_tasks(args.episodes, args.seed),
            server,
            prefix=name,
            max_turns=args.max_turns,
            concurrency=args.concurrency,
        )
    except (httpx.HTTPError, openai.APIError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"{name}: the server at {args.url} failed: {reason}", file=sys.stderr)
        return 1
    if args.jsonl:
        with open(args.jsonl, "w") as out:
            out.writelines(json.dumps(asdict(r)) + "\n" for r in results)
    print(summary_line(name, results))
    return 0
