"""How big each run of `sao reproduce` is: `quick` (a check in minutes) or `full` (the study).

Both start every arm from the environment's real warm start (`checkpoints/warm_start_<env>`,
which `sao train` uses too and builds with the environment's `sft` settings if missing): a smaller
SFT left calc unsolved (200 steps of 32: held-out pass@1 0.00, every training reward 0 over 20
steps; 200 of 64: 0.01, then 0.03 after 20 steps), so nothing could be compared from it.
`full` runs every arm at the environment's own defaults; `quick` cuts the runs, sized so one
claim over 3 seeds (2 arms, 6 runs) fits in 20 minutes on 2 idle cores, the warm start included
when it has to be built (claim c took about 7 minutes that way: docs/reproduce/README.md).

Claim (h)'s arms (`Arm.timed`) add the budget's `timed` overrides: held-out evals at points of
trajectories (`train.eval_every` steps of `train.batch_size`) and of training time
(`train.eval_every_s`), so each run has an accuracy curve against both. A quick calc run trains
a learner step in about a second on 2 cores (20 steps: ~20 s of training time), hence points
every 5 s; a full one runs minutes, hence 30 s.
"""

from __future__ import annotations

from dataclasses import dataclass

QUICK_CALC: tuple[str, ...] = (
    "critic.pretrain.num_trajectories=32",
    "critic.pretrain.max_steps=20",
    "critic.pretrain.batch_size=16",
    "rollout.concurrency=16",
    "train.batch_size=16",
    "train.steps=20",
    "train.eval_every=0",
    "train.eval_n=100",
    "train.checkpoint_every=5",
)

# 12 steps of 16 (~7 s a step on 2 cores); 50 held-out tasks per eval, since a timed arm evals often.
QUICK_CODE_REPAIR: tuple[str, ...] = (
    "critic.pretrain.num_trajectories=32",
    "critic.pretrain.max_steps=20",
    "critic.pretrain.batch_size=16",
    "rollout.concurrency=16",
    "train.batch_size=16",
    "train.steps=12",
    "train.eval_every=0",
    "train.eval_n=50",
    "train.checkpoint_every=4",
)

# Three 10-step phases: the preference moves every 10 learner steps of 16 one-rollout prompts.
# Task options stated in full: the quick study does not follow edits of the packaged file.
QUICK_STYLE_STREAM: tuple[str, ...] = (
    "critic.pretrain.num_trajectories=32",
    "critic.pretrain.max_steps=20",
    "critic.pretrain.batch_size=16",
    "rollout.concurrency=16",
    "train.batch_size=16",
    "train.steps=30",
    "train.eval_every=0",
    "train.eval_n=50",
    "train.checkpoint_every=5",
    "env.task_options={switch_every: 160, schedule: [cute, chuunibyou, classical], "
    "request_rate: 0.2}",
)


@dataclass(frozen=True)
class Budget:
    """Overrides per environment, over its defaults and under each arm's own."""

    name: str
    overrides: dict[str, tuple[str, ...]]
    timed: tuple[str, ...] = ()
    """Eval points of claim (h)'s arms, over the environment's overrides."""

    def overrides_for(self, env: str) -> tuple[str, ...]:
        return self.overrides.get(env, ())


BUDGETS: dict[str, Budget] = {
    "quick": Budget(
        "quick",
        {"calc": QUICK_CALC, "code_repair": QUICK_CODE_REPAIR, "style_stream": QUICK_STYLE_STREAM},
        timed=("train.eval_every=4", "train.eval_every_s=5"),
    ),
    "full": Budget("full", {}, timed=("train.eval_every=10", "train.eval_every_s=30")),
}
