"""LoRA adapters (peft) for the policy and the critic over one frozen copy of the base weights.

With `model.lora.rank` > 0 the policy trains low-rank adapters on `model.lora.target_modules`
and nothing else. The critic is a second module tree whose base parameters are the very tensors
of the policy's base (`copy.deepcopy` with every parameter memoised to itself), so the base
exists once in memory; it carries adapters of its own on the target modules outside attention
(attention keeps no critic adapter, so the frozen-attention rule holds) plus its value head.
Since neither tree ever writes the shared base, engines are given merged weights computed out
of place (`merged_state_dict`), and a saved `policy/` is a plain checkpoint.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from sao.config import ConfigError, LoraConfig
from sao.models.critic import ATTENTION_MODULE_NAMES, ValueModel

ADAPTER = "default"
EXTRA_HINT = "pip install 'sao[lora]'"


def lora_enabled(settings: LoraConfig) -> bool:
    """Whether `settings` ask for adapters (rank 0 is full fine-tuning)."""
    return settings.rank > 0


def check_peft() -> None:
    """Refuse LoRA where the peft package is missing, in one line naming the extra."""
    import importlib.util

    if importlib.util.find_spec("peft") is None:
        raise ConfigError(f"model.lora.rank > 0: the peft package is not installed ({EXTRA_HINT})")


def add_adapters(model: nn.Module, settings: LoraConfig, targets: Sequence[str]) -> nn.Module:
    """Inject LoRA layers into `model` in place on `targets`; only they train afterwards."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import inject_adapter_in_model

    peft_config = PeftLoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        target_modules=list(targets),
        lora_dropout=0.0,  # the learner's log-probs must be the engine's function of the weights
        bias="none",
    )
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    try:
        inject_adapter_in_model(peft_config, model, adapter_name=ADAPTER)
    except ValueError as err:
        raise ConfigError(f"model.lora.target_modules={list(targets)}: {err}") from None
    adapters = [p for n, p in model.named_parameters() if ".lora_" in n]
    for parameter in adapters:
        parameter.requires_grad_(True)
    return model


def models_to_train(
    policy: nn.Module, settings: LoraConfig, with_critic: bool
) -> tuple[nn.Module, ValueModel | None]:
    """The policy and critic a learner trains: full copies at rank 0, else `lora_models`."""
    if lora_enabled(settings):
        return lora_models(policy, settings, with_critic)
    return policy, ValueModel.from_policy(policy) if with_critic else None


def lora_models(
    policy: nn.Module, settings: LoraConfig, with_critic: bool
) -> tuple[nn.Module, ValueModel | None]:
    """The policy with its adapters, and (if `with_critic`) the critic sharing its base.

    Raises:
        ConfigError: peft missing, or target modules that match nothing (for the critic:
            nothing outside attention).
    """
    check_peft()
    critic = None
    if with_critic:
        # Memoising every parameter makes the copy's modules hold the policy's own tensors.
        base = policy.base_model
        shared = copy.deepcopy(base, memo={id(p): p for p in base.parameters()})
        targets = critic_targets(shared, settings.target_modules)
        if not targets:
            raise ConfigError(
                f"model.lora.target_modules={settings.target_modules}: none is a linear layer "
                "outside attention, where the critic's adapters go (attention stays frozen)"
            )
        critic = ValueModel(add_adapters(shared, settings, targets))
    add_adapters(policy, settings, settings.target_modules)
    return policy, critic


def critic_targets(model: nn.Module, targets: Sequence[str]) -> list[str]:
    """Full names of the linear modules matching `targets` that are not inside attention."""
    names = []
    for name, module in model.named_modules():
        parts = name.split(".")
        if not isinstance(module, nn.Linear) or parts[-1] not in targets:
            continue
        if any(part in ATTENTION_MODULE_NAMES for part in parts):
            continue
        names.append(name)
    return names


def has_adapters(model: nn.Module) -> bool:
    """Whether `model` holds LoRA layers."""
    return any(".lora_" in name for name, _ in model.named_parameters())


def _lora_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    from peft.tuners.lora import LoraLayer

    return [(n, m) for n, m in model.named_modules() if isinstance(m, LoraLayer)]


def merged_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """`model`'s weights as the plain model's `state_dict`, each adapter's delta added.

    Computed out of place on detached CPU copies: the shared base is never written.
    """
    deltas: dict[str, Tensor] = {}
    for name, layer in _lora_layers(model):
        with torch.no_grad():
            deltas[f"{name}.weight"] = layer.get_delta_weight(ADAPTER).detach().cpu()
    merged: dict[str, Tensor] = {}
    for key, tensor in model.state_dict().items():
        if ".lora_" in key:
            continue
        plain = key.replace(".base_layer.", ".")
        value = tensor.detach().cpu().clone()
        if plain in deltas:
            value += deltas[plain].to(value.dtype)
        merged[plain] = value
    return merged


def plain_copy(model: nn.Module) -> nn.Module:
    """A copy of `model` without LoRA layers, the adapters merged in (an engine's model)."""
    if not has_adapters(model):
        return model
    copied = copy.deepcopy(model)
    for name, layer in _lora_layers(copied):
        parent_name, _, child = name.rpartition(".")
        parent = copied.get_submodule(parent_name) if parent_name else copied
        layer.merge(adapter_names=[ADAPTER])
        setattr(parent, child, layer.get_base_layer())
    return copied


def adapter_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """The trainable part of `model` (adapters, and a critic's value head), detached on CPU."""
    return {
        name: param.detach().cpu().clone()
        for name, param in model.named_parameters()
        if param.requires_grad
    }


def load_adapter_state(model: nn.Module, state: dict[str, Tensor]) -> None:
    """Load what `adapter_state_dict` wrote; every trainable tensor must be in `state`.

    Raises:
        ValueError: naming keys the state lacks or this model does not train.
    """
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    missing = sorted(trainable - set(state))
    extra = sorted(set(state) - trainable)
    if missing or extra:
        raise ValueError(
            f"adapter state does not fit this model: missing {missing[:3]}, unexpected "
            f"{extra[:3]} (was it written with the same model.lora settings?)"
        )
    model.load_state_dict(state, strict=False)


def with_weights(model: nn.Module, state: dict[str, Tensor], settings: LoraConfig) -> nn.Module:
    """`model` carrying a checkpoint's policy `state`: a whole state dict is loaded as it is;
    adapters (a LoRA run's checkpoint, `model` being its base) are added, loaded and merged,
    giving a plain model."""
    if not any(".lora_" in key for key in state):
        model.load_state_dict(state)
        return model
    if not lora_enabled(settings):
        raise ValueError("the checkpoint holds LoRA adapters but model.lora.rank is 0")
    add_adapters(model, settings, settings.target_modules)
    load_adapter_state(model, state)
    return plain_copy(model)
