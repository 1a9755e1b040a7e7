"""Which compute kernels a model's attention and mixture-of-experts layers run, chosen by device.

transformers 5.x lets a loaded model switch both at run time:

- attention (`set_attn_implementation`): `"sdpa"` is torch's `scaled_dot_product_attention`,
  which on CUDA dispatches to its flash-attention kernel (bf16/fp16, no mask: the learner's
  packed segments) or its memory-efficient kernel (with a mask: the engine's padded batches),
  and on CPU to a fused kernel; `"eager"` is the plain matmul-softmax-matmul in Python.
- experts (`set_experts_implementation`): `"grouped_mm"` runs every expert of a layer in one
  grouped matrix multiply (`torch.nn.functional.grouped_mm` / `torch._grouped_mm`: CUDA from
  compute capability 8.0, CPU from torch 2.9); `"eager"` loops over the experts.
  transformers' grouped multiply ignores autocast: it computes in the weights' dtype, so the
  learner's fp32 master weights under bf16 autocast would run it in fp32 (slow, and on CUDA
  outside what the kernel takes). `"sao_grouped_mm"` is the same multiply on the weights cast to
  the autocast dtype, as `nn.Linear` under autocast does, and plain `"grouped_mm"` without
  autocast. Older transformers (5.0) take no registered experts names; there `"auto"` uses
  `"grouped_mm"` on CPU and eager experts on CUDA.

`"auto"` takes the fast kernel of each where this device and this torch have it, and eager
otherwise; `"eager"` takes eager for both (the reference the fast path is tested against).
A model on `"sao_packed"` attention (`sao.models.packed_attention`) keeps it: it runs `sdpa`
itself, segment by segment.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from transformers import PreTrainedModel, Qwen3MoeConfig, Qwen3MoeForCausalLM
from transformers.integrations.moe import ExpertsInterface, grouped_mm_experts_forward

from sao.models.packed_attention import PACKED_ATTENTION

AUTOCAST_GROUPED_MM = "sao_grouped_mm"

KERNEL_CHOICES = ("auto", "eager")
"""What a caller may ask for: the fastest kernels the device has, or the eager reference."""


@dataclass(frozen=True)
class Kernels:
    """The attention and experts implementations a model runs (transformers' names)."""

    attention: str
    experts: str | None
    """None for a model without experts (a dense decoder)."""


def grouped_mm_runs_on(device: torch.device) -> bool:
    """Whether torch has a grouped matrix multiply kernel for `device`."""
    has_kernel = hasattr(torch.nn.functional, "grouped_mm") or hasattr(torch, "_grouped_mm")
    if not has_kernel:
        return False
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device) >= (8, 0)
    if device.type == "cpu":
        major, minor = (int(part) for part in torch.__version__.split(".")[:2])
        return (major, minor) >= (2, 9)
    return False


def autocast_grouped_mm_forward(
    experts: nn.Module, hidden_states: Tensor, top_k_index: Tensor, top_k_weights: Tensor
) -> Tensor:
    """transformers' grouped-multiply experts forward, in the autocast dtype when autocast is on.

    The weights are cast (a differentiable copy: gradients reach the fp32 master weights) and
    the forward runs on them; without autocast, or on weights already in its dtype, it is
    transformers' forward unchanged. On CUDA, where torch documents its grouped multiply for
    bf16 only, other dtypes (an fp32 learner or engine) run the eager experts instead.
    """
    device_type = hidden_states.device.type
    dtype = torch.get_autocast_dtype(device_type)
    weights = dict(experts.named_parameters(recurse=False))
    floating = [w for w in weights.values() if w.is_floating_point()]
    if not torch.is_autocast_enabled(device_type) or all(w.dtype == dtype for w in floating):
        if device_type == "cuda" and any(w.dtype != torch.bfloat16 for w in floating):
            return _eager_experts_forward(experts, hidden_states, top_k_index, top_k_weights)
        return grouped_mm_experts_forward(experts, hidden_states, top_k_index, top_k_weights)
    cast = {name: w.to(dtype) if w.is_floating_point() else w for name, w in weights.items()}
    # The module's forward dispatches back here, now on weights in the autocast dtype.
    out = torch.func.functional_call(
        experts, cast, (hidden_states.to(dtype), top_k_index, top_k_weights.to(dtype))
    )
    return out.to(hidden_states.dtype)


