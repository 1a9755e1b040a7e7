"""Model and tokenizer factory: the tiny Qwen3-MoE policy, any HF causal LM from disk, log-probs."""

from sao.models.critic import ValueModel, freeze_modules
from sao.models.packed_attention import PACKED_ATTENTION, use_packed_attention
from sao.models.policy import (
    build_tiny_policy,
    load_policy,
    logprobs_from_logits,
    save_policy,
    tiny_policy_config,
    token_logprobs,
    token_logprobs_and_entropy,
)
from sao.models.tokenizer import build_tokenizer

__all__ = [
    "PACKED_ATTENTION",
    "use_packed_attention",
    "ValueModel",
    "freeze_modules",
    "build_tiny_policy",
    "build_tokenizer",
    "load_policy",
    "logprobs_from_logits",
    "save_policy",
    "tiny_policy_config",
    "token_logprobs",
    "token_logprobs_and_entropy",
]
