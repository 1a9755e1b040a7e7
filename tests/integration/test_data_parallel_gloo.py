"""Data-parallel learner ranks, on CPU: two processes in a gloo group each train their part of
the batch (FSDP2-sharded models) and must take the update one process takes on the whole batch:
the same weights after the step and the same whole-batch metrics, while each rank's policy
computes about half of the tokens. Covered: DIS with K=2 critic updates and whitened GAE
advantages (token-mean); PPO mini-batches with group advantages (seq-mean-token-mean), whose
one-trajectory mini-batches leave a rank without a trajectory; a batch of one trajectory, which
leaves rank 1 with nothing at all."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from fixtures_models import random_qwen3_moe
from sao.config import load_config
from sao.learner import Learner
from sao.models.critic import ValueModel
from sao.models.policy import token_logprobs
from sao.trajectory import Trajectory

VOCAB = 64
LENGTHS = (9, 20, 12, 16, 7, 14)
SCENARIOS: dict[str, tuple[str, list[str], int]] = {
    "dis_critic_k2_whitened": (
        "sao",
        ["critic.k_updates=2", "algo.whiten_advantages=true"],
        len(LENGTHS),
    ),
    "ppo_group_seq_mean": (
        "grpo",
        ["algo.ppo_minibatches=4", "algo.agg=seq-mean-token-mean"],
        len(LENGTHS),
    ),
    "one_trajectory_ppo_critic": ("vapo_nodis", ["algo.ppo_minibatches=1"], 1),
    "dis_minibatches_with_a_one_row_slice": ("sao_mb4", [], len(LENGTHS)),
}
COMPARED = (
    "actor/pg_loss",
    "actor/grad_norm",
    "actor/entropy",
    "actor/ratio_mean",
    "actor/advantage_mean",
    "critic/vf_loss",
    "critic/grad_norm",
    "critic/vf_explained_var",
    "critic/returns_var",
    "critic/values_mean",
    "critic/returns_mean",
    "learner/rank_tokens_total",
)


def trajectories(policy: torch.nn.Module, n: int) -> list[Trajectory]:
    """Trajectories of unequal lengths and action-token counts, sampled by `policy` and then
    shifted off its log-probs a little so the ratios are not all 1."""
    gen = torch.Generator().manual_seed(1)
    out = []
    for i, length in enumerate(LENGTHS[:n]):
        ids = torch.randint(1, VOCAB, (length,), generator=gen)
        prompt = 3 + i % 3
        mask = [0] * prompt + [1] * (length - prompt)
        with torch.no_grad():
            logprobs = token_logprobs(policy, ids[None], torch.ones(1, length))[0]
        noise = 0.1 * torch.randn(length, generator=gen)
        out.append(
            Trajectory(
                token_ids=ids.tolist(),
                action_mask=mask,
                rollout_logprobs=[
                    float(lp + e) * m for lp, e, m in zip(logprobs, noise, mask, strict=True)
                ],
                policy_versions=[0 if m else -1 for m in mask],
                reward=float(i % 3) / 2,
                turn_spans=((prompt, length),),
                metadata={"index": i, "group_id": i // 3},
            )
        )
    return out


def run_scenario(name: str) -> dict[str, Any]:
    """One step of a fresh learner on the scenario's batch: metrics, weights and how many
    tokens the policy's forward passes took in."""
    preset, overrides, n = SCENARIOS[name]
    config = load_config(preset, overrides=["actor.lr=1e-3", "critic.optim.lr=1e-3", *overrides])
    policy = random_qwen3_moe(VOCAB, hidden_size=32)
    batch = trajectories(policy, n)
    # The critic is built before the learner shards the policy (a sharded model cannot be copied).
    critic = ValueModel.from_policy(policy) if config.critic.enabled else None
    learner = Learner(policy, config, critic)
    seen = [0]

    def count(_module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        seen[0] += args[0].numel()

    hook = learner.policy.model.embed_tokens.register_forward_pre_hook(count)
    metrics = learner.step(batch)
    hook.remove()
    return {"metrics": metrics, "weights": learner.policy_state_dict(), "tokens": seen[0]}


def rank_main(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        result = {name: run_scenario(name) for name in SCENARIOS}
        torch.save(result, f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("ranks") / "result"
    mp.spawn(rank_main, args=(free_port(), str(out)), nprocs=2, join=True)
    return [torch.load(f"{out}.{rank}", weights_only=False) for rank in range(2)]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_two_data_parallel_ranks_take_the_one_process_update(
    two_ranks: list[dict[str, Any]], name: str
) -> None:
    whole = run_scenario(name)
    for rank in two_ranks:
        got = rank[name]
        for key in (k for k in COMPARED if k in whole["metrics"]):
            assert got["metrics"][key] == pytest.approx(
                whole["metrics"][key], rel=1e-4, abs=1e-6, nan_ok=True
            ), key
        # Adam's steps are about lr * sign(g) (lr 1e-3 here): where a gradient is near 0, the
        # ranks' other summation order moves a weight by ~1e-6. 1e-5 is 1% of one step, far
        # below what a wrong share of the batch would do.
        for key, want in whole["weights"].items():
            torch.testing.assert_close(got["weights"][key], want, rtol=1e-4, atol=1e-5, msg=key)
    start = random_qwen3_moe(VOCAB, hidden_size=32).state_dict()
    assert any(not torch.equal(start[k], whole["weights"][k]) for k in start)  # it moved


def test_each_rank_computes_about_half_of_the_tokens(two_ranks: list[dict[str, Any]]) -> None:
    name = "dis_critic_k2_whitened"
    whole = run_scenario(name)
    total = sum(LENGTHS)
    assert whole["metrics"]["learner/rank_tokens_max"] == total
    assert whole["metrics"]["learner/rank_tokens_total"] == total
    # Largest-first onto the lighter rank: 20 + 12 + 7 = 39 and 16 + 14 + 9 = 39.
    assert two_ranks[0][name]["metrics"]["learner/rank_tokens_max"] == 39
    assert two_ranks[0][name]["metrics"]["learner/rank_tokens_total"] == total
    for rank in two_ranks:
        share = rank[name]["tokens"] / whole["tokens"]
        assert 0.35 < share < 0.65, share
    # The padding of the ranks' passes together: the same number on both ranks.
    padding = [rank[name]["metrics"]["perf/padding_frac"] for rank in two_ranks]
    assert padding[0] == padding[1] and 0.0 <= padding[0] < 1.0
    # The single trajectory: rank 1 holds only a stand-in and computes (almost) nothing of it.
    lone = [rank["one_trajectory_ppo_critic"]["metrics"] for rank in two_ranks]
    assert lone[0]["learner/rank_tokens_max"] == lone[0]["learner/rank_tokens_total"] == 9