def _eager_experts_forward(experts: nn.Module, *args: Tensor) -> Tensor:
    """The experts class's own loop over experts (what transformers' dispatch wraps)."""
    eager = getattr(type(experts).forward, "__wrapped__", None)
    if eager is None:  # no wrapped loop to call: the grouped multiply after all
        return grouped_mm_experts_forward(experts, *args)
    return eager(experts, *args)


ExpertsInterface.register(AUTOCAST_GROUPED_MM, autocast_grouped_mm_forward)


@functools.cache
def takes_registered_experts() -> bool:
    """Whether this transformers lets a model switch to a registered experts name (5.17 does,
    5.0 does not)."""
    config = Qwen3MoeConfig(
        vocab_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
        num_key_value_heads=1, head_dim=8, num_experts=2, num_experts_per_tok=1,
        moe_intermediate_size=8, intermediate_size=8,
    )  # fmt: skip
    with torch.device("meta"):
        model = Qwen3MoeForCausalLM(config)
    try:
        model.set_experts_implementation(AUTOCAST_GROUPED_MM)
    except (ValueError, ImportError):
        return False
    return model.config._experts_implementation == AUTOCAST_GROUPED_MM


def fast_kernels_for(device: torch.device) -> Kernels:
    """The kernels `"auto"` picks on `device`: `sdpa`, and grouped experts where they run
    (transformers' own grouped experts on CPU where it takes no registered name, eager experts
    on CUDA there: see the module docstring)."""
    if not grouped_mm_runs_on(device):
        return Kernels("sdpa", "eager")
    if takes_registered_experts():
        return Kernels("sdpa", AUTOCAST_GROUPED_MM)
    return Kernels("sdpa", "grouped_mm" if device.type == "cpu" else "eager")


def use_kernels(model: nn.Module, choice: str = "auto") -> Kernels:
    """Switch `model` to the kernels `choice` names for the device its weights are on.

    A kernel the model or this transformers cannot take is left as it was (an old version
    without a kernel, a model class that does not route through transformers' interfaces).

    Args:
        model: an HF model, or a module holding one as `backbone` (the critic).
        choice: `"auto"` or `"eager"` (see the module docstring).

    Returns:
        What the model runs afterwards.

    Raises:
        ValueError: one line, for a `choice` that is not one of `KERNEL_CHOICES`.
    """
    if choice not in KERNEL_CHOICES:
        raise ValueError(f"kernels: must be one of {list(KERNEL_CHOICES)}, got {choice!r}")
    backbone = getattr(model, "backbone", model)
    if not isinstance(backbone, PreTrainedModel):
        raise ValueError(f"kernels: {type(model).__name__} holds no transformers model")
    device = next(backbone.parameters()).device
    wanted = fast_kernels_for(device) if choice == "auto" else Kernels("eager", "eager")
    config = backbone.config
    if config._attn_implementation != PACKED_ATTENTION:
        _try(lambda: backbone.set_attn_implementation(wanted.attention))
    if _has_experts(backbone):
        _try(lambda: backbone.set_experts_implementation(wanted.experts))
    return running_kernels(backbone)


def running_kernels(model: nn.Module) -> Kernels:
    """The attention and experts implementations `model` (or its `backbone`) runs now."""
    backbone = getattr(model, "backbone", model)
    config = backbone.config
    experts = config._experts_implementation if _has_experts(backbone) else None
    return Kernels(config._attn_implementation, experts)


def _has_experts(model: PreTrainedModel) -> bool:
    """Whether `model` has experts layers whose implementation transformers can switch."""
    return (
        hasattr(model, "set_experts_implementation")
        and getattr(model.config, "_experts_implementation", None) is not None
        and model._can_set_experts_implementation()
        and any(type(m).__name__.endswith("Experts") for m in model.modules())
    )


def _try(switch: Callable[[], object]) -> None:
    """Run `switch`; a kernel this model or transformers refuses leaves the model as it was."""
    with contextlib.suppress(ValueError, ImportError, NotImplementedError):
        switch()
