"""Learner step overhead: one `Learner.step` against the bare passes it contains.

The bare reference runs, on the same collated tokens, exactly the network work a step cannot
avoid: the actor's forward + backward once and the critic's forward + backward `K` times. The
learner step adds everything else (collation, GAE, losses, metrics, gradient clipping, the AdamW
steps). Both are timed interleaved, after a warm-up, `--repeats` times; medians are compared.
`overhead_ratio` = median step / median bare.

The step runs its passes over packed sequences (`sao.learner.chunking.packed_forward`), its
models attending segment by segment (`sao_packed`, `sao.models.packed_attention`;
`segment_attention` says whether they took it): `padding_frac` is the fraction of the tokens
those passes compute that are padding, beside `batch_padding_frac` (the right-padded batch) and
`chunked_padding_frac` (length-sorted padded passes). Two more learners, with transformers'
`sdpa` attention, are timed in the same rounds: one with length-sorted padded passes
(`packed_speedup` = its median step / the packed step's; the same tokens are trained, so this is
the ratio per trained token) and one with one full-batch pass per forward (`chunked_speedup` =
its median step / the length-sorted step's). `*_cpu` ratios use this process's CPU time, which
other jobs on a shared machine disturb far less than wall time. `--shape code_repair` draws longer multi-turn
trajectories (~150 to ~1000 tokens) like that environment's, where padding is the larger share.

    python benchmarks/learner.py [--batch 32] [--repeats 5] [--shape calc|code_repair]
        [--device cpu] [--threads N] [--json PATH]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import PreTrainedModel

from sao.config import load_config
from sao.learner import Learner
from sao.learner.chunking import chunked_padding_frac, packed_padding_frac
from sao.models import build_tiny_policy, build_tokenizer, token_logprobs
from sao.models.critic import ValueModel
from sao.trajectory import Batch, Trajectory, collate

# (prompt, turns, action, observation, final answer) token ranges of each shape.
SHAPES = {
    "calc": ((12, 32), (1, 3), (8, 48), (4, 16), (4, 24)),
    "code_repair": ((120, 220), (1, 7), (6, 60), (4, 160), (4, 12)),
}


def synthetic_trajectories(
    policy: PreTrainedModel, vocab_size: int, count: int, seed: int, shape: str = "calc"
) -> list[Trajectory]:
    """Multi-turn trajectories of mixed lengths (calc: about 40 to 200 tokens; code_repair: about
    150 to 1000) with the policy's own log-probs, so the DIS ratios are 1 as after a rollout."""
    prompt, turns, action, observation, answer = SHAPES[shape]
    rng = random.Random(seed)
    device = next(policy.parameters()).device
    out = []
    for i in range(count):
        mask = [0] * rng.randint(*prompt)
        for _ in range(rng.randint(*turns)):  # turns: an action, then an observation
            mask += [1] * rng.randint(*action) + [0] * rng.randint(*observation)
        mask += [1] * rng.randint(*answer)  # the final answer
        ids = [rng.randrange(vocab_size) for _ in mask]
        with torch.no_grad():
            tensor = torch.tensor([ids], device=device)
            logprobs = token_logprobs(policy, tensor, torch.ones_like(tensor))[0].tolist()
        starts = [t for t, m in enumerate(mask) if m and (t == 0 or not mask[t - 1])]
        ends = [t + 1 for t, m in enumerate(mask) if m and (t + 1 == len(mask) or not mask[t + 1])]
        out.append(
            Trajectory(
                token_ids=ids,
                action_mask=mask,
                rollout_logprobs=[lp if m else 0.0 for lp, m in zip(logprobs, mask, strict=True)],
                policy_versions=[0 if m else -1 for m in mask],
                reward=float(i % 3 == 0),
                turn_spans=tuple(zip(starts, ends, strict=True)),
            )
        )
    return out


def bare_passes(policy: PreTrainedModel, critic: ValueModel, batch: Batch, k_updates: int) -> None:
    """Actor forward + backward once, critic forward + backward `k_updates` times."""
    mask = batch.action_mask
    logprobs = token_logprobs(policy, batch.input_ids, batch.attention_mask)
    (-(logprobs * mask).sum() / mask.sum()).backward()
    for _ in range(k_updates):
        values = critic(batch.input_ids, batch.attention_mask)
        ((values * mask) ** 2).sum().div(mask.sum()).backward()
    policy.zero_grad(set_to_none=True)
    critic.zero_grad(set_to_none=True)


