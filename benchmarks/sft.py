"""Warm-start step: one padded forward/backward against packed passes, same batches.

Draws random batches of an environment's real teacher demonstrations, as `sao sft` does, and times
`sft_loss` + backward on each batch twice, interleaved: once as one right-padded pass, once over
the sequences packed side by side in passes of at most `--micro-batch-tokens` tokens
(`sft.micro_batch_tokens`) by a copy of the model switched to segment-by-segment attention, as
`sao sft` runs it (`sao.models.packed_attention`). Both compute the same loss; `speedup` = median padded step / median
packed step. `padding_frac` is the fraction of the tokens the packed passes compute that are
padding, `batch_padding_frac` the padded batches'.

    python benchmarks/sft.py [--env code_repair] [--batch 32] [--repeats 6]
        [--micro-batch-tokens 4096] [--threads N] [--json PATH]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import time
from pathlib import Path

import torch
from transformers import PreTrainedModel

from sao.envs.registry import make_demonstrations
from sao.learner.chunking import packed_padding_frac, packing_cost_for
from sao.models import build_tiny_policy, build_tokenizer, use_packed_attention
from sao.warmstart.sft import collate_demonstrations, encode_segments, sft_loss


def main() -> None:
    """Parse the flags, time both kinds of step and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="code_repair", help="whose demonstrations to train on")
    parser.add_argument("--batch", type=int, default=32, help="demonstrations per step")
    parser.add_argument("--repeats", type=int, default=6, help="timed batches (median)")
    parser.add_argument("--micro-batch-tokens", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    tokenizer = build_tokenizer()
    model = build_tiny_policy(tokenizer, seed=args.seed)
    packed_model = copy.deepcopy(model)
    use_packed_attention(packed_model)
    pad = tokenizer.pad_token_id
    demos = make_demonstrations(args.env, 20 * args.batch, args.seed)
    encoded = [encode_segments(tokenizer, demo) for demo in demos]
    rng = random.Random(args.seed)

    def step(
        model: PreTrainedModel,
        input_ids: torch.Tensor,
        loss_mask: torch.Tensor,
        max_tokens: int | None,
    ) -> float:
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        sft_loss(model, input_ids, loss_mask, pad, max_tokens).backward()
        return time.perf_counter() - start

    padded, packed, padding, batch_padding = [], [], [], []
    for round_ in range(args.repeats + 1):  # round 0 warms up
        batch = [encoded[i] for i in rng.sample(range(len(encoded)), args.batch)]
        input_ids, loss_mask = collate_demonstrations(batch, pad)
        times = (
            step(model, input_ids, loss_mask, None),
            step(packed_model, input_ids, loss_mask, args.micro_batch_tokens),
        )
        if round_:
            padded.append(times[0])
            packed.append(times[1])
            lengths = (input_ids != pad).sum(dim=1).tolist()
            padding.append(
                packed_padding_frac(
                    lengths, args.micro_batch_tokens, packing_cost_for(packed_model)
                )
            )
            batch_padding.append(float((input_ids == pad).float().mean()))

    result = {
        "env": args.env,
        "batch": args.batch,
        "micro_batch_tokens": args.micro_batch_tokens,
        "padded_step_s": statistics.median(padded),
        "packed_step_s": statistics.median(packed),
        "padding_frac": statistics.mean(padding),
        "batch_padding_frac": statistics.mean(batch_padding),
        "speedup": statistics.median(padded) / statistics.median(packed),
    }
    for key, value in result.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
