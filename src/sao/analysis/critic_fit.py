"""`sao inspect critic-ceiling fitted`: how much of the return variance can a critic explain on an
environment, for one fixed policy?

Two answers, both on fresh tasks, to read beside the `critic/vf_explained_var` a run logs:

- **prompt only**: the share of `Var(R)` that lies between tasks, `Var(p_task) / Var(R)`, with
  `p_task` the policy's success rate on the task (estimated without bias from `--samples` draws per
  task). A perfect critic that has read only the prompt explains exactly this much; the rest is
  the luck of the sampled tokens, which a critic can only explain from the tokens themselves;
- **fitted offline**: a critic built as `sao train` builds it (from the policy, every parameter
  training, as in value pretraining) fitted to Monte-Carlo returns on the trajectories of 3/4 of
  the tasks for `--steps` optimizer steps, its explained variance measured on the other 1/4 of the
  tasks every `--every` steps: pooled over action tokens (the learner's measure), at each
  trajectory's first action token (where it knows only the prompt) and at its last. (The fit runs
  in chunks of `--every` steps, each with a fresh Adam state.)

The online critic of a run faces a moving policy, K=2 updates per batch and fresh prompts; a
critic fitted here to a fixed policy on many more trajectories bounds what that one can reach with
this model. Example (calc, the warm start and a trained policy):

    sao inspect critic-ceiling fitted --policy checkpoints/warm_start_calc --tasks 256 --samples 4
    sao inspect critic-ceiling fitted --policy runs/calc_sao/policy --tasks 256 --samples 4
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sao.analysis.runs import InspectError

if TYPE_CHECKING:
    from sao.config import SAOConfig
    from sao.models.critic import ValueModel
    from sao.trajectory import Trajectory

_SEED_OFFSET = 104_729


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", required=True, help="policy directory")
    parser.add_argument("--env", default="calc")
    parser.add_argument("--preset", default="sao")
    parser.add_argument("--tasks", type=int, default=256)
    parser.add_argument("--samples", type=int, default=4, help="trajectories per task")
    parser.add_argument("--steps", type=int, default=800, help="critic optimizer steps")
    parser.add_argument("--every", type=int, default=200, help="steps between held-out checks")
    parser.add_argument("--seed", type=int, default=0)


def between_task_share(rewards_by_task: Sequence[Sequence[float]]) -> float:
    """`Var(p_task) / Var(R)`: the share of the return variance a prompt-only predictor explains.

    Each task's `k` rewards give `mean` and the unbiased within-task variance `s2`; the spread of
    the task means overstates `Var(p_task)` by `E[s2] / k`, which is taken off."""
    groups = [list(map(float, r)) for r in rewards_by_task if len(r) >= 2]
    if not groups:
        raise ValueError("between_task_share: need at least one task with 2 or more samples")
    k = min(len(g) for g in groups)
    groups = [g[:k] for g in groups]
    means = [sum(g) / k for g in groups]
    within = [sum((x - m) ** 2 for x in g) / (k - 1) for g, m in zip(groups, means, strict=True)]
    grand = sum(means) / len(means)
    spread = sum((m - grand) ** 2 for m in means) / max(len(means) - 1, 1)
    between = max(spread - sum(within) / len(within) / k, 0.0)
    total = sum((x - grand) ** 2 for g in groups for x in g) / (k * len(groups))
    return between / total if total > 0 else math.nan


def held_out_report(
    critic: ValueModel, trajectories: Sequence[Trajectory], config: SAOConfig, pad_token_id: int
) -> dict[str, float]:
    """Explained variance of Monte-Carlo returns on `trajectories`: pooled over action tokens, at
    the first action token and at the last."""
    import torch

    from sao.core.advantages import token_gae
    from sao.core.metrics import explained_variance
    from sao.learner.chunking import packed_forward, packing_cost_for
    from sao.trajectory import collate

    batch = collate(list(trajectories), pad_token_id)
    with torch.no_grad():
        values = packed_forward(
            lambda ids, pos: critic(ids, None, pos),
            batch.input_ids,
            batch.attention_mask,
            config.train.micro_batch_tokens,
            packing_cost_for(critic),
        )
    mask = batch.action_mask
    _, returns = token_gae(batch.rewards, torch.zeros_like(values), mask, config.algo.gamma)
    m = mask > 0
    positions = torch.arange(mask.shape[1]).expand_as(mask)
    first = torch.where(m, positions, mask.shape[1]).min(dim=1).values
    last = torch.where(m, positions, -1).max(dim=1).values
    rows = torch.arange(mask.shape[0])
    ones = torch.ones(mask.shape[0])
    return {
        "ev_pooled": explained_variance(values, returns, mask),
        "ev_first_token": explained_variance(values[rows, first], returns[rows, first], ones),
        "ev_last_token": explained_variance(values[rows, last], returns[rows, last], ones),
    }


def run(args: argparse.Namespace) -> int:
    if args.samples < 2 or args.tasks < 8:
        raise InspectError("--samples must be >= 2 and --tasks >= 8")
    import torch

    from sao.config import load_config
    from sao.envs.registry import make_task_source
    from sao.learner.value_pretrain import pretrain_value
    from sao.models.critic import ValueModel
    from sao.models.policy import load_policy
    from sao.preflight import check_policy_dir
    from sao.rollout.setup import build_agent_loop

    check_policy_dir(args.policy, "--policy")
    config = load_config(
        args.preset,
        overrides=[
            f"env.name={args.env}",
            f"train.seed={args.seed}",
            f"model.path={args.policy}",
            f"critic.pretrain.max_steps={args.every}",
            "critic.pretrain.ev_threshold=1.0",
        ],
    )
    torch.manual_seed(args.seed)
    policy, tokenizer = load_policy(args.policy)
    tasks = make_task_source(config.env.name, **config.env.task_options).train(
        args.tasks, args.seed + _SEED_OFFSET
    )
    started = time.perf_counter()
    loop = build_agent_loop(config, policy, tokenizer, seed=args.seed + _SEED_OFFSET)
    try:
        jobs = [
            (f"t{i}-s{j}", task, {"index": -1 - i, "task": i})
            for i, task in enumerate(tasks)
            for j in range(args.samples)
        ]
        trajectories = loop.run(jobs)
    finally:
        loop.close()
    sampled_s = time.perf_counter() - started
    by_task: dict[int, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        by_task[int(t.metadata["task"])].append(t)
    rewards = [[t.reward for t in by_task[i]] for i in sorted(by_task)]
    cut = len(tasks) * 3 // 4
    train = [t for i in range(cut) for t in by_task[i]]
    held_out = [t for i in range(cut, len(tasks)) for t in by_task[i]]
    result: dict[str, object] = {
        "policy": args.policy,
        "env": args.env,
        "tasks": len(tasks),
        "samples": args.samples,
        "reward_mean": sum(map(sum, rewards)) / sum(map(len, rewards)),
        "prompt_only_share": between_task_share(rewards),
        "train_trajectories": len(train),
        "held_out_trajectories": len(held_out),
        "sampled_s": round(sampled_s, 1),
        "curve": [],
    }
    critic = ValueModel.from_policy(policy)
    critic.eval()
    for chunk, done in enumerate(range(args.every, args.steps + 1, args.every)):
        # Each call starts a fresh optimizer and shuffle; a new seed per call makes the next
        # chunk draw other mini-batches when `--every` steps are less than an epoch.
        chunk_config = config.model_copy(
            update={"train": config.train.model_copy(update={"seed": args.seed + chunk})}
        )
        pretrain_value(critic, train, chunk_config, tokenizer.pad_token_id, progress=False)
        row = {"steps": done, **held_out_report(critic, held_out, config, tokenizer.pad_token_id)}
        result["curve"].append(row)  # type: ignore[union-attr]
        print(json.dumps(row), flush=True)
    print(json.dumps(result))
    return 0
