"""Value pretraining's data: trajectories sampled from the frozen initial policy.

The paper stresses *more* pretraining data than usual: `critic.pretrain.num_trajectories` defaults
to several batches' worth. The tasks come from the training split under a seed of their own, so
they are not the first prompts of the RL stream.
"""

from __future__ import annotations

import time

from tqdm import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao.config import SAOConfig
from sao.envs.registry import make_task_source
from sao.learner.precision import resolve_device
from sao.learner.value_pretrain import pretrain_value
from sao.models.critic import ValueModel
from sao.plumbing.stopped import RunStopped
from sao.rollout.setup import build_agent_loop
from sao.runtime.env_errors import is_env_error
from sao.trajectory import Trajectory

_PRETRAIN_SEED_OFFSET = 7_919


def sample_initial_trajectories(
    config: SAOConfig,
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    n: int,
    progress: bool = False,
) -> list[Trajectory]:
    """`n` episodes of the (frozen) initial policy on training tasks, those whose environment
    raised included (see `run_value_pretraining`); `progress` shows a bar (minutes on a
    pretrained model)."""
    source = make_task_source(config.env.name, **config.env.task_options)
    tasks = source.train(n, config.train.seed + _PRETRAIN_SEED_OFFSET)
    loop = build_agent_loop(
        config, policy, tokenizer, seed=config.train.seed + _PRETRAIN_SEED_OFFSET
    )
    episodes = [(f"pretrain-{i}", t, {"index": -1 - i}) for i, t in enumerate(tasks)]
    try:
        with tqdm(
            total=n, desc="value pretraining data", disable=not progress, dynamic_ncols=True
        ) as bar:
            return loop.run(episodes, on_finished=bar.update)
    finally:
        loop.close()


def run_value_pretraining(
    config: SAOConfig,
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    critic: ValueModel,
    progress: bool = True,
) -> list[dict[str, float]]:
    """Sample the pretraining data, then fit the critic on its Monte-Carlo returns.

    Episodes whose environment raised are left out (their 0 is not the policy's return;
    `sao.runtime.env_errors`), and so are those whose `reset` raised (no trajectory). When that
    leaves nothing to fit, the run stops with one line.
    """
    t0 = time.perf_counter()
    wanted = config.critic.pretrain.num_trajectories
    sampled = sample_initial_trajectories(config, policy, tokenizer, wanted, progress)
    trajectories = [t for t in sampled if not is_env_error(t)]
    errors = wanted - len(trajectories)
    if errors:
        print(f"value pretraining: {errors} of {wanted} episodes ended in an environment error")
    if not trajectories:
        raise RunStopped(
            f"value pretraining: all {wanted} episodes ended in an environment error, so there "
            "is nothing to fit the critic on"
        )
    sampled_s = time.perf_counter() - t0
    critic.to(resolve_device(config.train.learner_device))  # trained where the learner trains it
    curve = pretrain_value(critic, trajectories, config, tokenizer.pad_token_id, progress=progress)
    if curve:
        last = curve[-1]
        held_out = last.get("critic/vf_explained_var_heldout")
        on_held_out = (
            f", {held_out:.3f} on the {config.critic.pretrain.holdout_trajectories} held out"
            if held_out is not None
            else " (on the trajectories trained on)"
        )
        print(
            f"value pretraining: {len(trajectories)} trajectories ({sampled_s:.0f}s), "
            f"{len(curve)} steps, explained variance {last['critic/vf_explained_var']:.3f}"
            f"{on_held_out}"
        )
    return curve
