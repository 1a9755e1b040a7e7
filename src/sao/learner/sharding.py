"""Sharding the learner's models across ranks with torch FSDP2 (`fully_shard`).

When the learner runs in a process group of more than one rank (one process per device, e.g.
started by `torchrun --nproc-per-node N`), each decoder layer and then the whole model become FSDP2
units: parameters, gradients and optimizer state are split across the ranks and gathered layer by
layer for each forward and backward pass. Every rank computes the same loss function; gradients
are averaged across ranks, so when every rank is given the same batch a sharded step is the
unsharded step. With one rank nothing is wrapped and the models are plain modules.
"""

from __future__ import annotations

import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from transformers.modeling_layers import GradientCheckpointingLayer


def world_size() -> int:
    """Ranks in the default process group (1 when there is none)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def should_shard(ranks: int) -> bool:
    """Whether a learner spread over `ranks` processes shards its models (more than one rank)."""
    if ranks < 1:
        raise ValueError(f"should_shard: ranks must be >= 1, got {ranks}")
    return ranks > 1


def shard_units(model: nn.Module) -> list[nn.Module]:
    """The modules that become FSDP2 units, innermost first: each decoder layer, then `model`.

    A layer is a unit of its own so that only one layer's full parameters exist at a time;
    embeddings, final norm, LM or value head belong to the root unit.
    """
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    return [*layers, model]


def shard_if_distributed(model: nn.Module) -> int:
    """Apply `fully_shard` to `shard_units(model)` when `should_shard(world_size())`; returns the
    number of units wrapped (0 when the model stays whole)."""
    if not should_shard(world_size()) or is_sharded(model):
        return 0
    units = shard_units(model)
    for unit in units:
        fully_shard(unit)
    return len(units)


def is_sharded(model: nn.Module) -> bool:
    """Whether any parameter of `model` is a DTensor (sharded by FSDP2)."""
    return any(isinstance(p, DTensor) for p in model.parameters())


def full_tensor(t: Tensor) -> Tensor:
    """The whole tensor behind a shard (a collective: every rank must call it), else `t`."""
    return t.full_tensor() if isinstance(t, DTensor) else t


def full_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """A detached CPU copy of `model`'s whole weights; under FSDP2 every rank must call it."""
    return {k: full_tensor(v.detach()).to("cpu", copy=True) for k, v in model.state_dict().items()}


def global_norm_value(norm: Tensor) -> float:
    """A gradient norm from `clip_grad_norm_` as a float (reduced across ranks when sharded)."""
    return float(full_tensor(norm.detach()))
