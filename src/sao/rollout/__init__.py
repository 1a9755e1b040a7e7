"""Rollout: the continuous-batching engine that samples actions with log-probs and versions."""

from sao.rollout.engine import Completion, RolloutEngine, SamplingParams

__all__ = ["Completion", "RolloutEngine", "SamplingParams"]
