"""Warm start (`sao sft`): train the tiny policy on a scripted teacher's demonstrations.

Each demonstration is a list of `(text, is_action)` segments: the prompt and the environment's
observations are context (no loss), the teacher's actions are the targets. The result is saved
with `save_pretrained`, ready for `sao eval` and `sao train`.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import SFTConfig, load_config
from sao.envs.registry import make_demonstrations
from sao.learner.chunking import packed_forward, token_cost_for
from sao.models.policy import build_tiny_policy, packed_inputs, save_policy
from sao.models.tokenizer import build_tokenizer

Segments = list[tuple[str, bool]]


def encode_segments(
    tokenizer: PreTrainedTokenizerBase, segments: Segments
) -> tuple[list[int], list[int]]:
    """Token ids (BOS first) and a 0/1 loss mask that is 1 exactly on action tokens."""
    ids = [tokenizer.bos_token_id]
    mask = [0]
    for text, is_action in segments:
        piece = tokenizer.encode(text, add_special_tokens=False)
        ids += piece
        mask += [int(is_action)] * len(piece)
    return ids, mask


def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows])


def collate_demonstrations(
    encoded: Sequence[tuple[list[int], list[int]]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded `[B, T]` input ids and loss mask of `encode_segments` outputs."""
    return _pad([ids for ids, _ in encoded], pad_id), _pad([mask for _, mask in encoded], 0)


def sft_loss(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    loss_mask: torch.Tensor,
    pad_id: int,
    max_tokens: int | None = None,
) -> torch.Tensor:
    """Mean next-token cross-entropy over action tokens.

    With `max_tokens`, the forward runs over the batch's sequences packed side by side in passes
    of at most that many tokens (`sao.learner.chunking.packed_forward`): the loss is the same as
    one padded pass (up to float rounding), but almost no padding is computed.
    """

    def token_nll(ids: torch.Tensor, model_inputs: dict[str, object]) -> torch.Tensor:
        logits = model(input_ids=ids, **model_inputs).logits[:, :-1].float()
        nll = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
        )
        # Token-aligned like the learner's log-probs: column t scores token t; column 0 has none.
        return F.pad(nll.view(ids.shape[0], -1), (1, 0))

    attention = (input_ids != pad_id).long()
    if max_tokens is None:
        nll = token_nll(input_ids, {"attention_mask": attention})
    else:
        nll = packed_forward(
            lambda ids, pos: token_nll(ids, packed_inputs(ids, pos)),
            input_ids,
            attention,
            max_tokens,
            token_cost_for(model),
        )
    mask = loss_mask.float()
    return (nll * mask).sum() / mask.sum().clamp(min=1)


def train_sft(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: list[Segments],
    config: SFTConfig,
    seed: int = 0,
    progress: bool = True,
) -> list[float]:
    """Train `model` in place on the examples; returns the loss curve (one value per step)."""
    encoded = [encode_segments(tokenizer, ex) for ex in examples]
    if not encoded:
        raise ValueError("train_sft: no demonstrations")
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )

    def lr_at(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        progress_frac = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress_frac))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    model.train()
    curve: list[float] = []
    bar = tqdm(range(config.steps), desc="sft", disable=not progress, dynamic_ncols=True)
    size = min(config.batch_size, len(encoded))
    for _ in bar:
        batch = [encoded[i] for i in rng.sample(range(len(encoded)), size)]
        input_ids, loss_mask = collate_demonstrations(batch, tokenizer.pad_token_id)
        loss = sft_loss(
            model, input_ids, loss_mask, tokenizer.pad_token_id, config.micro_batch_tokens
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()
        curve.append(loss.item())
        bar.set_postfix(loss=f"{curve[-1]:.3f}")
    model.eval()
    return curve


def default_warm_start_dir(env: str) -> Path:
    """Where `sao sft` writes by default and `sao train` looks: `checkpoints/warm_start_<env>`."""
    return Path("checkpoints") / f"warm_start_{env.replace(':', '_').replace('/', '_')}"


def warm_start(
    env: str,
    out: str | Path,
    config: SFTConfig | None = None,
    seed: int = 0,
    progress: bool = True,
) -> Path:
    """Build the tiny policy, train it on `env`'s demonstrations and save it to `out`.

    `config` defaults to the environment's `sft` section (`sao/configs/ENV.yaml` over defaults).
    """
    if config is None:
        config = load_config("sao", None, [f"env.name={env}"]).sft
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    model = build_tiny_policy(tokenizer, seed=seed)
    examples = make_demonstrations(env, config.num_demonstrations, seed)
    t0 = time.time()
    curve = train_sft(model, tokenizer, examples, config, seed=seed, progress=progress)
    out = Path(out)
    save_policy(model, tokenizer, out)
    (out / "sft_curve.txt").write_text("\n".join(f"{x:.5f}" for x in curve) + "\n")
    print(
        f"sft: {len(examples)} demonstrations, {config.steps} steps in {time.time() - t0:.0f}s, "
        f"final loss {curve[-1]:.3f}; saved to {out}"
    )
    return out


def run_sft_command(
    env: str, out: str | None, steps: int | None, seed: int, overrides: Sequence[str] = ()
) -> int:
    """`sao sft`: warm-start and save; prints where the policy went."""
    overrides = [f"env.name={env}", *overrides]
    overrides += [f"sft.steps={steps}"] if steps is not None else []
    config = load_config("sao", None, overrides).sft
    warm_start(env, out or default_warm_start_dir(env), config, seed=seed)
    return 0
