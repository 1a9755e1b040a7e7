"""Sandbox runs per `code_repair` episode, with and without reusing `test`'s run at `submit`.

Replays teacher demonstrations (held-out tasks; the teacher's first edit is sometimes wrong, and it
sometimes retries) through `CodeRepairEnv` with the real sandbox, twice per episode, interleaved:
once with `reuse_test_runs=True` (the default: `test` also runs the hidden tests, and `submit` of
the tested file takes that verdict) and once with `False` (every `submit` runs the full suite).
It checks that both give the same observations and rewards, and prints sandbox runs per episode
and the wall-clock ratio measured side by side.

    python benchmarks/code_repair_tests.py [--episodes 100] [--seed 0] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from sao.envs.code_repair.env import CodeRepairEnv
from sao.envs.code_repair.teacher import Demonstration, demonstrations
from sao.envs.tool_runner import sandbox_runner


class CountingRunner:
    """The sandbox runner, counting its runs."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, code: str, *, timeout_s: float, memory_mb: int) -> Any:
        self.runs += 1
        return sandbox_runner(code, timeout_s=timeout_s, memory_mb=memory_mb)


def replay(env: CodeRepairEnv, demo: Demonstration) -> tuple[list[str], float]:
    """The observations and final reward of `demo`'s actions in `env`."""
    env.reset(demo.task)
    observations, reward = [], 0.0
    for turn in demo.turns:
        result = env.step(turn.action)
        observations.append(result.observation)
        reward = result.reward
    return observations, reward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    demos = demonstrations(args.episodes, args.seed, split="test")
    variants = {"reuse": True, "rerun": False}
    runners = {name: CountingRunner() for name in variants}
    envs = {
        name: CodeRepairEnv(max_turns=5, runner=runners[name], reuse_test_runs=reuse)
        for name, reuse in variants.items()
    }
    seconds = dict.fromkeys(variants, 0.0)
    rewards = dict.fromkeys(variants, 0.0)
    identical = True
    for index, demo in enumerate(demos):
        # Alternate which variant goes first, so drift on a shared machine hits both alike.
        order = list(variants) if index % 2 == 0 else list(reversed(variants))
        outcomes = {}
        for name in order:
            start = time.perf_counter()
            outcomes[name] = replay(envs[name], demo)
            seconds[name] += time.perf_counter() - start
            rewards[name] += outcomes[name][1]
        identical &= outcomes["reuse"] == outcomes["rerun"]

    n = len(demos)
    figures = {
        "episodes": n,
        "identical_observations_and_rewards": identical,
        "mean_reward": rewards["reuse"] / n,
        "sandbox_runs_per_episode": {name: runners[name].runs / n for name in variants},
        "seconds_per_episode": {name: seconds[name] / n for name in variants},
        "speedup": seconds["rerun"] / seconds["reuse"],
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=2)


if __name__ == "__main__":
    main()