def timed(fn: Callable[[], None], device: torch.device) -> tuple[float, float]:
    """`(wall seconds, process CPU seconds)` of `fn()`, synchronising an accelerator around it.

    CPU seconds are reported beside wall time because on a shared machine other processes stretch
    wall time at random, while the CPU time this process spends is far less disturbed.
    """
    if device.type == "cuda":
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - wall, time.process_time() - cpu


def report(result: dict[str, object], path: Path | None, width: int = 22) -> None:
    """Print each number of `result`, one a line, and write them all to `path` as JSON if given."""
    for key, value in result.items():
        print(
            f"{key:>{width}}: {value:.4f}"
            if isinstance(value, float)
            else f"{key:>{width}}: {value}"
        )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2))


def main() -> None:
    """Parse arguments, run the benchmark, print (and optionally write) the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32, help="trajectories per step")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions (median)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="calc")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    if args.batch < 1 or args.repeats < 1:
        parser.error("--batch and --repeats must be >= 1")

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    tokenizer = build_tokenizer()
    policy = build_tiny_policy(tokenizer, seed=args.seed).to(device)
    config = load_config("sao")
    trajectories = synthetic_trajectories(policy, len(tokenizer), args.batch, args.seed, args.shape)
    pad = tokenizer.pad_token_id
    # Copies first: the packed learner switches its models' attention (`sao_packed`), the others
    # keep transformers' `sdpa`.
    chunked = Learner(copy.deepcopy(policy), config, pad_token_id=pad, pack=False)
    one_pass_config = load_config("sao", overrides=["train.micro_batch_tokens=100000000"])
    one_pass = Learner(copy.deepcopy(policy), one_pass_config, pad_token_id=pad, pack=False)
    learner = Learner(copy.deepcopy(policy), config, pad_token_id=pad)
    assert learner.critic is not None
    batch = collate(trajectories, tokenizer.pad_token_id)
    batch = Batch(**{k: v.to(device) for k, v in vars(batch).items()})
    k_updates = config.critic.k_updates

    def step() -> None:
        learner.step(trajectories)

    def bare() -> None:
        bare_passes(learner.policy, learner.critic, batch, k_updates)

    def chunked_step() -> None:
        chunked.step(trajectories)

    def one_pass_step() -> None:
        one_pass.step(trajectories)

    # Warm-up: first calls pay one-off allocation and dispatch costs.
    step()
    bare()
    chunked_step()
    one_pass_step()
    step_times, bare_times, chunked_times, one_pass_times = [], [], [], []
    for _ in range(args.repeats):
        step_times.append(timed(step, device))
        bare_times.append(timed(bare, device))
        chunked_times.append(timed(chunked_step, device))
        one_pass_times.append(timed(one_pass_step, device))
    one_pass_s = statistics.median(t[0] for t in one_pass_times)
    chunked_s = statistics.median(t[0] for t in chunked_times)
    chunked_cpu = statistics.median(t[1] for t in chunked_times)
    lengths = batch.attention_mask.sum(dim=1).tolist()
    micro = config.train.micro_batch_tokens

    step_s, bare_s = (statistics.median(t[0] for t in times) for times in (step_times, bare_times))
    step_cpu, bare_cpu = (
        statistics.median(t[1] for t in times) for times in (step_times, bare_times)
    )
    result = {
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "batch": args.batch,
        "tokens": int(batch.attention_mask.sum()),
        "padded_tokens": batch.attention_mask.numel(),
        "k_updates": k_updates,
        "repeats": args.repeats,
        "step_s_median": step_s,
        "bare_s_median": bare_s,
        "overhead_ratio": step_s / bare_s,
        "step_cpu_s_median": step_cpu,
        "bare_cpu_s_median": bare_cpu,
        "overhead_ratio_cpu": step_cpu / bare_cpu,
        "padding_frac": packed_padding_frac(lengths, micro, learner.packing_cost),
        "segment_attention": learner.packing_cost.segment_attention,
        "chunked_padding_frac": chunked_padding_frac(lengths, micro),
        "batch_padding_frac": batch.padding_frac,
        "shape": args.shape,
        "micro_batch_tokens": micro,
        "chunked_step_s_median": chunked_s,
        "packed_speedup": chunked_s / step_s,
        "packed_speedup_cpu": chunked_cpu / step_cpu,
        "trained_tokens_per_s": int(batch.attention_mask.sum()) / step_s,
        "one_pass_step_s_median": one_pass_s,
        "chunked_speedup": one_pass_s / chunked_s,
    }
    report(result, args.json)


if __name__ == "__main__":
    main()
