"""FSDP2 sharding of the learner, on CPU: two processes in a gloo group shard the policy and the
critic with `fully_shard`, take one learner step on the same batch, and must match an unsharded
learner's step (loss, metrics and the weights after the step). The sharded learner's checkpoint
state must be the unsharded learner's, and a new sharded learner loading it must take the same
second step."""

from __future__ import annotations

import copy
import os
import socket
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from fixtures_models import random_qwen3_moe
from sao.config import load_config
from sao.learner import Learner
from sao.learner.sharding import is_sharded, shard_units, should_shard, world_size
from sao.models.critic import ValueModel
from sao.models.policy import token_logprobs
from sao.trajectory import Trajectory

VOCAB = 64
OVERRIDES = ["actor.lr=1e-3", "critic.optim.lr=1e-3", "critic.k_updates=1"]
NORMS_AND_LOSSES = (
    "actor/pg_loss",
    "actor/grad_norm",
    "critic/vf_loss",
    "critic/grad_norm",
    "critic/grad_norm_shared",
    "critic/grad_norm_all",
)


def trajectories(policy: torch.nn.Module) -> list[Trajectory]:
    gen = torch.Generator().manual_seed(1)
    out = []
    for i in range(4):
        ids = torch.randint(1, VOCAB, (12,), generator=gen)
        mask = [0] * 4 + [1] * 8
        with torch.no_grad():
            logprobs = token_logprobs(policy, ids[None], torch.ones(1, 12))[0]
        out.append(
            Trajectory(
                token_ids=ids.tolist(),
                action_mask=mask,
                rollout_logprobs=[float(lp) * m for lp, m in zip(logprobs, mask, strict=True)],
                policy_versions=[0 if m else -1 for m in mask],
                reward=float(i % 2),
                turn_spans=((4, 12),),
                metadata={"index": i},
            )
        )
    return out


def new_learner(policy: torch.nn.Module) -> Learner:
    return Learner(policy, load_config("sao", overrides=OVERRIDES), ValueModel.from_policy(policy))


def two_steps() -> dict[str, Any]:
    """Step, checkpoint state, then a new learner resumed from that state takes a second step."""
    policy = random_qwen3_moe(VOCAB, hidden_size=32)
    batch = trajectories(policy)
    learner = new_learner(policy)
    first = learner.step(batch)
    state = learner.state_dict()
    weights = learner.policy_state_dict()
    resumed = new_learner(random_qwen3_moe(VOCAB, hidden_size=32))
    resumed.load_state_dict(copy.deepcopy(state))  # as read from disk: nothing shared
    second = resumed.step(batch)
    return {
        "metrics": first,
        "weights": weights,
        "sharded": is_sharded(learner.policy),
        "state": state,
        "second": second,
        "version": resumed.version,
    }


def rank_main(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        result = two_steps()
        if rank == 0:
            torch.save(result, out)
        # Neither rank tears gloo down while the other may still be in a collective: a rank
        # that destroys its group early can abort its peer.
        dist.barrier()
    finally:
        dist.destroy_process_group()


def assert_same_tree(got: Any, want: Any, path: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for key in want:
            assert_same_tree(got[key], want[key], f"{path}/{key}")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same_tree(g, w, f"{path}/{i}")
    elif isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6, msg=path)
    else:
        assert got == want, path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_two_rank_fsdp2_learner_matches_the_unsharded_one(tmp_path: Path) -> None:
    out = tmp_path / "rank0.pt"
    mp.spawn(rank_main, args=(free_port(), str(out)), nprocs=2, join=True)
    sharded = torch.load(out, weights_only=False)
    whole = two_steps()

    assert sharded["sharded"] and not whole["sharded"]
    for step in ("metrics", "second"):
        for key in NORMS_AND_LOSSES:
            got, want = sharded[step][key], whole[step][key]
            assert got == pytest.approx(want, rel=1e-4, abs=1e-6), (step, key)
    assert_same_tree(sharded["weights"], whole["weights"])
    assert_same_tree(sharded["state"], whole["state"])  # a checkpoint is the same on any ranks
    assert sharded["version"] == whole["version"] == 2
    start = random_qwen3_moe(VOCAB, hidden_size=32).state_dict()
    assert any(not torch.equal(start[k], whole["weights"][k]) for k in start)  # steps moved it


def test_the_wrapping_decision() -> None:
    assert world_size() == 1
    assert not should_shard(1) and should_shard(2)
    with pytest.raises(ValueError, match="ranks must be >= 1"):
        should_shard(0)
    policy = random_qwen3_moe(VOCAB, hidden_size=32)
    units = shard_units(policy)
    assert units[:-1] == list(policy.model.layers) and units[-1] is policy
