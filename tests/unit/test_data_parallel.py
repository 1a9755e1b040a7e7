"""The token-balanced split of a batch across data-parallel learner ranks (pure functions), and
the single-rank group, which must compute exactly what one process computes."""

from __future__ import annotations

import random

import pytest
import torch

from sao.core.advantages import whiten
from sao.core.metrics import explained_variance
from sao.learner.data_parallel import (
    RankGroup,
    balanced_partition,
    normaliser,
    rank_share,
    tie_extra_passes,
)
from sao.trajectory import Trajectory, collate


def test_largest_first_onto_the_lightest_part():
    # 20->A, 16->B, 14->B (30), 12->A (32), 9->B (39), 7->A (39).
    assert balanced_partition([9, 20, 12, 16, 7, 14], 2) == [[1, 2, 4], [0, 3, 5]]
    # Ties: the lower index first, onto the lower part.
    assert balanced_partition([5, 5, 5, 5], 2) == [[0, 2], [1, 3]]
    assert balanced_partition([3], 3) == [[0], [], []]
    assert balanced_partition([], 2) == [[], []]
    # Equal loads: the part with less earlier load first.
    assert balanced_partition([7, 3], 2, earlier=[10, 4]) == [[1], [0]]
    assert balanced_partition([7, 3], 2, earlier=[4, 4]) == [[0], [1]]


@pytest.mark.parametrize("seed", range(20))
def test_every_index_once_deterministic_and_the_largest_load_bounded(seed: int):
    rng = random.Random(seed)
    costs = [rng.randint(0, 1000) for _ in range(rng.randint(1, 60))]
    parts = rng.randint(1, 8)
    split = balanced_partition(costs, parts)
    assert len(split) == parts
    assert sorted(i for part in split for i in part) == list(range(len(costs)))
    assert all(part == sorted(part) for part in split)
    assert balanced_partition(costs, parts) == split
    loads = [sum(costs[i] for i in part) for part in split]
    assert max(loads) <= sum(costs) / parts + max(costs)


def test_bad_partition_input_is_refused():
    with pytest.raises(ValueError, match="parts must be >= 1"):
        balanced_partition([1, 2], 0)
    with pytest.raises(ValueError, match="costs must be >= 0"):
        balanced_partition([1, -2], 2)
    with pytest.raises(ValueError, match="1 earlier loads for 2 parts"):
        balanced_partition([1, 2], 2, earlier=[3])


def test_each_update_is_split_and_an_empty_part_gets_a_masked_stand_in():
    lengths = [10, 30, 20, 5]
    # Two PPO mini-batches over two epochs: [0, 1], [2, 3], [0, 1], [2, 3].
    updates = [[0, 1], [2, 3], [0, 1], [2, 3]]
    zero, one = rank_share(lengths, updates, 0, 2), rank_share(lengths, updates, 1, 2)
    # [0, 1]: 30 to rank 0, 10 to rank 1; [2, 3]: 20 to rank 1, which had less before.
    assert zero.rows == [1, 3] and one.rows == [0, 2]
    assert zero.updates == one.updates == [[0], [1], [0], [1]]
    assert zero.tokens == one.tokens == [35, 30]
    # Many mini-batches of two: each splits one-one, and the totals stay balanced.
    pairs = [[2 * i, 2 * i + 1] for i in range(8)]
    tokens = rank_share([10, 9] * 8, pairs, 0, 2).tokens
    assert tokens == [76, 76]
    # Three ranks: mini-batch [0, 1] has nothing for rank 2, which holds row 0 as a stand-in,
    # and then gets the longest of [2, 3] for having had nothing.
    third = rank_share(lengths, updates[:2], 2, 3)
    assert third.rows == [0, 2] and third.live == [False, True]
    assert third.updates == [[0], [1]]


def test_a_local_batch_keeps_its_rows_trimmed_and_masks_the_stand_ins():
    trajectories = [
        Trajectory(
            token_ids=list(range(1, n + 1)),
            action_mask=[0] + [1] * (n - 1),
            rollout_logprobs=[0.0] + [-1.0] * (n - 1),
            policy_versions=[-1] + [0] * (n - 1),
            reward=float(n),
            turn_spans=((1, n),),
        )
        for n in (3, 6, 4)
    ]
    whole = collate(trajectories)
    share = rank_share([3, 6, 4], [[0, 1, 2]], 0, 1)
    assert share.local_batch(whole).input_ids.tolist() == whole.input_ids.tolist()
    stand_in = rank_share([3, 6, 4], [[0], [2]], 1, 2)  # rank 1: stand-in 0, then row 2
    local = stand_in.local_batch(whole)
    assert stand_in.rows == [0, 2] and stand_in.live == [False, True]
    assert local.input_ids.tolist() == [[1, 2, 3, 0], [1, 2, 3, 4]]  # trimmed from 6 to 4
    assert local.action_mask.tolist() == [[0, 0, 0, 0], [0, 1, 1, 1]]
    assert local.scores.tolist() == [3.0, 4.0]


def test_a_group_of_one_computes_what_one_process_computes():
    group = RankGroup(torch.device("cpu"))
    assert group.size == 1 and group.rank == 0 and group.passes(3) == 3
    gen = torch.Generator().manual_seed(0)
    x, v = torch.randn(3, 5, generator=gen), torch.randn(3, 5, generator=gen)
    mask = (torch.rand(3, 5, generator=gen) > 0.3).float()
    loss = torch.tensor(2.5)
    assert group.scale_loss(loss, mask, "token-mean") is loss
    assert torch.equal(group.whiten(x, mask), whiten(x, mask))
    assert group.explained_variance(v, x, mask) == explained_variance(v, x, mask)
    assert group.mean_metrics({"a": 1.5}, mask, "token-mean") == {"a": 1.5}
    assert group.sum([1, 2.5]) == [1.0, 2.5]


def test_the_normaliser_is_what_the_aggregation_divides_by():
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    assert normaliser(mask, "token-mean") == 4.0
    assert normaliser(mask, "seq-mean-token-mean") == 2.0


def test_extra_passes_join_the_graph_without_changing_values_or_gradients():
    w = torch.tensor([2.0], requires_grad=True)
    out = (w * torch.tensor([1.0, 3.0]), torch.tensor([1, 2]))
    extra = [(w * 5.0, torch.tensor([7]))]
    tied = tie_extra_passes(out, extra)
    assert tied[0].tolist() == [2.0, 6.0] and tied[1].tolist() == [1, 2]
    tied[0].sum().backward()
    assert w.grad.tolist() == [4.0]
    assert tie_extra_passes(out[0], []) is out[0]
