"""The running service's parts, built from a config: store, learner, engine thread, learner thread.

On start the store's latest checkpoint (if any) restores the learner, and the engine is built from
the restored weights at the restored version, so a restart with the same database serves and
trains exactly where the last recorded checkpoint left off.

The engine is the one `rollout.engine` names (`sao.rollout.factory`, as `sao train` builds it), and
messages are rendered by `sao.rollout.rendering.MessageRenderer`, the layout training uses.
Settings serving cannot honour are refused here, in one line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from sao.config import SAOConfig
from sao.envs import make_env
from sao.formats.tool_calls import ToolCallFormat, tool_call_format
from sao.learner.precision import model_on_device
from sao.learner.step import Learner
from sao.models.lora import models_to_train, plain_copy
from sao.models.policy import load_policy
from sao.preflight import check_policy_dir
from sao.rollout.factory import make_engine
from sao.rollout.rendering import MessageRenderer, single_token_ids
from sao.rollout.requests import SamplingParams
from sao.runtime.learner_ranks import build_learner
from sao.serve.auth import key_id
from sao.serve.generation import EngineWorker
from sao.serve.learning import LiveLearner, load_checkpoint
from sao.serve.limits import ConcurrencyGate, Limits, RateLimiter
from sao.serve.metrics import ServeMetrics
from sao.serve.store import Store


def checkpoint_dir_for(db_path: Path) -> Path:
    """Checkpoint files live beside the database: `serve.db` -> `serve.db.checkpoints/`."""
    return db_path.with_name(db_path.name + ".checkpoints")


def default_limits(config: SAOConfig) -> Limits:
    """Limits following the config: prompts fit the trajectory budget, replies the turn budget."""
    return Limits(
        max_prompt_tokens=max(1, config.env.max_tokens - 1),
        max_tokens_cap=config.rollout.max_new_tokens,
        max_concurrent=config.rollout.concurrency,
    )


@dataclass
class Service:
    """Everything the HTTP routes use."""

    config: SAOConfig
    model_name: str
    tokenizer: PreTrainedTokenizerBase
    store: Store
    worker: EngineWorker
    live: LiveLearner
    limits: Limits
    stop_ids: list[int]
    renderer: MessageRenderer
    stop_strings: list[str] = field(default_factory=list)
    api_key: str | None = None
    metrics: ServeMetrics = field(default_factory=ServeMetrics)
    started_at: float = field(default_factory=time.time)
    rate: RateLimiter = field(init=False)
    gate: ConcurrencyGate = field(init=False)

    def __post_init__(self) -> None:
        self.rate = RateLimiter(self.limits.requests_per_minute)
        self.gate = ConcurrencyGate(self.limits.max_concurrent)

    @property
    def key_id(self) -> str:
        return key_id(self.api_key)

    @property
    def tool_format(self) -> ToolCallFormat:
        return self.renderer.tool_format

    def idle_before(self) -> float:
        """Episodes whose last call was before this time are past `serve.episode_timeout_s`."""
        return time.time() - self.config.serve.episode_timeout_s

    def start(self) -> None:
        self.worker.start()
        self.live.start()
        self.metrics.policy_version.set(self.worker.version)
        self.metrics.set_counts(self.store.counts())

    def close(self) -> None:
        self.live.close()
        self.worker.close()
        self.store.close()


def build_service(
    config: SAOConfig,
    model_path: str | Path,
    db_path: str | Path,
    api_key: str | None = None,
    limits: Limits | None = None,
    warmup_batches: int = 2,
    model_name: str | None = None,
) -> Service:
    """Load the policy, restore the latest checkpoint from the store, build the threads.

    `model_name` is the name clients use (default: the model directory's name).

    Raises:
        ValueError: a missing model directory, or an environment whose stop tags the tokenizer
            lacks.
    """
    model_path, db_path = check_policy_dir(model_path, "--model"), Path(db_path)
    check_servable(config)
    torch.manual_seed(config.train.seed)
    policy, tokenizer = load_policy(model_path)
    renderer = MessageRenderer(tokenizer, tool_call_format(tool_parser_name(config, tokenizer)))
    stop_ids, stop_strings = reply_stops(config, tokenizer, renderer.layout)
    store = Store(db_path)
    policy, critic = models_to_train(policy, config.model.lora, config.critic.enabled)
    learner = build_learner(policy, config, critic, tokenizer.pad_token_id)
    if not isinstance(learner, Learner):  # preflight refuses several ranks first
        raise ValueError("sao serve trains in its own process (train.learner_ranks=1)")
    latest = store.latest_checkpoint()
    warmup_done = load_checkpoint(latest.path, learner) if latest is not None else 0
    seq = latest.seq if latest is not None else 0
    engine = make_engine(
        config.rollout.engine,
        model_on_device(plain_copy(learner.policy), config.rollout.engine_device),
        tokenizer,
        max_batch=(limits or default_limits(config)).max_concurrent,
        precision=config.rollout.precision,
        seed=config.train.seed + seq,
        version=learner.version,
    )
    engine.check_sampling(
        SamplingParams(
            config.rollout.temperature, config.rollout.top_p, config.rollout.max_new_tokens
        )
    )
    if not getattr(engine, "updates_weights_in_place", True):
        raise ValueError(
            f"rollout.engine={config.rollout.engine}: this engine cannot reload this model's "
            "weights in place here, so the server could not learn; use rollout.engine=builtin"
        )
    worker = EngineWorker(engine)
    metrics = ServeMetrics()
    live = LiveLearner(
        learner,
        store,
        worker.publish,
        checkpoint_dir_for(db_path),
        batch_size=config.train.batch_size,
        warmup_batches=warmup_batches,
        max_staleness=config.rollout.max_staleness,
        metrics=metrics,
        seq=seq,
        warmup_done=warmup_done,
    )
    return Service(
        config=config,
        model_name=model_name or model_path.name or str(model_path),
        tokenizer=tokenizer,
        store=store,
        worker=worker,
        live=live,
        limits=limits or default_limits(config),
        stop_ids=stop_ids,
        renderer=renderer,
        stop_strings=stop_strings,
        api_key=api_key,
        metrics=metrics,
    )


def check_servable(config: SAOConfig) -> None:
    """Refuse, in one line, settings a live server cannot honour.

    Raises:
        ValueError: naming the setting.
    """
    if config.train.backend != "local":
        raise ValueError(
            f"train.backend={config.train.backend}: sao serve runs its engine and learner in its "
            "own process (train.backend=local)"
        )
    if config.rollout.group_size != 1:
        raise ValueError(
            f"rollout.group_size={config.rollout.group_size}: sao serve answers each request "
            "with one reply (single rollout), so it has no groups to compare"
        )
    if config.train.mode != "async":
        raise ValueError(
            "train.mode=sync: sao serve trains on rewards as they arrive (train.mode=async)"
        )


def tool_parser_name(config: SAOConfig, tokenizer: PreTrainedTokenizerBase) -> str:
    """`serve.tool_parser`, with "auto" resolved: hermes for a chat template, sao otherwise."""
    name = config.serve.tool_parser
    if name == "auto":
        return "hermes" if getattr(tokenizer, "chat_template", None) else "sao"
    return name


def reply_stops(
    config: SAOConfig, tokenizer: PreTrainedTokenizerBase, layout: str
) -> tuple[list[int], list[str]]:
    """`(stop token ids, stop strings)` a reply ends at, besides EOS: the environment's closing
    tags in the plain layout (as ids when each is one token, as text otherwise), none with a chat
    template (its replies end at EOS, the end of the assistant turn)."""
    if layout != "plain":
        return [], []
    env = make_env(config.env.name, max_turns=config.env.max_turns, **config.env.options)
    tags = list(env.stop_tags)
    ids = single_token_ids(tokenizer, tags)
    return (ids, []) if ids is not None else ([], tags)
