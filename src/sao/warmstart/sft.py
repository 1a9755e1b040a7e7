"""Warm start (`sao sft`): train a policy on a scripted teacher's demonstrations.

The policy is the tiny default, or any local HF checkpoint given as `model.path`. Each
demonstration is a list of `(text, is_action)` segments: the prompt and the environment's
observations are context (no loss), the teacher's actions are the targets. They are laid out by
`sao.rollout.rendering.TurnRenderer`, exactly as a rollout of the same episode is (the chat
template when the tokenizer has one). The result is saved with `save_pretrained`, ready for
`sao eval` and `sao train`.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import SFTConfig, load_config
from sao.envs.registry import make_demonstrations
from sao.learner.chunking import packed_forward, packing_cost_for
from sao.learner.precision import (
    enable_gradient_checkpointing,
    mixed_precision_forward,
    resolve_device,
)
from sao.models.packed_attention import use_packed_attention
from sao.models.policy import build_tiny_policy, load_policy, packed_inputs, save_policy
from sao.models.tokenizer import build_tokenizer
from sao.plumbing.faults import pause_point
from sao.rollout.rendering import TurnRenderer
from sao.warmstart.record import RECORD_FILE, options_beyond_defaults, write_record

Segments = list[tuple[str, bool]]


def encode_segments(
    tokenizer: PreTrainedTokenizerBase, segments: Segments, renderer: TurnRenderer | None = None
) -> tuple[list[int], list[int]]:
    """Token ids laid out as a rollout's (plain layout: BOS first) and a 0/1 loss mask that is 1
    exactly on action tokens. Pass `renderer` to reuse one across many demonstrations."""
    return (renderer or TurnRenderer(tokenizer)).demonstration(segments)


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
    precision: str = "fp32",
) -> torch.Tensor:
    """Mean next-token cross-entropy over action tokens, computed in fp32.

    `precision` "bf16" runs the model under bf16 autocast (`sao.learner.precision`); the
    tensors must be on the model's device.

    With `max_tokens`, the forward runs over the batch's sequences packed side by side in passes
    of at most that many tokens (`sao.learner.chunking.packed_forward`): the loss is the same as
    one padded pass (up to float rounding), but almost no padding is computed. `train_sft`
    switches the model to segment-by-segment attention where it accepts it
    (`sao.models.packed_attention`), which makes packed rows cheaper still.
    """

    def token_nll(ids: torch.Tensor, model_inputs: dict[str, object]) -> torch.Tensor:
        logits = model(input_ids=ids, **model_inputs).logits[:, :-1].float()
        nll = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
        )
        # Token-aligned like the learner's log-probs: column t scores token t; column 0 has none.
        return F.pad(nll.view(ids.shape[0], -1), (1, 0))

    token_nll = mixed_precision_forward(token_nll, precision, input_ids.device)

    # Rows are right-padded. A real token may share the pad id (a tokenizer that pads with EOS, and
    # a chat template that writes EOS between turns): every position up to the last target is
    # real, and what follows the last target cannot change any loss.
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)
    last_target = (loss_mask.long() * positions).amax(dim=1, keepdim=True)
    attention = ((input_ids != pad_id) | (positions <= last_target)).long()
    if max_tokens is None:
        nll = token_nll(input_ids, {"attention_mask": attention})
    else:
        nll = packed_forward(
            lambda ids, pos: token_nll(ids, packed_inputs(ids, pos)),
            input_ids,
            attention,
            max_tokens,
            packing_cost_for(model),
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
    state_path: Path | None = None,
) -> list[float]:
    """Train `model` in place on the examples; returns the loss curve (one value per step).

    With `state_path`, the whole training state is saved there every `config.checkpoint_every`
    steps, and a state found there (from the same settings) is continued instead of starting over.

    The model trains on `config.device` (in `config.precision`, with `config.gradient_checkpointing`)
    and is returned to its own device after. Its forward passes run over packed sequences, the
    learner's packing (`sao.learner.chunking.packed_forward`).

    Raises:
        ValueError: one line, when `config.device` is not available here.
    """
    device = resolve_device(config.device)
    home = next(model.parameters()).device
    renderer = TurnRenderer(tokenizer)
    encoded = [encode_segments(tokenizer, ex, renderer) for ex in examples]
    if not encoded:
        raise ValueError("train_sft: no demonstrations")
    rng = random.Random(seed)
    model.to(device)
    if config.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )

    def lr_at(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        progress_frac = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress_frac))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    fingerprint = {"sft": config.model_dump(mode="json"), "seed": seed, "n": len(encoded)}
    curve: list[float] = []
    if state_path is not None:
        curve = _restore_sft_state(state_path, fingerprint, model, optimizer, scheduler, rng)
    use_packed_attention(model)
    model.train()
    bar = tqdm(
        range(len(curve), config.steps),
        initial=len(curve),
        total=config.steps,
        desc="sft",
        disable=not progress,
        dynamic_ncols=True,
    )
    size = min(config.batch_size, len(encoded))
    for step in bar:
        batch = [encoded[i] for i in rng.sample(range(len(encoded)), size)]
        input_ids, loss_mask = collate_demonstrations(batch, tokenizer.pad_token_id)
        loss = sft_loss(
            model,
            input_ids.to(device),
            loss_mask.to(device),
            tokenizer.pad_token_id,
            config.micro_batch_tokens,
            config.precision,
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()
        curve.append(loss.item())
        bar.set_postfix(loss=f"{curve[-1]:.3f}")
        done = step + 1
        if state_path is not None and done % config.checkpoint_every == 0 and done < config.steps:
            _save_sft_state(state_path, fingerprint, model, optimizer, scheduler, rng, curve)
            pause_point(f"sft-saved:{done}")
    model.eval().to(home)
    return curve


def _save_sft_state(
    path: Path,
    fingerprint: dict[str, Any],
    model: PreTrainedModel,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    rng: random.Random,
    curve: list[float],
) -> None:
    """Everything needed to continue SFT at the next step, written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "fingerprint": fingerprint,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": rng.getstate(),
        "torch_rng": torch.get_rng_state(),
        "curve": curve,
    }
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(state, tmp)
    with tmp.open("rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _restore_sft_state(
    path: Path,
    fingerprint: dict[str, Any],
    model: PreTrainedModel,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    rng: random.Random,
) -> list[float]:
    """The loss curve so far, after loading a saved state into the objects (empty if none)."""
    if not path.exists():
        return []
    try:
        state = torch.load(path, weights_only=False)
    except Exception as err:  # a torn or foreign file: start over rather than fail
        print(f"sft: warning: {path} is unreadable ({type(err).__name__}); starting over")
        return []
    if state["fingerprint"] != fingerprint:
        print(f"sft: {path} was saved with other settings; starting over")
        return []
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    rng.setstate(state["rng"])
    torch.set_rng_state(state["torch_rng"])
    print(f"sft: continuing from step {len(state['curve'])} ({path})")
    return list(state["curve"])


