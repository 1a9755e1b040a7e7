"""How the learner's models run: on which device, in which precision, with activation checkpointing.

- Device: `train.learner_device` (and `rollout.engine_device` for the engine) name a torch
  device; `resolve_device` turns the name into one, failing in one line when it is not there.
- Precision: `train.learner_precision: bf16` runs forward passes under bf16 autocast while the
  parameters, their gradients and the optimizer state stay fp32 (the master weights), so small
  updates are not rounded away. What a forward returns (log-probs, values) is cast to fp32, so
  the losses and advantages are computed in fp32 either way.
- Gradient checkpointing: each decoder layer's activations are dropped after the forward pass
  and recomputed in the backward pass (transformers' own checkpointing switch: named
  `activation_checkpointing_enable` in 5.24, `gradient_checkpointing_enable` in 5.0 and 5.17, the
  old name a deprecated alias in 5.24; whichever this transformers has is called).
- Pass recomputation: a whole forward pass keeps only its outputs and runs again in the backward
  pass (`recomputed_per_pass`), so the activations of one pass at most are held at a time.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint
from transformers import PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer

from sao.models.kernels import use_kernels

AUTOCAST_DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}
"""`train.learner_precision` -> the autocast dtype of forward passes (None: plain fp32)."""


def resolve_device(name: str) -> torch.device:
    """The torch device `name` (`cpu`, `cuda`, `cuda:N`, `mps`) stands for on this process.

    Under an initialised process group, plain `cuda` is this rank's GPU (`cuda:LOCAL_RANK`), so
    one config serves every rank.

    Raises:
        ValueError: one line, when the device type is not available here or the index is out of
            range.
    """
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r}: CUDA is not available on this machine")
        if device.index is None and dist.is_available() and dist.is_initialized():
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(
                f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r}: MPS is not available on this machine")
    return device


def model_on_device(model: nn.Module, name: str) -> nn.Module:
    """`model` itself when it is already on device `name`, else a copy moved there.

    For handing weights to an engine on another device without moving the caller's model.
    """
    device = resolve_device(name)
    current = next(model.parameters()).device
    if current.type == device.type and (device.index is None or current.index == device.index):
        return model
    return copy.deepcopy(model).to(device)


@contextlib.contextmanager
def autocast(precision: str, device: torch.device) -> Iterator[None]:
    """Autocast for `precision` on `device` (a no-op for fp32)."""
    if precision not in AUTOCAST_DTYPES:
        raise ValueError(
            f"learner precision: must be one of {sorted(AUTOCAST_DTYPES)}, got {precision!r}"
        )
    dtype = AUTOCAST_DTYPES[precision]
    if dtype is None:
        yield
        return
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield


def mixed_precision_forward(
    fn: Callable[..., Any], precision: str, device: torch.device
) -> Callable[..., Any]:
    """`fn` run under `precision`'s autocast, its floating outputs (a tensor or a tuple) in fp32.

    The arguments pass through unchanged, so any forward signature can be wrapped.
    """
    if precision == "fp32":
        return fn

    def run(*args: Any, **kwargs: Any) -> Any:
        with autocast(precision, device):
            out = fn(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(_fp32(t) for t in out)
        return _fp32(out)

    return run


def recomputed_per_pass(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` that, while gradients are on, keeps none of its activations, only its outputs, and
    runs again in the backward pass (`torch.utils.checkpoint`).

    A learner batch is several forward passes whose outputs are stitched into one loss, so
    without this every pass's activations live until that loss's single backward pass: the peak
    grows with the batch. Recomputed per pass, it is one pass's, at the price of one more forward
    pass. The models run in eval mode (no dropout), so the recomputation is exact.
    """

    def run(*args: Any) -> Any:
        if not torch.is_grad_enabled():
            return fn(*args)
        return checkpoint(fn, *args, use_reentrant=False)

    return run


def _fp32(t: Any) -> Any:
    return t.float() if isinstance(t, Tensor) and t.is_floating_point() else t


def enable_gradient_checkpointing(model: nn.Module) -> int:
    """Checkpoint every decoder layer of `model` (an HF model, or a module holding one); returns
    how many layers will recompute their activations.

    transformers checkpoints a layer only while that layer is in training mode, and the learner
    runs in eval mode (its log-probs must be the engine's function of the weights: no dropout).
    So the layers' own `training` flag is set, and only theirs: their submodules (attention,
    experts, norms) stay in eval mode and compute exactly what they compute without
    checkpointing.

    Raises:
        ValueError: if `model` holds no HF model that supports gradient checkpointing.
    """
    hf_models = [
        m
        for m in model.modules()
        if isinstance(m, PreTrainedModel) and m.supports_gradient_checkpointing
    ]
    if not hf_models:
        raise ValueError(
            f"gradient checkpointing: {type(model).__name__} holds no transformers model that "
            "supports it"
        )
    # The outermost HF model enables it for every layer below it.
    _checkpointing_switch(hf_models[0])({"use_reentrant": False})
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    for layer in layers:
        layer.training = True
    return sum(layer.gradient_checkpointing for layer in layers)


def _checkpointing_switch(model: PreTrainedModel) -> Callable[[dict[str, Any]], None]:
    """The call that turns on `model`'s checkpointing with the given checkpoint kwargs.

    The old name still works on new versions but warns there, so the new one is preferred.
    """
    if hasattr(model, "activation_checkpointing_enable"):
        return lambda kwargs: model.activation_checkpointing_enable(
            activation_checkpointing_kwargs=kwargs
        )
    return lambda kwargs: model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def prepare_model(
    model: nn.Module, device: torch.device, gradient_checkpointing: bool, kernels: str = "auto"
) -> nn.Module:
    """`model` moved to `device` in place, in eval mode, on the fastest attention and experts
    kernels `device` has (`sao.models.kernels`; `kernels="eager"` for the reference ones),
    checkpointed when asked, and sharded across the process group's ranks when there are
    several (`sao.learner.sharding`)."""
    from sao.learner.sharding import shard_if_distributed

    model.to(device).eval()
    use_kernels(model, kernels)
    if gradient_checkpointing:
        enable_gradient_checkpointing(model)
    shard_if_distributed(model)
    return model
