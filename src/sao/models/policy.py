"""The policy: a tiny Qwen3-MoE built from a config, any HF causal LM from disk, and log-probs.

`token_logprobs` is the one definition of "the log-prob of a token" shared by the learner and the
rollout engine: token-aligned (column `t` is the log-prob of token `t` given tokens `< t`, read from
the logits at `t - 1`; column 0 has no predecessor and is 0), in fp32, at a temperature. The engine
records exactly this quantity (at its sampling temperature), so in fp32 the DIS ratio of an
unchanged policy is 1 up to float noise.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

_TINY_DEFAULTS: dict[str, object] = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "intermediate_size": 256,
    "norm_topk_prob": True,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "rms_norm_eps": 1e-6,
    "initializer_range": 0.02,
}


def tiny_policy_config(vocab_size: int, **overrides: object) -> Qwen3MoeConfig:
    """Config of the ~1.8M-parameter default policy (hidden 128, 4 layers, 8 experts top-2).

    Args:
        vocab_size: number of token ids (the tokenizer's `len`).
        **overrides: any `Qwen3MoeConfig` field, replacing the tiny default.

    Raises:
        ValueError: if `vocab_size` is not a positive integer or an override is not a config field.
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= 0:
        raise ValueError(
            f"tiny_policy_config: vocab_size must be a positive int, got {vocab_size!r}"
        )
    # The config silently accepts any keyword, so a misspelt override would otherwise be ignored.
    # `attribute_map` aliases (num_experts -> num_local_experts) are valid keywords too.
    known = set(Qwen3MoeConfig().to_dict()) | set(Qwen3MoeConfig.attribute_map)
    unknown = sorted(k for k in overrides if k not in known)
    if unknown:
        raise ValueError(f"tiny_policy_config: unknown Qwen3MoeConfig field(s) {unknown}")
    fields = {**_TINY_DEFAULTS, **overrides, "vocab_size": vocab_size}
    return Qwen3MoeConfig(**fields)


def build_tiny_policy(tokenizer: PreTrainedTokenizerBase, seed: int = 0) -> Qwen3MoeForCausalLM:
    """A freshly initialised tiny Qwen3-MoE policy sized to `tokenizer`, in fp32.

    The same `seed` gives the same weights; the global RNG state is left untouched.
    """
    config = tiny_policy_config(
        len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3MoeForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.float().eval()


def save_policy(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, path: str | Path
) -> None:
    """Write model weights, config and tokenizer to the local directory `path`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def load_policy(
    path: str | Path, dtype: torch.dtype = torch.float32
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load any HF causal LM and its tokenizer saved at the local directory `path`.

    Never touches the network (`local_files_only`). The model is returned in eval mode. A
    tokenizer without a pad token pads with EOS (padding is always masked, so its id never
    reaches a loss).

    Raises:
        ValueError: if `path` is not a directory or `dtype` is not a floating torch dtype.
    """
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"load_policy: path {str(path)!r} is not a directory")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"load_policy: dtype must be a floating torch.dtype, got {dtype!r}")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.eval(), tokenizer


def position_ids_from_mask(attention_mask: Tensor) -> Tensor:
    """Positions counted over real tokens only, so left and right padding give the same result."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def logprobs_from_logits(
    logits: Tensor, input_ids: Tensor, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[Tensor, Tensor | None]:
    """Token-aligned fp32 log-probs (and optionally entropies) from next-token logits.

    Args:
        logits: `[B, T, V]`, row `t` predicts token `t + 1`.
        input_ids: `[B, T]` token ids.
        temperature: logits are divided by it before the softmax.
        with_entropy: also return the entropy of each predicting distribution.

    Returns:
        `(logprobs [B, T], entropy [B, T] or None)`; column 0 of both is 0. The entropy carries
        no gradient.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if logits.shape[:2] != input_ids.shape:
        raise ValueError(
            f"logits shape {tuple(logits.shape)} does not match input_ids {tuple(input_ids.shape)}"
        )
    log_probs = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)
    picked = log_probs.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    zero_column = picked.new_zeros(picked.shape[0], 1)
    logprobs = torch.cat([zero_column, picked], dim=1)
    if not with_entropy:
        return logprobs, None
    # A metric, never a loss: without a graph, the vocabulary-wide product is not kept for a
    # backward pass (on a 49k vocabulary it would hold a batch's logits' size again).
    with torch.no_grad():
        entropy = -(log_probs.exp() * log_probs).sum(-1)
    return logprobs, torch.cat([zero_column, entropy], dim=1)


def _forward_logits(
    model: PreTrainedModel,
    input_ids: Tensor,
    attention_mask: Tensor | None,
    packed_positions: Tensor | None = None,
) -> Tensor:
    if packed_positions is not None:
        return model(input_ids=input_ids, **packed_inputs(input_ids, packed_positions)).logits
    if attention_mask is None or input_ids.dim() != 2 or attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"input_ids must be [B, T] and attention_mask the same shape, got "
            f"{tuple(input_ids.shape)} and "
            f"{None if attention_mask is None else tuple(attention_mask.shape)}"
        )
    return model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids_from_mask(attention_mask),
        use_cache=False,
    ).logits


def packed_inputs(input_ids: Tensor, packed_positions: Tensor) -> dict[str, object]:
    """Model keyword arguments for rows that hold several sequences side by side.

    `packed_positions` restart at 0 where each sequence starts. With no attention mask and no
    cache, Hugging Face decoders read the sequence boundaries from those restarts and attend
    block-diagonally, so each sequence is computed as if alone.
    """
    if input_ids.dim() != 2 or packed_positions.shape != input_ids.shape:
        raise ValueError(
            f"input_ids must be [B, T] and packed_positions the same shape, got "
            f"{tuple(input_ids.shape)} and {tuple(packed_positions.shape)}"
        )
    return {"attention_mask": None, "position_ids": packed_positions, "use_cache": False}


def token_logprobs(
    model: PreTrainedModel, input_ids: Tensor, attention_mask: Tensor, temperature: float = 1.0
) -> Tensor:
    """`[B, T]` fp32 log-prob of each token under `model` at `temperature` (column 0 is 0).

    Gradients flow through when called outside `torch.no_grad()`.
    """
    logits = _forward_logits(model, input_ids, attention_mask)
    return logprobs_from_logits(logits, input_ids, temperature)[0]


def token_logprobs_and_entropy(
    model: PreTrainedModel,
    input_ids: Tensor,
    attention_mask: Tensor | None,
    temperature: float = 1.0,
    packed_positions: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Like `token_logprobs`, plus the `[B, T]` entropy of the distribution predicting each token.

    With `packed_positions` (and `attention_mask` None) each row holds several sequences side by
    side (see `packed_inputs`); the column of each sequence's first token is then meaningless.
    """
    logits = _forward_logits(model, input_ids, attention_mask, packed_positions)
    logprobs, entropy = logprobs_from_logits(logits, input_ids, temperature, with_entropy=True)
    assert entropy is not None
    return logprobs, entropy
