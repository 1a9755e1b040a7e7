"""Train/inference mismatch: log-probs a bf16 rollout engine records vs the fp32 learner's.

The engine samples with its model copy in bf16 (as fast inference stacks do); the learner
recomputes the same tokens in fp32 with `token_logprobs`. Their gap is the mismatch DIS must
tolerate even for a policy that has not changed. Printed per model, over all sampled tokens:
mean |logp_bf16 - logp_fp32|, the largest gap, and the fraction of DIS ratios
`exp(logp_fp32 - logp_bf16)` outside the default window [0.7, 6.0]. An fp32 engine is the control.

Two policies are measured: the freshly initialised tiny policy (near-uniform next-token
distributions) and the same weights with the output layer scaled up, a stand-in for a trained,
confident policy whose logits are large. `--model PATH` measures a saved model instead (a real
pretrained one, e.g. `sao import-gguf`'s output), as it is.

    python benchmarks/precision_mismatch.py [--requests 32] [--tokens 64] [--model PATH]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.models import build_tiny_policy, build_tokenizer, load_policy, token_logprobs
from sao.rollout.engine import RolloutEngine, SamplingParams

DIS_WINDOW = (0.7, 6.0)


def measure(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    precision: str,
    requests: int,
    tokens: int,
    seed: int,
) -> dict[str, float]:
    """Sample with an engine in `precision`, recompute in fp32, summarise the per-token gaps."""
    no_eos = copy.deepcopy(tokenizer)
    no_eos.eos_token = None
    engine = RolloutEngine(model, no_eos, max_batch=requests, precision=precision, seed=seed)
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    prompts = {f"q{i}": [*bos, *tokenizer.encode(f"{i * 37} + {i}")] for i in range(requests)}
    for rid, ids in prompts.items():
        engine.submit(rid, ids, SamplingParams(max_new_tokens=tokens))
    gaps = []
    for completion in engine.run_until_done():
        ids = torch.tensor([prompts[completion.request_id] + completion.token_ids])
        with torch.no_grad():
            learner = token_logprobs(model, ids, torch.ones_like(ids))[
                0, -len(completion.token_ids) :
            ]
        gaps.append(learner - torch.tensor(completion.logprobs))
    gap = torch.cat(gaps)
    ratio = gap.exp()
    outside = (ratio < DIS_WINDOW[0]) | (ratio > DIS_WINDOW[1])
    return {
        "mean_abs_gap": gap.abs().mean().item(),
        "max_abs_gap": gap.abs().max().item(),
        "mean_gap": gap.mean().item(),
        "frac_outside_dis_window": outside.float().mean().item(),
        "tokens": gap.numel(),
    }


def main() -> None:
    """Parse arguments, measure each policy in fp32 and bf16, print (and optionally save) figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per request")
    parser.add_argument("--sharpen", type=float, default=8.0, help="output-layer scale")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", type=Path, default=None, help="a saved model to measure")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    if args.model is not None:
        loaded, tokenizer = load_policy(args.model)
        models = [(args.model.name, loaded)]
    else:
        tokenizer = build_tokenizer()
        initial = build_tiny_policy(tokenizer, seed=args.seed)
        sharp = copy.deepcopy(initial)
        with torch.no_grad():
            sharp.lm_head.weight.mul_(args.sharpen)
        models = [("initial", initial), (f"sharpened_x{args.sharpen:g}", sharp)]
    figures: dict[str, dict[str, float]] = {}
    for name, model in models:
        for precision in ("fp32", "bf16"):
            key = f"{name}/{precision}"
            figures[key] = measure(
                model, tokenizer, precision, args.requests, args.tokens, args.seed
            )
            row = figures[key]
            print(
                f"{key:>24}: mean|gap| {row['mean_abs_gap']:.2e}  max|gap| {row['max_abs_gap']:.2e}"
                f"  mean gap {row['mean_gap']:+.2e}  outside DIS window "
                f"{row['frac_outside_dis_window']:.4f}  ({row['tokens']} tokens)"
            )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
