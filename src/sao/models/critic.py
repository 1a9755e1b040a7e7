"""The value model (SAO_SPEC section 4): the policy's backbone plus a scalar value head.

Values are token-aligned exactly like log-probs: `values[:, t]` is read from the hidden state at
position `t - 1`, the one whose logits predict token `t`. Column 0 has no predecessor and is 0. So
`values[:, t]` is the critic's estimate of the return from the state in which action token `t` is
chosen, which is what skip-observation GAE reads at action positions.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from transformers import AutoConfig, AutoModel, PreTrainedModel

from sao.models.policy import packed_inputs, position_ids_from_mask

_CONFIG_DIR = "backbone"
_WEIGHTS_FILE = "value_model.safetensors"
_META_FILE = "value_model.json"

# Module names that hold a layer's attention in HF decoders (Qwen2/3, Qwen3-MoE, Llama, Mistral:
# `self_attn`; GPT-2: `attn`; GPT-NeoX: `attention`; Falcon/ChatGLM: `self_attention`).
ATTENTION_MODULE_NAMES = frozenset({"self_attn", "attn", "attention", "self_attention"})


class ValueModel(nn.Module):
    """A decoder backbone (`AutoModel`-style, no LM head) with a `Linear(hidden, 1)` value head.

    Args:
        backbone: a base model whose output has `last_hidden_state` `[B, T, H]` and whose config
            has `hidden_size` (e.g. `Qwen3MoeModel`, `LlamaModel`).
        head_init_std: std of the head's normal initialisation (bias starts at 0). Small rather
            than zero, so the backbone receives a gradient from the first critic step, while the
            initial values stay near 0 (about `head_init_std * sqrt(H)` after the final norm).
    """

    def __init__(self, backbone: PreTrainedModel, head_init_std: float = 1e-2) -> None:
        super().__init__()
        hidden_size = getattr(getattr(backbone, "config", None), "hidden_size", None)
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(
                f"ValueModel: backbone {type(backbone).__name__} has no config.hidden_size"
            )
        if head_init_std < 0:
            raise ValueError(f"ValueModel: head_init_std must be >= 0, got {head_init_std}")
        self.backbone = backbone
        self.value_head = nn.Linear(hidden_size, 1, dtype=torch.float32)
        nn.init.normal_(self.value_head.weight, std=head_init_std)
        nn.init.zeros_(self.value_head.bias)

    @classmethod
    def from_policy(cls, policy: PreTrainedModel, head_init_std: float = 1e-2) -> ValueModel:
        """A critic whose backbone is a deep copy of `policy`'s base model (its warm start).

        The copy shares no tensors with the policy, so training one never moves the other.
        """
        backbone = policy.base_model
        if backbone is policy:
            raise ValueError(
                f"ValueModel.from_policy: {type(policy).__name__} has no base model "
                f"(attribute {policy.base_model_prefix!r}); pass a causal LM such as Qwen3MoeForCausalLM"
            )
        return cls(copy.deepcopy(backbone), head_init_std=head_init_std)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None,
        packed_positions: Tensor | None = None,
    ) -> Tensor:
        """`[B, T]` fp32 values, token-aligned like log-probs (column 0 is 0).

        Position ids count real tokens only, as in `sao.models.policy`, so the policy and the
        critic see the same positions for the same tokens. With `packed_positions` (and
        `attention_mask` None) each row holds several sequences side by side (see
        `sao.models.policy.packed_inputs`); the column of each sequence's first token is then
        meaningless.
        """
        if packed_positions is not None:
            inputs = packed_inputs(input_ids, packed_positions)
        elif (
            attention_mask is None
            or input_ids.dim() != 2
            or attention_mask.shape != input_ids.shape
        ):
            raise ValueError(
                f"ValueModel: input_ids must be [B, T] and attention_mask the same shape, got "
                f"{tuple(input_ids.shape)} and "
                f"{None if attention_mask is None else tuple(attention_mask.shape)}"
            )
        else:
            inputs = {
                "attention_mask": attention_mask,
                "position_ids": position_ids_from_mask(attention_mask),
                "use_cache": False,
            }
        hidden = self.backbone(input_ids=input_ids, **inputs).last_hidden_state
        # The hidden state at t - 1 produced the logits for token t; the last one predicts nothing.
        values = self.value_head(hidden[:, :-1].float()).squeeze(-1)
        return torch.cat([values.new_zeros(values.shape[0], 1), values], dim=1)

    def save(self, path: str | Path) -> None:
        """Write the backbone config, all weights (head included) and metadata to directory `path`."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.backbone.config.save_pretrained(path / _CONFIG_DIR)
        state = {name: tensor.detach().contiguous() for name, tensor in self.state_dict().items()}
        save_file(state, str(path / _WEIGHTS_FILE))
        (path / _META_FILE).write_text(json.dumps({"format": 1}))

    @classmethod
    def load(cls, path: str | Path) -> ValueModel:
        """Rebuild a `ValueModel` written by `save` (local files only, never the network)."""
        path = Path(path)
        if not (path / _WEIGHTS_FILE).is_file() or not (path / _CONFIG_DIR).is_dir():
            raise ValueError(f"ValueModel.load: {str(path)!r} holds no saved value model")
        config = AutoConfig.from_pretrained(path / _CONFIG_DIR, local_files_only=True)
        backbone = AutoModel.from_config(config, dtype=torch.float32)
        model = cls(backbone, head_init_std=0.0)
        model.load_state_dict(load_file(str(path / _WEIGHTS_FILE)), strict=True)
        return model.eval()


