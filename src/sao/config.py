"""One typed config tree for every run, with presets (SAO_SPEC section 6) and dotted overrides.

Load order: defaults <- preset <- the environment's packaged file <- YAML file <- `key.path=value`
overrides. Any unknown or out-of-range field fails with `ConfigError`, one line naming the field
and what is allowed.

A preset names an algorithm, and it means the same one on every environment: an environment's
packaged file (`sao/configs/ENV.yaml`) may set only `ENV_FILE_SECTIONS` (environment, rollout,
sft and train settings); one that sets an algorithm setting stops every run on
that environment with one line. The user's own `--config` and `--set` may change algorithm
settings; the command line then prints one warning per setting that differs from the preset
(`algorithm_overrides`), so no override is silent.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sao.core.losses import DIS_EPS_HIGH, DIS_EPS_LOW
from sao.core.registry import ADVANTAGES, POLICY_LOSSES, advantage_estimator, policy_loss
from sao.presets import (
    ENV_FILE_SECTIONS,
    PRESETS,
    deep_merge,
    is_algorithm_key,
    leaf_items,
    under,
)


class ConfigError(ValueError):
    """A config field is unknown, has the wrong type, or is out of range."""


DEVICE_NAMES = re.compile(r"cpu|cuda(:[0-9]+)?|mps")
"""Device names a learner or engine accepts (torch's spelling); availability is checked on use."""


def _device_name(value: str) -> str:
    if not DEVICE_NAMES.fullmatch(value):
        raise ValueError("must be cpu, cuda, cuda:N or mps")
    return value


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=True
    )


