"""`sao train --quick`: the whole pipeline at toy size, for a first try and for tests.

Warm start, value pretraining, a few learner steps, held-out evals, plots and summary all run,
each far too small to learn much: the point is to see every stage work in about a minute on two
cores. The overlay goes over the environment's defaults and any `--config` file, and under the
user's own `--set`, `--steps` and `--out`, so those still win. Its warm start and run directory
have names of their own, so a toy policy never stands in for a real warm start. The turn budget
(`rollout.max_new_tokens`) stays the environment's: a shorter one cuts actions the environment
needs whole, such as a `tool_calc` call of about 80 tokens.
"""

from __future__ import annotations

QUICK_OVERRIDES: tuple[str, ...] = (
    "model.warm_start_dir=checkpoints/warm_start_{env}_quick",
    "train.out=runs/quick_{env}_{preset}",
    "sft.steps=30",
    "sft.batch_size=16",
    "sft.warmup_steps=5",
    "sft.num_demonstrations=256",
    "sft.checkpoint_every=10",
    "critic.pretrain.num_trajectories=16",
    "critic.pretrain.max_steps=8",
    "critic.pretrain.batch_size=8",
    "rollout.concurrency=8",
    "train.batch_size=8",
    "train.steps=6",
    "train.eval_every=3",
    "train.eval_n=16",
    "train.checkpoint_every=2",
)