def freeze_modules(model: nn.Module, patterns: list[str]) -> list[str]:
    """Set `requires_grad=False` on the parameters `patterns` select; return their names.

    Patterns:
        - `"attention"`: every parameter inside an attention module (q/k/v/o projections and
          their q/k norms), found by module name (`self_attn`, `attn`, ...), so it works for
          Qwen3-MoE and dense HF decoders alike. Layer norms outside attention and MLP/MoE
          weights (experts, router) stay trainable.
        - `"none"`: freeze nothing (must be the only pattern).
        - anything else: a regular expression searched in each parameter's full name.

    Raises:
        ValueError: naming a pattern that is not a valid regex or selects no parameter, or
            `"none"` combined with other patterns.
    """
    if not isinstance(patterns, list | tuple) or not all(isinstance(p, str) for p in patterns):
        raise ValueError(f"freeze_modules: patterns must be a list of strings, got {patterns!r}")
    if "none" in patterns:
        if len(patterns) > 1:
            raise ValueError(f"freeze_modules: 'none' cannot be combined with {patterns!r}")
        return []
    named = list(model.named_parameters())
    selected: set[str] = set()
    for pattern in patterns:
        if pattern == "attention":
            matches = attention_parameter_names(model)
        else:
            try:
                regex = re.compile(pattern)
            except re.error as err:
                raise ValueError(
                    f"freeze_modules: pattern {pattern!r} is not a regex ({err})"
                ) from None
            matches = {name for name, _ in named if regex.search(name)}
        if not matches:
            raise ValueError(
                f"freeze_modules: pattern {pattern!r} matches no parameter of {type(model).__name__}"
            )
        selected |= matches
    frozen = []
    for name, param in named:
        if name in selected:
            param.requires_grad_(False)
            frozen.append(name)
    return frozen


def attention_parameter_names(model: nn.Module) -> set[str]:
    """Names of the parameters inside `model`'s attention modules (what "attention" freezes)."""
    names: set[str] = set()
    for module_name, module in model.named_modules():
        if module_name.rsplit(".", 1)[-1] in ATTENTION_MODULE_NAMES:
            names |= {f"{module_name}.{p}" for p, _ in module.named_parameters()}
    return names