class LoraConfig(_Section):
    """LoRA adapters (`sao.models.lora`, needs the `lora` extra): the policy trains adapters on
    `target_modules`; the critic trains its own adapters on those outside attention, plus its
    value head, over the same frozen base weights."""

    rank: int = Field(0, ge=0, le=4096)
    """Adapter rank r; 0 trains every weight (full fine-tuning)."""
    alpha: float = Field(16.0, gt=0.0)
    """Adapter scale numerator: the update is `(alpha / rank) * B @ A`."""
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"]
    )
    """Names of the linear modules that get adapters (the critic skips those in attention)."""

    @field_validator("target_modules")
    @classmethod
    def _some_targets(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("must name at least one module")
        return value


class ModelConfig(_Section):
    path: str | None = None
    """Local path of an HF causal LM (+ tokenizer) to start from; None: the warm-start checkpoint."""
    warm_start_dir: str = "checkpoints/warm_start_{env}"
    """Where `sao sft` writes (and `sao train` looks for) the warm-start policy; `{env}` expands."""
    warm_start_from: str | None = None
    """Local HF checkpoint the warm start (`sao sft`, or `sao train` when it finds none at
    `warm_start_dir`) trains from; None: the tiny default, built from scratch. `sao import-gguf`
    writes one from a GGUF file."""
    lora: LoraConfig = Field(default_factory=LoraConfig)
    """LoRA adapters instead of full fine-tuning (rank > 0)."""


class LatencyConfig(_Section):
    """The environment-latency overlay (`sao.rollout.latency`): each environment step waits an
    extra seeded, long-tailed time, as tool calls in real sandboxes do. Off by default."""

    distribution: Literal["off", "lognormal", "pareto"] = "off"
    """off, lognormal (median `median_s`, shape `sigma`) or pareto (median `median_s`, tail
    index `alpha`)."""
    median_s: float = Field(1.0, gt=0.0, le=3600.0)
    """Median extra seconds per environment step."""
    sigma: float = Field(1.0, gt=0.0, le=10.0)
    """Lognormal shape: the 90th percentile is `median_s * exp(1.28 * sigma)`."""
    alpha: float = Field(1.5, gt=0.0, le=100.0)
    """Pareto tail index: smaller is heavier (<= 2: infinite variance)."""
    max_s: float = Field(60.0, gt=0.0, le=86400.0)
    """Cap on one step's extra time."""
    seed: int = 0
    """Added to each agent loop's own seed (the run's seed for training rollouts)."""
    in_evals: bool = False
    """Whether held-out evals (in a run and `sao eval`) wait too. Off: an eval scores what the
    policy does, and the overlay changes only when episodes end, at minutes of wall time."""

    @field_validator("distribution", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        # YAML reads a bare `off` (in a file or `--set env.latency.distribution=off`) as false.
        return "off" if value is False else value


class EnvConfig(_Section):
    name: str = "calc"
    """Environment: calc, tool_calc, code_repair, style_stream, or reasoning_gym:<dataset>."""
    max_turns: int = Field(4, ge=1, le=300)
    """Agent turns before a trajectory ends with reward 0 (end reason `max_turns`)."""
    max_tokens: int = Field(384, ge=8, le=131072)
    """Total trajectory length in tokens before it ends with reward 0 (end reason `max_tokens`)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the environment (e.g. `max_output_chars` for calc)."""
    task_options: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the task source (e.g. `difficulties` for calc)."""
    latency: LatencyConfig = Field(default_factory=LatencyConfig)
    """Extra long-tailed time per environment step (`sao.rollout.latency`); off by default."""


class RolloutConfig(_Section):
    concurrency: int = Field(32, ge=1, le=4096)
    """C: trajectories kept in flight by the rollout side."""
    group_size: int = Field(1, ge=1, le=256)
    """Rollouts per prompt: 1 for SAO; G > 1 releases a group only when all G are done."""
    temperature: float = Field(1.0, gt=0.0, le=10.0)
    """Sampling temperature; recorded log-probs are of the tempered distribution."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass."""
    max_new_tokens: int = Field(96, ge=1, le=65536)
    """Tokens sampled per action turn at most."""
    engine: Literal["builtin", "vllm"] = "builtin"
    """Inference engine: the built-in CPU engine, or vLLM (needs the `vllm` extra)."""
    precision: Literal["fp32", "bf16"] = "fp32"
    """Engine precision; bf16 against an fp32 learner is the train/inference mismatch DIS handles."""
    max_staleness: int | None = Field(None, ge=0)
    """Drop (and count) trajectories older than this many versions; None keeps all (DIS guards).
    When set, it also bounds how far the rollout side may run ahead (0: exactly synchronous)."""
    env_workers: int = Field(4, ge=0, le=256)
    """Threads stepping environments (tool calls) off the decode path; 0 steps them inline,
    which makes runs bit-for-bit reproducible at some cost in throughput."""
    max_ahead: int = Field(1, ge=0, le=64)
    """Batches the rollout side may start beyond the learner's version when max_staleness is
    unset; bounds the queue, and with it the staleness, when the learner is the slower side."""
    engine_device: str = "cpu"
    """Device of the engine's model copy: cpu, cuda, cuda:N or mps."""
    ray_resources: dict[str, float] = Field(default_factory=dict)
    """Ray custom resources the rollout actor asks for (e.g. {engine: 1}), placing it on a node."""

    _engine_device = field_validator("engine_device")(_device_name)


class AlgoConfig(_Section):
    advantage: str = "token_gae"
    """Advantage estimator (SAO_SPEC sections 5-6): a name registered in `sao.core.registry`
    (built in: token_gae, step_gae, group, running_mean)."""
    step_value: Literal["mean", "last"] = "mean"
    """For step_gae: a step's value is its tokens' mean value or its last token's value."""
    policy_loss: str = "dis"
    """Policy loss registered in `sao.core.registry`: built in, DIS against rollout log-probs
    (dis), or PPO clip against learner-recomputed old log-probs (ppo_clip)."""
    eps_low: float = Field(DIS_EPS_LOW, gt=0.0, lt=1.0)
    """Lower window edge: tokens with ratio < 1 - eps_low are masked (DIS) or clipped (PPO)."""
    eps_high: float = Field(DIS_EPS_HIGH, gt=0.0, le=100.0)
    """Upper window edge: ratio > 1 + eps_high is masked (DIS) or clipped (PPO)."""
    gamma: float = Field(1.0, ge=0.0, le=1.0)
    """Discount."""
    lambda_actor: float = Field(0.95, ge=0.0, le=1.0)
    """GAE lambda for advantages (unused while `adaptive_lambda_alpha` is set)."""
    lambda_critic: float = Field(1.0, ge=0.0, le=1.0)
    """GAE lambda for value targets (1.0: Monte-Carlo returns)."""
    adaptive_lambda_alpha: float | None = Field(1.5, gt=0.0)
    """If set, the advantages' lambda is 1 - 1/(alpha * L) per trajectory of L action tokens
    (VAPO's length-adaptive lambda, at the ports' 1.5 in `sao`); only estimators registered with
    `adaptive_lambda` (token_gae) take it, so presets of the others set it to None."""
    whiten_advantages: bool = False
    """Normalise advantages over the batch's action tokens."""
    agg: Literal["token-mean", "seq-mean-token-mean"] = "token-mean"
    """Loss normaliser Z."""
    running_mean_window: int = Field(64, ge=1)
    """W for the running-mean baseline."""
    ppo_minibatches: int | None = Field(None, ge=1, le=4096)
    """PPO clip only: actor updates per batch, each on a contiguous slice of the batch, all
    against old log-probs the learner computes once before the first (SAO_SPEC section 6; verl's
    GRPO). None means 4 (the GRPO/VAPO presets' value: a mini-batch of a quarter of the batch, as
    verl's recipes use), capped at the batch size. 1 takes one update whose ratio is exactly 1,
    so the clip never acts. DIS refuses it (its own knob: `dis_minibatches`)."""
    ppo_epochs: int | None = Field(None, ge=1, le=64)
    """PPO clip only: passes over the mini-batches per batch; None means 1 (verl's default)."""
    dis_minibatches: int = Field(1, ge=1, le=4096)
    """DIS only: actor updates per batch, each on a contiguous slice of the batch and each against
    the rollout log-probs (no old policy is computed), capped at the batch size. 1 (`sao`): one
    update per batch; 4: the `sao_mb4` variant, as many optimizer steps per batch as the PPO
    baselines take."""

    @field_validator("advantage")
    @classmethod
    def _registered_advantage(cls, value: str) -> str:
        if value not in ADVANTAGES:
            raise ValueError(f"must be a registered estimator ({', '.join(ADVANTAGES)})")
        return value

    @field_validator("policy_loss")
    @classmethod
    def _registered_policy_loss(cls, value: str) -> str:
        if value not in POLICY_LOSSES:
            raise ValueError(f"must be a registered policy loss ({', '.join(POLICY_LOSSES)})")
        return value


class OptimConfig(_Section):
    lr: float = Field(1e-4, gt=0.0, le=1.0)
    """Adam learning rate."""
    weight_decay: float = Field(0.0, ge=0.0, le=1.0)
    """AdamW weight decay."""
    grad_clip: float = Field(1.0, gt=0.0)
    """Global gradient-norm clip."""


class ValuePretrainConfig(_Section):
    num_trajectories: int = Field(256, ge=0)
    """Trajectories sampled from the frozen initial policy (more than one batch, per the paper)."""
    max_steps: int = Field(200, ge=0)
    """Critic optimizer steps at most."""
    ev_threshold: float = Field(0.5, le=1.0)
    """Stop once explained variance passes this: on the held-out trajectories when
    `holdout_trajectories` > 0, else on the training trajectories (see below)."""
    batch_size: int = Field(32, ge=1)
    """Trajectories per pretraining step."""
    holdout_trajectories: int = Field(0, ge=0)
    """Of the `num_trajectories`, how many the critic never trains on: its explained variance on
    them is measured after every epoch over the rest, and the threshold is checked against that.
    0 checks it against the training trajectories themselves, which memorising can pass."""


class CriticConfig(_Section):
    enabled: bool = True
    """Train a value model (False for GRPO and the running-mean baseline)."""
    k_updates: int = Field(2, ge=0, le=64)
    """K: critic optimizer steps per policy step, on the same batch. 0 keeps the critic as value
    pretraining left it (the `sao_fixed_critic` ablation): its values still give the advantages."""
    freeze: list[str] = Field(default_factory=lambda: ["attention"])
    """Module-name patterns to freeze: "attention" (q/k/v/o and their norms), "none", or regexes."""
    optim: OptimConfig = Field(default_factory=lambda: OptimConfig(lr=5e-4))
    """Critic optimizer (higher learning rate than the actor's)."""
    value_clip: float | None = Field(None, gt=0.0)
    """PPO-style value clipping range; None disables it."""
    pretrain: ValuePretrainConfig = Field(default_factory=ValuePretrainConfig)
    """Value pretraining before RL."""


class TrainConfig(_Section):
    mode: Literal["async", "sync"] = "async"
    """async: train on completed trajectories as they arrive; sync: generate a batch, then train."""
    backend: Literal["local", "ray"] = "local"
    """Where engine, learner and queue live."""
    ray_address: str | None = None
    """Join an existing Ray cluster; None starts a local one."""
    batch_size: int = Field(32, ge=1, le=65536)
    """B: trajectories per learner step."""
    steps: int = Field(60, ge=0)
    """Learner steps."""
    micro_batch_tokens: int = Field(4096, ge=1)
    """Padded tokens per learner forward pass at most: a batch's rows are sorted by length and
    cut into passes of this size, each trimmed to its own longest row. Same result as one
    full-batch pass, with compute and activation memory following the real tokens."""
    eval_every: int = Field(20, ge=0)
    """Held-out eval every N steps (0: only at start and end)."""
    eval_every_s: float | None = Field(None, gt=0.0, le=1e7)
    """Also a held-out eval at the first step boundary after every N seconds of training time
    (None: none). Training time (`time/train_s` in metrics.jsonl) is the RL loop's wall time
    with every eval taken out; on the local backend the rollout side is paused during every
    eval, so no trajectory is sampled on eval time either (`time/eval_s`, `time/eval_total_s`
    report it). Local backend only."""
    eval_n: int = Field(200, ge=1)
    """Held-out tasks per eval."""
    eval_effect: float = Field(0.10, gt=0.0, le=1.0)
    """The held-out gain a run's eval should resolve: when a true gain of this size would clear
    zero in under 90% of evals as sharp as the run's paired first and last evals (for 0.10: a
    95% half-width over about 0.06), summary.json and the closing line say so and how many tasks
    (`eval_n`) would do (`sao.evaluation.stats.eval_resolution`; a paired SD measured as 0 is taken as
    0.5, a pass/fail score's largest)."""
    checkpoint_every: int = Field(20, ge=1)
    """Checkpoint every N steps (always at step 0, after value pretraining, and at the end)."""
    keep_checkpoints: int = Field(2, ge=1)
    """Checkpoints kept: the N newest, plus the one with the best held-out accuracy measured at
    its own step; older ones are deleted as new ones are written."""
    seed: int = 0
    """Seed for tasks, sampling and initialisation."""
    out: str = "runs/{env}_{preset}"
    """Run directory; `{preset}` and `{env}` expand (one directory per environment and preset,
    so runs on different environments never collide)."""
    learner_device: str = "cpu"
    """Device of the policy and critic being trained: cpu, cuda, cuda:N or mps. Under a process
    group of several ranks, `cuda` means each rank's own GPU (`cuda:LOCAL_RANK`)."""
    learner_ranks: int = Field(1, ge=1, le=1024)
    """Processes the learner runs in (`sao.runtime.learner_ranks`): more than 1 shards the policy
    and critic across them with FSDP2, one rank per GPU with `learner_device=cuda` (gloo ranks on
    CPU). Each rank trains a token-balanced part of every update (`sao.learner.data_parallel`),
    with losses normalised over the whole batch: N ranks take the one-process update."""
    learner_precision: Literal["fp32", "bf16"] = "fp32"
    """bf16: forward passes under bf16 autocast, with fp32 weights, gradients and optimizer state
    (master weights); log-probs and values are returned in fp32."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass (policy and critic):
    less activation memory for about one more forward pass of compute."""
    recompute_passes: bool = False
    """Keep only each learner forward pass's outputs (log-probs, values) and recompute the pass
    in the backward pass (policy and critic, value pretraining too): at most one pass of
    `micro_batch_tokens` holds its activations at a time, whatever the batch size, for about one
    more forward pass of compute (what `gradient_checkpointing` costs; with both, two)."""
    ray_learner_resources: dict[str, float] = Field(default_factory=dict)
    """Ray custom resources the learner actor asks for (e.g. {learner: 1}), placing it on a node."""
    drift_warn_rise: float = Field(0.10, gt=0.0, le=1.0)
    """Warn (one line, and `drift` in summary.json) when the share of episodes ending without an
    answer (out of turns or tokens, malformed, EOS) over the latest
    `drift_window` steps exceeds that of the first `drift_window` by more than this; 1.0 never
    warns. See `sao.runtime.drift`."""
    max_env_error_rate: float = Field(0.1, ge=0.0, le=1.0)
    """Stop the run (one line, exit 1) when more than this share of the latest
    `env_error_window` episodes ended in an environment error (the environment raised). Such
    episodes are never trained (`sao.runtime.env_errors`); 1.0 stops only when every episode of
    the window errored."""
    env_error_window: int = Field(100, ge=1, le=100_000)
    """Episodes `max_env_error_rate` is judged over: the latest this many the learner took
    (reset failures included), judged once this many have been seen."""
    drift_window: int | None = Field(None, ge=1, le=100_000)
    """Steps per window of the drift check; None: a quarter of `steps`, between 1 and 10. Two
    windows must fit in `steps`."""

    _learner_device = field_validator("learner_device")(_device_name)


class SFTConfig(_Section):
    steps: int = Field(500, ge=1)
    """Warm-start optimizer steps."""
    batch_size: int = Field(64, ge=1)
    """Demonstrations per step."""
    micro_batch_tokens: int = Field(4096, ge=1)
    """Padded tokens per forward pass at most: a batch runs in length-sorted passes with the same
    loss as one padded pass (see `train.micro_batch_tokens`)."""
    lr: float = Field(3e-3, gt=0.0, le=1.0)
    """Peak learning rate (linear warm-up, then cosine to a tenth)."""
    warmup_steps: int = Field(50, ge=0)
    """Warm-up steps."""
    num_demonstrations: int = Field(20_000, ge=1)
    """Teacher demonstrations generated (sampled with replacement into batches)."""
    weight_decay: float = Field(0.01, ge=0.0, le=1.0)
    """AdamW weight decay."""
    grad_clip: float = Field(1.0, gt=0.0)
    """Global gradient-norm clip."""
    checkpoint_every: int = Field(50, ge=1)
    """Save the SFT state (model, optimizer, step) every N steps next to the output directory,
    so an interrupted warm start continues where it stopped."""
    device: str = "cpu"
    """Device the warm start trains on: cpu, cuda, cuda:N or mps (as `train.learner_device`)."""
    precision: Literal["fp32", "bf16"] = "fp32"
    """bf16: forward passes under bf16 autocast, fp32 weights and optimizer state (as
    `train.learner_precision`)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass (as
    `train.gradient_checkpointing`)."""

    _device = field_validator("device")(_device_name)


class ServeConfig(_Section):
    tool_parser: Literal["auto", "hermes", "sao"] = "auto"
    """How `sao serve` reads function calls in replies (`sao.formats.tool_calls`): auto is hermes when the
    tokenizer has a chat template, sao (the tiny model's `<tool>` format) otherwise."""
    episode_timeout_s: float = Field(600.0, gt=0.0)
    """An episode (`X-Episode-Id`) with no call and no reward for this long is dropped, counted."""


class SAOConfig(_Section):
    preset: str = "sao"
    """Name of the preset this config started from."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    algo: AlgoConfig = Field(default_factory=AlgoConfig)
    actor: OptimConfig = Field(default_factory=lambda: OptimConfig(lr=1e-4))
    critic: CriticConfig = Field(default_factory=CriticConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)

    @model_validator(mode="after")
    def _consistent(self) -> SAOConfig:
        _check_algorithms(self)
        pretrain = self.critic.pretrain
        if pretrain.num_trajectories and pretrain.holdout_trajectories >= pretrain.num_trajectories:
            raise ValueError(
                f"critic.pretrain.holdout_trajectories: must be below num_trajectories "
                f"({pretrain.num_trajectories}), got {pretrain.holdout_trajectories}"
            )
        if self.train.learner_ranks > 1:
            _check_learner_ranks(self.train)
            if self.model.lora.rank:
                raise ValueError(
                    f"model.lora.rank={self.model.lora.rank}: LoRA trains in one learner "
                    f"process; set train.learner_ranks=1 (got {self.train.learner_ranks})"
                )
        if self.train.eval_every_s is not None and self.train.backend != "local":
            raise ValueError(
                "train.eval_every_s: only the local backend can pause its rollouts for an eval "
                "(use train.backend=local)"
            )
        window = self.train.drift_window
        if window is not None and 2 * window > self.train.steps:
            raise ValueError(
                f"train.drift_window: two windows of {window} steps must fit in train.steps "
                f"({self.train.steps}); lower it or leave it unset"
            )
        if self.train.batch_size % self.rollout.group_size:
            raise ValueError(
                f"train.batch_size: must be a multiple of rollout.group_size "
                f"({self.rollout.group_size}), got {self.train.batch_size}"
            )
        return self

    def run_dir(self) -> Path:
        """The run directory with `{preset}` and `{env}` expanded."""
        return Path(self.train.out.format(preset=self.preset, env=_env_slug(self.env.name)))

    def warm_start_dir(self) -> Path:
        """Where this config's warm-start policy lives."""
        return Path(self.model.warm_start_dir.format(env=_env_slug(self.env.name)))


def _check_algorithms(config: SAOConfig) -> None:
    """What the chosen estimator and loss declare in the registry, checked against the rest."""
    algo = config.algo
    estimator, loss = advantage_estimator(algo.advantage), policy_loss(algo.policy_loss)
    if estimator.needs_critic and not config.critic.enabled:
        raise ValueError(f"algo.advantage: {algo.advantage} needs a critic (critic.enabled=true)")
    if algo.adaptive_lambda_alpha is not None and not estimator.adaptive_lambda:
        takers = " / ".join(e.name for e in ADVANTAGES.values() if e.adaptive_lambda)
        raise ValueError(
            f"algo.adaptive_lambda_alpha: {algo.adaptive_lambda_alpha} is a per-token"
            f" lambda, which only algo.advantage {takers} uses, not {algo.advantage}"
            " (add --set algo.adaptive_lambda_alpha=null, or take that advantage's preset)"
        )
    against_old = " / ".join(n for n, p in POLICY_LOSSES.items() if p.against == "old")
    against_rollout = " / ".join(n for n, p in POLICY_LOSSES.items() if p.against == "rollout")
    if loss.against == "rollout" and (
        algo.ppo_minibatches is not None or algo.ppo_epochs is not None
    ):
        raise ValueError(
            f"algo.ppo_minibatches/ppo_epochs: only policy_loss={against_old} takes mini-batches; "
            f"{algo.policy_loss} takes algo.dis_minibatches updates against the rollout log-probs"
        )
    if loss.against == "old" and algo.dis_minibatches != 1:
        raise ValueError(
            f"algo.dis_minibatches: only policy_loss={against_rollout} takes it; "
            f"{algo.policy_loss} takes algo.ppo_minibatches"
        )
    if estimator.needs_groups and config.rollout.group_size < 2:
        raise ValueError(f"rollout.group_size: {algo.advantage} advantages need group_size >= 2")


def _check_learner_ranks(train: TrainConfig) -> None:
    ranks, device = train.learner_ranks, train.learner_device
    if train.backend != "local":
        raise ValueError(
            f"train.learner_ranks={ranks}: several learner ranks run with train.backend=local "
            "(the ray backend hosts one learner actor)"
        )
    if ":" in device or device == "mps":
        raise ValueError(
            f"train.learner_ranks={ranks}: learner_device={device!r} names one device; use "
            "cuda (rank r on cuda:r) or cpu"
        )


def _env_slug(name: str) -> str:
    return name.replace(":", "_").replace("/", "_")


ENV_FILE_DIR = Path(__file__).parent / "configs"
"""Where environments' packaged files live (`ENV.yaml`, merged over the preset)."""


def preset_tree(preset: str) -> dict[str, Any]:
    """The defaults with `preset`'s settings merged in, as a plain tree."""
    return deep_merge(
        SAOConfig().model_dump(mode="json"), {"preset": preset}, PRESETS[preset].settings
    )


def algorithm_overrides(config: SAOConfig) -> list[str]:
    """One line for each algorithm setting of `config` that differs from its preset's value.

    Environment files cannot cause one (`env_defaults` refuses them), so each comes from the
    user's `--config` or `--set`: the run honours it, and the CLI names it on stderr.
    """
    reference = leaf_items(preset_tree(config.preset))
    actual = leaf_items(config.model_dump(mode="json"))
    lines = []
    for key in actual:
        if is_algorithm_key(key) and actual[key] != reference.get(key):
            line = f"{key}={actual[key]!r} overrides preset {config.preset}'s {reference[key]!r}"
            if key == "algo.lambda_actor" and config.algo.adaptive_lambda_alpha is not None:
                line += (
                    ", unused while algo.adaptive_lambda_alpha sets lambda per trajectory"
                    " (add --set algo.adaptive_lambda_alpha=null)"
                )
            lines.append(line)
    return lines


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = tree
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{dotted}: {key} is not a section")
        node = child
    node[keys[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """`"algo.eps_low=0.2"` -> `("algo.eps_low", 0.2)`; the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key.path=value")
    key, raw = text.split("=", 1)
    if not key.strip():
        raise ConfigError(f"--set {text!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as err:
        raise ConfigError(
            f"--set {text!r}: value is not valid YAML ({_yaml_problem(err)})"
        ) from None
    return key.strip(), value


def _yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong and where."""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def _one_line(err: ValidationError) -> str:
    first = err.errors()[0]
    extra = f" ({len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    if first["type"] == "value_error" and not first["loc"]:
        # Cross-field checks already name their field in the message.
        return str(first["ctx"]["error"]) + extra
    field = ".".join(str(p) for p in first["loc"]) or "config"
    msg = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
    msg = msg.removeprefix("Value error, ")
    return f"{field}: {msg}, got {first.get('input')!r}{extra}"


def read_yaml_file(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """A YAML mapping from `path`; ConfigError (one line) if missing, not UTF-8, or malformed."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{what} {path}: does not exist")
    if not path.is_file():
        raise ConfigError(f"{what} {path}: is not a file")
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as err:
        raise ConfigError(f"{what} {path}: not UTF-8 text (byte {err.start})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} {path}: not valid YAML ({_yaml_problem(err)})") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{what} {path}: top level must be a mapping")
    return loaded


def load_config(
    preset: str | None = None,
    yaml_path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    env_file: bool = True,
) -> SAOConfig:
    """Build a validated config.

    Order: defaults <- preset <- the environment's packaged defaults (`sao/configs/ENV.yaml`,
    when there is one and `env_file`) <- YAML file <- dotted overrides. The packaged defaults
    never touch an algorithm setting (see `ENV_FILE_SECTIONS`); the user's file and overrides
    may, and `algorithm_overrides` names what they changed. A run's saved `config.yaml` holds
    every value the run used, so it is loaded with `env_file=False`: a key the packaged file has
    and the run did not use is not added to its mappings.

    The preset is `preset`, else the one the YAML file (or a `preset=` override) names, else
    `sao`; a file naming another preset than `preset` is refused, since its settings were not
    the ones that name would apply.
    """
    user: dict[str, Any] = read_yaml_file(yaml_path) if yaml_path is not None else {}
    for text in overrides:
        key, value = parse_override(text)
        _set_dotted(user, key, value)
    named = user.pop("preset", None)
    if preset is not None and named is not None and named != preset:
        raise ConfigError(
            f"preset: {preset!r} was asked for but {yaml_path or 'an override'} names "
            f"{named!r}; give one (a saved config's algorithm settings are its own preset's)"
        )
    preset = str(preset or named or "sao")
    if preset not in PRESETS:
        raise ConfigError(f"preset: unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
    env = user.get("env", {}).get("name", "calc") if isinstance(user.get("env"), dict) else "calc"
    packaged = env_defaults(str(env)) if env_file else {}
    tree = deep_merge({"preset": preset}, PRESETS[preset].settings, packaged, user)
    try:
        return SAOConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_one_line(err)) from None


def load_run_config(run_dir: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> SAOConfig:
    """The config a run was made with (`RUN_DIR/config.yaml`, under its own preset) + overrides."""
    path = Path(run_dir) / "config.yaml"
    if not Path(run_dir).is_dir():
        raise ConfigError(f"run directory {run_dir}: does not exist")
    saved = read_yaml_file(path, "run config")
    preset = saved.get("preset", "sao")
    return load_config(str(preset), path, overrides, env_file=False)


def env_defaults(env: str) -> dict[str, Any]:
    """The packaged config overrides for an environment family (empty when there are none).

    Raises:
        ConfigError: if the file sets anything outside `ENV_FILE_SECTIONS` or a preset's key.
    """
    path = ENV_FILE_DIR / f"{env.split(':', 1)[0]}.yaml"
    if not path.is_file():
        return {}
    tree = read_yaml_file(path, "environment file")
    for key in leaf_items(tree):
        if is_algorithm_key(key) or not under(key, ENV_FILE_SECTIONS):
            raise ConfigError(
                f"environment file {path.name}: sets {key}, but an environment file may set "
                f"only {', '.join(ENV_FILE_SECTIONS)} and no preset's key (an algorithm "
                "variant belongs in a preset of its own)"
            )
    return tree


def save_config(config: SAOConfig, path: str | Path) -> None:
    """Write the resolved config as YAML (loadable again with `load_config(yaml_path=...)`)."""
    Path(path).write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
