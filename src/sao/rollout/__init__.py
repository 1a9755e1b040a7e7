"""Rollout: the inference-engine interface, the built-in continuous-batching engine that samples
actions with log-probs and versions, and the layout of episodes as token ids."""

from sao.rollout.engine import Completion, RolloutEngine, SamplingParams
from sao.rollout.interface import ENGINE_NAMES, InferenceEngine
from sao.rollout.rendering import TurnRenderer

__all__ = [
    "ENGINE_NAMES",
    "Completion",
    "InferenceEngine",
    "RolloutEngine",
    "SamplingParams",
    "TurnRenderer",
]
