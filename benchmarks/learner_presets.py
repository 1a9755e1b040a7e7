"""Learner time per batch, preset against preset, side by side in one run.

What one learner step of each preset costs on the same trajectories. SAO's step runs the actor
once and its critic (a copy of the policy, attention frozen) forward once and forward + backward
`K` times; GRPO's runs the actor over 4 PPO mini-batches and has no critic. Where episodes are
short this hides behind sampling; where they are long the learner can be what a run waits on
(`perf/learner_idle_frac` near 0). Each preset's `Learner` starts from the same policy weights;
steps are timed interleaved after a warm-up and medians compared: `ratio_<preset>` is its median
step over the first preset's (`*_cpu`: the same with this process's CPU time, which other jobs
on a shared machine disturb less than wall time).

Trajectories: synthetic ones of `--shape` (`benchmarks/learner.py`), or the first `--batch` of a
run's `trajectories.jsonl` (`--trajectories`) with a policy of their tokenizer (`--model`, e.g.
the warm start the run began from).

    python benchmarks/learner_presets.py [--presets sao,grpo,grpo_dis] [--shape calc|code_repair]
        [--trajectories RUN/trajectories.jsonl --model POLICY_DIR] [--batch 32] [--repeats 3]
        [--threads N] [--seed 0] [--json PATH]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import statistics
import sys
from pathlib import Path

import torch

from learner import SHAPES, report, synthetic_trajectories, timed
from sao.config import load_config
from sao.learner import Learner
from sao.learner.actor_update import update_rows
from sao.models import build_tiny_policy, build_tokenizer
from sao.models.policy import load_policy
from sao.trajectory import Trajectory


def read_trajectories(path: Path, count: int) -> list[Trajectory]:
    """The first `count` trajectories of a run's `trajectories.jsonl`."""
    out = []
    with path.open() as lines:
        for line in lines:
            if len(out) == count:
                break
            if line.strip():
                out.append(Trajectory.from_dict(json.loads(line)))
    if len(out) < count:
        sys.exit(f"{path}: holds {len(out)} trajectories, {count} are needed")
    return out


def main() -> None:
    """Parse arguments, time each preset's learner step, print (and optionally write) them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="sao,grpo,grpo_dis", help="comma-separated")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="code_repair")
    parser.add_argument("--trajectories", type=Path, default=None, help="a trajectories.jsonl")
    parser.add_argument("--model", type=Path, default=None, help="policy for --trajectories")
    parser.add_argument("--batch", type=int, default=32, help="trajectories per step")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per preset (median)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    presets = [p for p in args.presets.split(",") if p]
    if args.batch < 1 or args.repeats < 1 or not presets:
        parser.error("--batch and --repeats must be >= 1, --presets must name one or more")
    if (args.trajectories is None) != (args.model is None):
        parser.error("--trajectories and --model go together")

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.model is not None:
        policy, tokenizer = load_policy(args.model)
        trajectories = read_trajectories(args.trajectories, args.batch)
    else:
        tokenizer = build_tokenizer()
        policy = build_tiny_policy(tokenizer, seed=args.seed)
        trajectories = synthetic_trajectories(
            policy, len(tokenizer), args.batch, args.seed, args.shape
        )
    configs = {p: load_config(p) for p in presets}
    learners = {
        p: Learner(copy.deepcopy(policy), c, pad_token_id=tokenizer.pad_token_id)
        for p, c in configs.items()
    }
    # GRPO-style presets read each trajectory's group from its metadata: consecutive runs of
    # `group_size`, as the scheduler admits them.
    batches = {
        p: [
            dataclasses.replace(t, metadata={**t.metadata, "group_id": i // c.rollout.group_size})
            for i, t in enumerate(trajectories)
        ]
        for p, c in configs.items()
    }
    device = learners[presets[0]].device
    for p in presets:  # warm-up: first calls pay one-off allocation and dispatch costs
        learners[p].step(batches[p])
    times: dict[str, list[tuple[float, float]]] = {p: [] for p in presets}
    for _ in range(args.repeats):
        for p in presets:
            times[p].append(timed(lambda p=p: learners[p].step(batches[p]), device))

    first = presets[0]
    wall = {p: statistics.median(t[0] for t in times[p]) for p in presets}
    cpu = {p: statistics.median(t[1] for t in times[p]) for p in presets}
    result: dict[str, object] = {
        "source": str(args.trajectories) if args.trajectories else f"synthetic {args.shape}",
        "torch_threads": torch.get_num_threads(),
        "batch": args.batch,
        "tokens": sum(len(t.token_ids) for t in trajectories),
        "action_tokens": sum(sum(t.action_mask) for t in trajectories),
        "repeats": args.repeats,
    }
    for p in presets:
        c = configs[p]
        result[f"{p}_step_s_median"] = wall[p]
        result[f"{p}_critic_k_updates"] = c.critic.k_updates if c.critic.enabled else 0
        result[f"{p}_actor_updates"] = len(update_rows(c.algo, args.batch))
        result[f"ratio_{p}"] = wall[p] / wall[first]
        result[f"ratio_{p}_cpu"] = cpu[p] / cpu[first]
    report(result, args.json, width=28)


if __name__ == "__main__":
    main()
