"""Sharding the learner's models across ranks with torch FSDP2 (`fully_shard`).

When the learner runs in a process group of more than one rank (one process per device, e.g.
started by `torchrun --nproc-per-node N`), each decoder layer and then the whole model become FSDP2
units: parameters, gradients and optimizer state are split across the ranks and gathered layer by
layer for each forward and backward pass. Gradients are averaged across ranks: each rank trains
its part of the batch with losses scaled so that the average is the whole batch's gradient
(`sao.learner.data_parallel`), so a sharded step is the unsharded step. With one rank nothing is
wrapped and the models are plain modules.

State for checkpoints is always whole (`full_state_dict`, `optimizer_state`): a sharded learner gathers
it in the format an unsharded one writes, so a run checkpointed on N ranks resumes on any number.
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.optim import Optimizer
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


def full_state_dict(model: nn.Module, copy: bool = True) -> dict[str, Tensor]:
    """`model`'s whole weights, detached, on the CPU; under FSDP2 every rank must call it.

    A copy, or with `copy=False` the live tensors wherever they are whole on the CPU already
    (for writing out before the next update changes them). Names that share one tensor (a tied
    embedding and output layer) share one copy, as they share the original.
    """
    copies: dict[tuple, Tensor] = {}
    state: dict[str, Tensor] = {}
    for name, tensor in model.state_dict().items():
        if isinstance(tensor, DTensor):
            # A gathered tensor is freed once copied, so its address says nothing of sharing.
            state[name] = full_tensor(tensor.detach()).to("cpu", copy=copy)
            continue
        whole = tensor.detach()
        key = (
            whole.untyped_storage().data_ptr(),
            whole.storage_offset(),
            whole.shape,
            whole.stride(),
            whole.dtype,
            whole.device,
        )
        if key not in copies:
            copies[key] = whole.to("cpu", copy=copy)
        state[name] = copies[key]
    return state


def global_norm_value(norm: Tensor) -> float:
    """A gradient norm from `clip_grad_norm_` as a float (reduced across ranks when sharded)."""
    return float(full_tensor(norm.detach()))


def load_model_state(model: nn.Module, state: dict[str, Tensor]) -> None:
    """Load a whole `state` (from `full_state_dict`) into `model`, sharding it where `model` is."""
    if not is_sharded(model):
        model.load_state_dict(state)
        return
    # A copy: loading replaces the dict's tensors with this rank's shards, in place.
    set_model_state_dict(model, dict(state), options=StateDictOptions(full_state_dict=True))


def optimizer_state(model: nn.Module, optimizer: Optimizer) -> dict[str, Any]:
    """`optimizer.state_dict()` as an unsharded learner has it (parameters by position), whole
    even when `model` is sharded (a collective then: every rank must call)."""
    if not is_sharded(model):
        return optimizer.state_dict()
    by_name = get_optimizer_state_dict(
        model, optimizer, options=StateDictOptions(full_state_dict=True)
    )
    return _names_to_positions(by_name)


def load_optimizer_state(model: nn.Module, optimizer: Optimizer, state: dict[str, Any]) -> None:
    """Load `state` (from `optimizer_state`) into `optimizer`, sharding it where `model` is."""
    if not is_sharded(model):
        optimizer.load_state_dict(state)
        return
    names = {id(p): n for n, p in model.named_parameters()}
    group_names = [[names[id(p)] for p in g["params"]] for g in optimizer.param_groups]
    set_optimizer_state_dict(
        model,
        optimizer,
        _positions_to_names(state, group_names),
        options=StateDictOptions(full_state_dict=True),
    )


def _names_to_positions(state: dict[str, Any]) -> dict[str, Any]:
    """An optimizer state keyed by parameter name -> keyed by position across the groups, the
    layout of `Optimizer.state_dict()`."""
    position: dict[str, int] = {}
    groups = []
    for group in state["param_groups"]:
        ids = [position.setdefault(name, len(position)) for name in group["params"]]
        groups.append({**group, "params": ids})
    return {
        "state": {position[name]: v for name, v in state["state"].items()},
        "param_groups": groups,
    }


def _positions_to_names(state: dict[str, Any], group_names: list[list[str]]) -> dict[str, Any]:
    """The inverse of `_names_to_positions`, given each group's parameter names in order.

    Raises:
        ValueError: when the state's groups do not hold as many parameters as the optimizer's.
    """
    sizes = [len(g["params"]) for g in state["param_groups"]]
    if sizes != [len(names) for names in group_names]:
        raise ValueError(
            f"optimizer state: parameter groups of sizes {sizes} do not fit this optimizer's "
            f"{[len(names) for names in group_names]}"
        )
    name_of = {
        pos: name
        for g, names in zip(state["param_groups"], group_names, strict=True)
        for pos, name in zip(g["params"], names, strict=True)
    }
    groups = [
        {**g, "params": names} for g, names in zip(state["param_groups"], group_names, strict=True)
    ]
    # Copies, as in `load_model_state`: loading shards the per-parameter dicts in place.
    moments = {name_of[k]: dict(v) for k, v in state["state"].items()}
    return {"state": moments, "param_groups": groups}
