"""Throughput of the real scheduler and queue under long-tailed rollout durations.

Each simulated trajectory takes a wall-clock duration drawn log-normally (p99/median about 10,
parameters printed); nothing else is simulated: admission, the group barrier, the queue, weight
publication and the learner's batch-taking are the runtime's own code. Three figures, measured
side by side in one run:

- SAO: async, one rollout per prompt, C slots, the learner takes B in completion order;
- GRPO sync: G rollouts per prompt released only as whole groups, generate a batch then train;
- the capacity limit: C / mean duration, what C slots can deliver at best.

    python benchmarks/pipeline.py [--json PATH] [--steps 30] [--concurrency 64] [--batch 64]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from dataclasses import dataclass, field

from sao.config import load_config
from sao.envs.base import Task
from sao.runtime.local_backend import LocalBackend, ObservedQueue
from sao.runtime.scheduler import Scheduler
from sao.runtime.transport import LocalWeightChannel
from sao.trajectory import Trajectory


@dataclass
class _Engine:
    version: int = 0

    def update_weights(self, state_dict: dict, version: int) -> None:
        self.version = version


@dataclass
class SimulatedAgentLoop:
    """Stands in for `AgentLoop`: an episode completes `duration` seconds after it starts."""

    durations: random.Random
    mu: float
    sigma: float
    engine: _Engine = field(default_factory=_Engine)
    dropped: list = field(default_factory=list)
    _due: dict[str, tuple[float, dict]] = field(default_factory=dict)
    drawn: list[float] = field(default_factory=list)

    def close(self) -> None:
        self._due.clear()

    @property
    def num_in_flight(self) -> int:
        return len(self._due)

    def start(self, episode_id: str, task: Task, metadata: dict) -> None:
        duration = self.durations.lognormvariate(self.mu, self.sigma)
        self.drawn.append(duration)
        self._due[episode_id] = (time.perf_counter() + duration, metadata)

    def step(self) -> list[Trajectory]:
        now = time.perf_counter()
        next_due = min((due for due, _ in self._due.values()), default=now)
        time.sleep(min(0.001, max(0.0, next_due - now)))
        now = time.perf_counter()
        done = [k for k, (due, _) in self._due.items() if due <= now]
        out = []
        for key in done:
            _, meta = self._due.pop(key)
            out.append(
                Trajectory(
                    token_ids=[1, 2],
                    action_mask=[0, 1],
                    rollout_logprobs=[0.0, -1.0],
                    policy_versions=[-1, self.engine.version],
                    reward=0.0,
                    metadata={**meta, "end_reason": "answer"},
                )
            )
        return out


def _tasks():
    i = 0
    while True:
        yield Task(task_id=f"t{i}", prompt="p", answer="0")
        i += 1


class _WeightlessLearner:
    """Stands in for a learner at `version` whose weights are empty (nothing to swap)."""

    def __init__(self, version: int) -> None:
        self.version = version

    def policy_state_dict(self) -> dict:
        return {}


def measure(preset: str, mode: str, args, mu: float, sigma: float) -> tuple[float, list[float]]:
    """Trajectories per second delivered to the learner over `args.steps` learner steps."""
    config = load_config(
        preset,
        None,
        [
            f"train.mode={mode}",
            f"train.batch_size={args.batch}",
            f"rollout.concurrency={args.concurrency}",
        ],
    )
    loop = SimulatedAgentLoop(random.Random(args.seed), mu, sigma)
    weights = LocalWeightChannel()
    queue = ObservedQueue(None)
    scheduler = Scheduler(
        loop,
        _tasks(),
        queue,
        weights,
        concurrency=config.rollout.concurrency,
        batch_size=config.train.batch_size,
        group_size=config.rollout.group_size,
        ahead=0 if mode == "sync" else config.rollout.max_ahead,
    )
    backend = LocalBackend(config, scheduler, weights)
    backend.start()
    t0 = time.perf_counter()
    delivered = 0
    for version in range(1, args.steps + 1):
        delivered += len(backend.next_batch(config.train.batch_size))
        backend.publish_weights(_WeightlessLearner(version))
    elapsed = time.perf_counter() - t0
    backend.close()
    return delivered / elapsed, loop.drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--median-s", type=float, default=0.02)
    parser.add_argument("--p99-over-median", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    mu = math.log(args.median_s)
    sigma = math.log(args.p99_over_median) / 2.3263  # z of the 99th percentile
    mean = math.exp(mu + sigma * sigma / 2)
    print(
        f"durations: log-normal, median {args.median_s:.3f}s, sigma {sigma:.3f}, "
        f"mean {mean:.4f}s, p99/median {args.p99_over_median:.1f}; C={args.concurrency}, "
        f"B={args.batch}, steps={args.steps}"
    )
    sao, drawn = measure("sao", "async", args, mu, sigma)
    grpo, _ = measure("grpo", "sync", args, mu, sigma)
    q = statistics.quantiles(drawn, n=100)
    print(
        f"sampled durations: median {statistics.median(drawn):.4f}s, p99 {q[98]:.4f}s, "
        f"mean {statistics.mean(drawn):.4f}s"
    )
    limit = args.concurrency / mean
    result = {
        "sao_traj_per_s": sao,
        "grpo_sync_traj_per_s": grpo,
        "limit_traj_per_s": limit,
        "sao_over_limit": sao / limit,
        "sao_over_grpo_sync": sao / grpo,
    }
    print(f"SAO async         {sao:8.1f} traj/s")
    print(f"GRPO sync (G=8)   {grpo:8.1f} traj/s")
    print(f"limit C/mean      {limit:8.1f} traj/s")
    print(f"SAO / limit       {result['sao_over_limit']:.3f}")
    print(f"SAO / GRPO sync   {result['sao_over_grpo_sync']:.2f}x")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
