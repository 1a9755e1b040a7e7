"""Pure sampling math: temperature, top-p (nucleus) and the log-prob of what was sampled.

The recorded log-prob is that of the distribution the token was actually drawn from:

    p_T      = softmax(logits / T)                      (fp32)
    nucleus  = the smallest set of most likely tokens whose p_T mass reaches top_p
    p        = p_T restricted to the nucleus, renormalised

With `top_p = 1` no token is removed and the log-prob equals `log_softmax(logits / T)[token]`,
the quantity `sao.models.policy.token_logprobs(..., temperature=T)` recomputes.
"""

from __future__ import annotations

import torch
from torch import Tensor


def nucleus_log_probs(logits: Tensor, temperatures: Tensor, top_ps: Tensor) -> Tensor:
    """Log-probs `[B, V]` of the per-row sampling distribution (-inf outside each nucleus).

    Args:
        logits: `[B, V]` next-token logits, any float dtype (computed in fp32).
        temperatures: `[B]`, each > 0.
        top_ps: `[B]`, each in (0, 1]; rows with 1 are left untruncated.
    """
    log_probs = torch.log_softmax(logits.float() / temperatures.unsqueeze(-1).float(), dim=-1)
    truncated = top_ps < 1.0
    if not bool(truncated.any()):
        return log_probs
    sorted_log_probs, order = log_probs.sort(dim=-1, descending=True)
    sorted_probs = sorted_log_probs.exp()
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    # A token is outside the nucleus when the more likely tokens already reach top_p; the most likely
    # token is always kept.
    outside_sorted = mass_before >= top_ps.unsqueeze(-1).float()
    outside_sorted[:, 0] = False
    outside_sorted &= truncated.unsqueeze(-1)
    outside = torch.zeros_like(outside_sorted).scatter(-1, order, outside_sorted)
    kept = log_probs.masked_fill(outside, float("-inf"))
    renormalised = kept - torch.logsumexp(kept, dim=-1, keepdim=True)
    # Untruncated rows keep their exact log_softmax values (renormalising would add float noise).
    return torch.where(truncated.unsqueeze(-1), renormalised, log_probs)


def sample_tokens(
    logits: Tensor, temperatures: Tensor, top_ps: Tensor, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """Draw one token per row and return `(token_ids [B] long, logprobs [B] fp32)`.

    `logprobs[b]` is the log-prob of `token_ids[b]` under the distribution it was drawn from (see
    the module docstring).
    """
    log_probs = nucleus_log_probs(logits, temperatures, top_ps)
    tokens = torch.multinomial(log_probs.exp(), num_samples=1, generator=generator)
    return tokens.squeeze(-1), log_probs.gather(-1, tokens).squeeze(-1)
