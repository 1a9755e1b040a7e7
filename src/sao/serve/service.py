"""The running service's parts, built from a config: store, learner, engine thread, learner thread.

On start the store's latest checkpoint (if any) restores the learner, and the engine is built from
the restored weights at the restored version, so a restart with the same database serves and
trains exactly where the last recorded checkpoint left off.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from sao.config import SAOConfig
from sao.envs import make_env
from sao.learner.step import Learner
from sao.models.critic import ValueModel
from sao.models.policy import load_policy
from sao.rollout.engine import RolloutEngine
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
) -> Service:
    """Load the policy, restore the latest checkpoint from the store, build the threads.

    Raises:
        ValueError: a missing model directory, or an environment whose stop tags the tokenizer
            lacks.
    """
    model_path, db_path = Path(model_path), Path(db_path)
    if not (model_path / "config.json").is_file():
        raise ValueError(f"--model {model_path}: not a saved policy directory (no config.json)")
    torch.manual_seed(config.train.seed)
    policy, tokenizer = load_policy(model_path)
    store = Store(db_path)
    critic = ValueModel.from_policy(policy) if config.critic.enabled else None
    learner = Learner(policy, config, critic, pad_token_id=tokenizer.pad_token_id)
    latest = store.latest_checkpoint()
    warmup_done = load_checkpoint(latest.path, learner) if latest is not None else 0
    seq = latest.seq if latest is not None else 0
    engine = RolloutEngine(
        learner.policy,
        tokenizer,
        max_batch=(limits or default_limits(config)).max_concurrent,
        precision=config.rollout.precision,
        seed=config.train.seed + seq,
        version=learner.version,
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
        model_name=model_path.name or str(model_path),
        tokenizer=tokenizer,
        store=store,
        worker=worker,
        live=live,
        limits=limits or default_limits(config),
        stop_ids=stop_token_ids(config, tokenizer),
        api_key=api_key,
        metrics=metrics,
    )


def stop_token_ids(config: SAOConfig, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The environment's closing tags as token ids (a reply ends at one, or at EOS)."""
    env = make_env(config.env.name, max_turns=config.env.max_turns, **config.env.options)
    ids = []
    for tag in env.stop_tags:
        token = tokenizer.convert_tokens_to_ids(tag)
        if token is None or token == tokenizer.unk_token_id:
            raise ValueError(f"env {config.env.name}: stop tag {tag!r} is not a token of the model")
        ids.append(int(token))
    return ids