def warm_start(
    env: str,
    out: str | Path,
    config: SFTConfig | None = None,
    seed: int = 0,
    progress: bool = True,
    model_path: str | Path | None = None,
    demonstrations: list[Segments] | None = None,
    env_options: dict[str, Any] | None = None,
) -> Path:
    """Train a policy on `env`'s demonstrations and save it to `out`.

    `demonstrations` replaces the environment's teacher (e.g. a teacher with other settings, see
    `sao inspect retry-warm-start`). The teacher writes its episodes with the
    environment's default options; `env_options` (the run's `env.options`), when set, are named in
    a note saying so, since RL episodes will differ from the demonstrations in them.

    The policy is loaded from `model_path` (any local HF causal LM with its tokenizer) when
    given, else the tiny default is built. `config` defaults to the environment's `sft` section
    (`sao/configs/ENV.yaml` over defaults).

    Progress is saved in `OUT.partial/` (see `train_sft`), so an interrupted warm start continues
    where it stopped; the policy appears in `out` only once complete.
    """
    if config is None:
        config = load_config("sao", None, [f"env.name={env}"]).sft
    resolve_device(config.device)  # a missing device is refused before any work
    torch.manual_seed(seed)
    if model_path is not None:
        model, tokenizer = load_policy(model_path)
    else:
        tokenizer = build_tokenizer()
        model = build_tiny_policy(tokenizer, seed=seed)
    unheeded = options_beyond_defaults(env, env_options or {}) if demonstrations is None else {}
    if unheeded:
        print(
            f"sft: note: env.options {unheeded} apply to RL episodes, not to the teacher's "
            f"demonstrations, which use {env}'s defaults"
        )
    examples = (
        demonstrations
        if demonstrations is not None
        else make_demonstrations(env, config.num_demonstrations, seed)
    )
    t0 = time.time()
    out = Path(out)
    partial = out.with_name(out.name + ".partial")
    curve = train_sft(
        model,
        tokenizer,
        examples,
        config,
        seed=seed,
        progress=progress,
        state_path=partial / "sft_state.pt",
    )
    record = {
        "env": env,
        "given_demonstrations": demonstrations is not None,
        "num_demonstrations": len(examples),
        "seed": seed,
    }
    _save_complete(model, tokenizer, curve, out, record)
    shutil.rmtree(partial, ignore_errors=True)
    print(
        f"sft: {len(examples)} demonstrations, {config.steps} steps in {time.time() - t0:.0f}s, "
        f"final loss {curve[-1]:.3f}; saved to {out}"
    )
    return out


def _save_complete(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    curve: list[float],
    out: Path,
    record: dict[str, Any],
) -> None:
    """Save the policy, its loss curve and what it was trained on (`sao.warmstart.record`); a
    new directory appears whole (written beside it, then renamed), so a reader never finds a
    half-saved warm start. One saved over an old one loses the old record first, so a torn
    save is never vouched for."""
    target = out.with_name(f".{out.name}.saving") if not out.exists() else out
    if target != out:
        shutil.rmtree(target, ignore_errors=True)
    (target / RECORD_FILE).unlink(missing_ok=True)
    save_policy(model, tokenizer, target)
    (target / "sft_curve.txt").write_text("\n".join(f"{x:.5f}" for x in curve) + "\n")
    write_record(target, **record)
    if target != out:
        os.replace(target, out)
