"""What the learner reads of a run's config: its own sections, nothing else.

`Learner` keeps a `LearnerConfig`, so following a setting from the command line into a training
step passes `SAOConfig` once, here, rather than through every module the learner calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from sao.config import AlgoConfig, CriticConfig, LoraConfig, OptimConfig, SAOConfig


@dataclass(frozen=True)
class LearnerConfig:
    """The learner's sections of `SAOConfig`.

    Attributes:
        algo: the estimator, loss and their settings (`algo`).
        actor: the policy's optimizer (`actor`).
        critic: the value model and its optimizer (`critic`).
        lora: the adapters the models carry (`model.lora`), recorded in checkpoints.
        temperature: the rollout temperature: log-probs are of the tempered distribution.
        device: `train.learner_device`.
        precision: `train.learner_precision`.
        micro_batch_tokens: `train.micro_batch_tokens`.
        gradient_checkpointing: `train.gradient_checkpointing`.
        recompute_passes: `train.recompute_passes`.
    """

    algo: AlgoConfig
    actor: OptimConfig
    critic: CriticConfig
    lora: LoraConfig
    temperature: float
    device: str
    precision: str
    micro_batch_tokens: int
    gradient_checkpointing: bool
    recompute_passes: bool = False

    @classmethod
    def of(cls, config: SAOConfig | LearnerConfig) -> LearnerConfig:
        """The learner's sections of a run's `config` (a `LearnerConfig` is returned as it is)."""
        if isinstance(config, LearnerConfig):
            return config
        train = config.train
        return cls(
            algo=config.algo,
            actor=config.actor,
            critic=config.critic,
            lora=config.model.lora,
            temperature=config.rollout.temperature,
            device=train.learner_device,
            precision=train.learner_precision,
            micro_batch_tokens=train.micro_batch_tokens,
            gradient_checkpointing=train.gradient_checkpointing,
            recompute_passes=train.recompute_passes,
        )
