"""Build a training run's rollout side from a config: the task stream and the scheduler.

Shared by the local backend and the Ray actors, so both run exactly the same rollout code. The
engine and agent loop under the scheduler come from `sao.rollout.setup`, which evaluation uses too.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import SAOConfig
from sao.envs.base import Task
from sao.envs.registry import make_task_source
from sao.rollout.setup import build_agent_loop
from sao.runtime.scheduler import Scheduler
from sao.runtime.transport import TrajectoryQueue, WeightChannel


def task_stream(config: SAOConfig, start_index: int = 0) -> Iterator[Task]:
    """The endless, deterministic stream of training prompts, from prompt `start_index` on.

    With groups, prompt k serves trajectories `k*G .. k*G+G-1`, so a resumed run skips
    `start_index // G` prompts.
    """
    source = make_task_source(config.env.name, **config.env.task_options)
    stream = source.stream("train", config.train.seed)
    return itertools.islice(stream, start_index // config.rollout.group_size, None)


def admission_ahead(config: SAOConfig) -> int:
    """Batches the rollout side may run ahead of the learner (0 in sync mode)."""
    if config.train.mode == "sync":
        return 0
    if config.rollout.max_staleness is not None:
        return config.rollout.max_staleness
    return config.rollout.max_ahead


def build_scheduler(
    config: SAOConfig,
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    out: TrajectoryQueue,
    weights: WeightChannel,
    *,
    version: int = 0,
    start_index: int = 0,
    abandoned: int = 0,
) -> Scheduler:
    """Engine + agent loop + scheduler for one rollout worker (`abandoned`: see `Scheduler`)."""
    loop = build_agent_loop(
        config, policy, tokenizer, seed=config.train.seed + start_index, version=version
    )
    return Scheduler(
        loop,
        task_stream(config, start_index),
        out,
        weights,
        concurrency=config.rollout.concurrency,
        batch_size=config.train.batch_size,
        group_size=config.rollout.group_size,
        ahead=admission_ahead(config),
        start_index=start_index,
        abandoned=abandoned,
    )
