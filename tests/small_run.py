"""The settings that make a whole `sao train` run tiny enough for a test (seconds on 2 cores)."""

from sao.config import SAOConfig, load_config

SMALL_RUN = [
    "train.batch_size=4",
    "rollout.concurrency=4",
    "rollout.max_new_tokens=12",
    "env.max_tokens=96",
    "env.max_turns=2",
    "train.eval_n=4",
    "train.eval_every=0",
    "critic.pretrain.num_trajectories=4",
    "critic.pretrain.max_steps=2",
    "critic.pretrain.batch_size=4",
]


def small_config(policy_dir: object, *extra: str) -> SAOConfig:
    """`sao` with `SMALL_RUN`, training the policy saved at `policy_dir`, then `extra`."""
    return load_config("sao", None, [*SMALL_RUN, f"model.path={policy_dir}", *extra])
