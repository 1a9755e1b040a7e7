"""How big each run of `sao reproduce` is: `quick` (a check in minutes) or `full` (the study).

`full` runs every arm at the environment's own defaults from the real warm start
(`checkpoints/warm_start_<env>`, which `sao train` uses too and builds if missing). `quick` is
sized so one claim over 3 seeds (2 arms, 6 runs) takes about 20 minutes on 2 idle cores, its
own smaller warm start included; that warm start lives under `--out`, so a toy policy never
stands in for the real one.
"""

from __future__ import annotations

from dataclasses import dataclass

# 200 SFT steps of 32 demonstrations (loss 0.99) gave a policy that solved no held-out task and
# no training task in 20 steps: every reward 0, nothing to compare. So quick keeps `sao sft`'s
# batches of 64 and cuts only the steps (the default is 500).
QUICK_CALC: tuple[str, ...] = (
    "sft.steps=200",
    "sft.warmup_steps=20",
    "sft.num_demonstrations=8192",
    "sft.checkpoint_every=50",
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

# Three 10-step phases: the preference moves every 10 learner steps of 16 one-rollout prompts.
# The warm start keeps the environment's 600 SFT steps: from 300, `sao` never learnt even the
# first style (`sao/configs/style_stream.yaml`), and a claim about re-adapting needs one learnt.
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
    "env.task_options={switch_every: 160, schedule: [cute, chuunibyou, classical]}",
)


@dataclass(frozen=True)
class Budget:
    """Overrides per environment (over its defaults, under each arm's own) and the warm start."""

    name: str
    overrides: dict[str, tuple[str, ...]]
    warm_start_dir: str
    """Where the shared warm start of an environment lives; `{out}` and `{env}` expand."""

    def overrides_for(self, env: str) -> tuple[str, ...]:
        return self.overrides.get(env, ())

    def warm_start_for(self, env: str, out: str) -> str:
        return self.warm_start_dir.format(out=out, env=env)


BUDGETS: dict[str, Budget] = {
    "quick": Budget(
        "quick",
        {"calc": QUICK_CALC, "style_stream": QUICK_STYLE_STREAM},
        "{out}/warm_start_{env}",
    ),
    "full": Budget("full", {}, "checkpoints/warm_start_{env}"),
}
