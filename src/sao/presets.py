"""The presets (SAO_SPEC section 6): one table of named algorithms, each with its description.

A preset's settings are deep-merged over the defaults, and a preset owns the algorithm: the keys
of `algo`, `critic` (but its pretraining size), `actor`, and any key a preset sets. An
environment's packaged file may set only `ENV_FILE_SECTIONS` (see `sao.config`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Preset:
    """A named algorithm: what it is in one line, and the settings it puts over the defaults."""

    description: str
    settings: dict[str, Any]


def deep_merge(base: dict[str, Any], *updates: dict[str, Any]) -> dict[str, Any]:
    """`base` with each update merged in turn, mappings key by key (`*options` ones too, so one
    `--set env.task_options.KEY=...` keeps the environment file's other keys)."""
    out = dict(base)
    for update in updates:
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = deep_merge(out[key], value)
            else:
                out[key] = value
    return out


# The config's defaults are `sao` (SAO_SPEC sections 3-5), so a preset "as sao" names only what
# it changes. The policy lambda `1 - 1/(1.5 L)` of the ports is one of those defaults; it applies
# to token GAE alone, so every preset with another estimator, or a fixed lambda, turns it off.
_FIXED_LAMBDA = {"algo": {"adaptive_lambda_alpha": None}}
_CRITIC_OFF = {"critic": {"enabled": False}}
_GROUP = deep_merge(_FIXED_LAMBDA, {"rollout": {"group_size": 8}, "algo": {"advantage": "group"}})
# The baselines' PPO (SAO_SPEC section 6): clip-higher window 0.2 / 0.28, and 4 mini-batch updates
# per batch against the learner's old log-probs, 1 epoch (verl's GRPO recipes: a mini-batch of a
# quarter of the batch, ppo_epochs 1), so the ratio moves off 1 after the first update.
_PPO_CLIP = {
    "algo": {
        "policy_loss": "ppo_clip",
        "eps_low": 0.2,
        "eps_high": 0.28,
        "ppo_minibatches": 4,
        "ppo_epochs": 1,
    }
}

PRESETS: dict[str, Preset] = {
    "sao": Preset(
        "1 rollout/prompt, skip-obs token GAE (lambda 1 - 1/(1.5 L)), critic K=2 with frozen attention, DIS",
        {},
    ),
    "sao_mc": Preset(
        "as sao, Monte-Carlo actor advantages R - V(s_t) (algo.lambda_actor=1)",
        deep_merge(_FIXED_LAMBDA, {"algo": {"lambda_actor": 1.0}}),
    ),
    "sao_lambda095": Preset(
        "as sao, fixed policy lambda 0.95 (SAO_SPEC section 5's default)",
        deep_merge(_FIXED_LAMBDA, {"algo": {"lambda_actor": 0.95}}),
    ),
    "sao_mb4": Preset(
        "as sao, DIS in 4 mini-batch updates per batch (as many optimizer steps as grpo takes)",
        {"algo": {"dis_minibatches": 4}},
    ),
    "grpo": Preset(
        "G=8 with group barrier, group-normalised advantage, PPO clip in 4 mini-batches vs the learner's old log-probs",
        deep_merge(_GROUP, _CRITIC_OFF, _PPO_CLIP),
    ),
    "grpo_dis": Preset(
        "G=8 with group barrier, group-normalised advantage, DIS vs rollout log-probs",
        deep_merge(_GROUP, _CRITIC_OFF),
    ),
    "vapo_nodis": Preset(
        "as sao, but PPO clip in 4 mini-batches vs the learner's old log-probs", _PPO_CLIP
    ),
    "running_mean": Preset(
        "1 rollout/prompt, R - mean(last W rewards), DIS",
        deep_merge(_FIXED_LAMBDA, _CRITIC_OFF, {"algo": {"advantage": "running_mean"}}),
    ),
    "sao_k1": Preset("as sao, critic K=1", {"critic": {"k_updates": 1}}),
    "sao_fixed_critic": Preset(
        "as sao, critic K=0: values as value pretraining left them, never updated online",
        {"critic": {"k_updates": 0}},
    ),
    "sao_full_critic": Preset(
        "as sao, no frozen attention in the critic", {"critic": {"freeze": ["none"]}}
    ),
    "sao_step_mean": Preset(
        "as sao, step-level GAE, step value = mean of token values",
        deep_merge(_FIXED_LAMBDA, {"algo": {"advantage": "step_gae", "step_value": "mean"}}),
    ),
    "sao_step_last": Preset(
        "as sao, step-level GAE, step value = last token's value",
        deep_merge(_FIXED_LAMBDA, {"algo": {"advantage": "step_gae", "step_value": "last"}}),
    ),
}

# What an environment's packaged file (`sao/configs/ENV.yaml`) may set: how the environment is
# run, sampled, warm-started and sized. Everything else (`algo`, `critic` with its value
# pretraining, `actor`, and any key some preset sets, such as `rollout.group_size`) belongs to the
# presets, so `--preset X` means the same algorithm on every environment. A packaged file that
# sets one stops the run with one line; a user's own `--config`/`--set` may, and each such
# setting is named by `algorithm_overrides` (the CLI prints it as a warning).
ENV_FILE_SECTIONS = ("env", "rollout", "sft", "train")
_ALGORITHM_SECTIONS = ("algo", "critic", "actor")


def leaf_items(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}}` -> `{"a.b": 1}`; `*options` dicts are leaves (they are single fields)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and "options" not in key:
            out.update(leaf_items(value, f"{dotted}."))
        else:
            out[dotted] = value
    return out


def under(key: str, sections: tuple[str, ...]) -> bool:
    """True if dotted `key` is one of `sections` or inside one."""
    return any(key == s or key.startswith(f"{s}.") for s in sections)


def _preset_keys() -> set[str]:
    return {key for preset in PRESETS.values() for key in leaf_items(preset.settings)}


def is_algorithm_key(key: str) -> bool:
    """True for settings that presets own (see `ENV_FILE_SECTIONS`)."""
    if key in _preset_keys():
        return True
    return under(key, _ALGORITHM_SECTIONS) and not under(key, ("critic.pretrain",))
