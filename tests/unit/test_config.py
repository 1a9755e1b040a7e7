"""Config tree: presets, YAML and dotted overrides, one-line errors that name the field."""

import pytest

from sao.config import PRESETS, ConfigError, load_config, save_config


def test_defaults_are_sao():
    cfg = load_config()
    assert cfg.preset == "sao"
    assert cfg.rollout.group_size == 1
    assert cfg.algo.advantage == "token_gae" and cfg.algo.policy_loss == "dis"
    assert (cfg.algo.eps_low, cfg.algo.eps_high) == (0.3, 5.0)
    assert cfg.critic.k_updates == 2 and cfg.critic.freeze == ["attention"]
    assert cfg.critic.optim.lr > cfg.actor.lr


@pytest.mark.parametrize(
    ("preset", "checks"),
    [
        (
            "grpo",
            {
                "rollout.group_size": 8,
                "algo.advantage": "group",
                "algo.policy_loss": "ppo_clip",
                "algo.eps_high": 0.28,
                "critic.enabled": False,
            },
        ),
        (
            "grpo_dis",
            {
                "rollout.group_size": 8,
                "algo.advantage": "group",
                "algo.policy_loss": "dis",
                "critic.enabled": False,
            },
        ),
        (
            "vapo_nodis",
            {"rollout.group_size": 1, "algo.policy_loss": "ppo_clip", "critic.enabled": True},
        ),
        ("running_mean", {"algo.advantage": "running_mean", "critic.enabled": False}),
        ("sao_k1", {"critic.k_updates": 1}),
        ("sao_full_critic", {"critic.freeze": ["none"]}),
        ("sao_step_mean", {"algo.advantage": "step_gae", "algo.step_value": "mean"}),
        ("sao_step_last", {"algo.advantage": "step_gae", "algo.step_value": "last"}),
    ],
)
def test_presets(preset, checks):
    cfg = load_config(preset)
    for dotted, expected in checks.items():
        node = cfg
        for key in dotted.split("."):
            node = getattr(node, key)
        assert node == expected, dotted


def test_run_directories_are_per_environment_and_preset():
    dirs = {
        str(load_config(preset, overrides=[f"env.name={env}"]).run_dir())
        for preset in ("sao", "grpo_dis")
        for env in ("calc", "code_repair", "reasoning_gym:basic_arithmetic")
    }
    assert "runs/calc_sao" in dirs and "runs/reasoning_gym_basic_arithmetic_grpo_dis" in dirs
    assert len(dirs) == 6


def test_all_presets_load():
    assert {load_config(name).preset for name in PRESETS} == set(PRESETS)


def test_yaml_then_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("algo:\n  eps_low: 0.25\ntrain:\n  steps: 7\n")
    cfg = load_config("sao", path, ["train.steps=9", "env.options={difficulty: 3}"])
    assert cfg.algo.eps_low == 0.25 and cfg.train.steps == 9
    assert cfg.env.options == {"difficulty": 3}
    save_config(cfg, tmp_path / "resolved.yaml")
    again = load_config("sao", tmp_path / "resolved.yaml")
    assert again == cfg


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algo.eps_lo=0.2"], "algo.eps_lo: unknown field"),
        (["algo.eps_low=1.5"], "algo.eps_low: Input should be less than 1"),
        (["rollout.precision=fp16"], "rollout.precision: Input should be 'fp32' or 'bf16'"),
        (["train.batch_size=abc"], "train.batch_size: Input should be a valid integer"),
        (["train.batch_size=30", "rollout.group_size=8"], "train.batch_size: must be a multiple"),
        (["critic.enabled=false"], "GAE needs a critic"),
        (["algo.eps_low"], "expected key.path=value"),
    ],
)
def test_bad_fields_fail_with_one_line_naming_them(overrides, message):
    with pytest.raises(ConfigError) as info:
        load_config("sao", None, overrides)
    text = str(info.value)
    assert message in text and "\n" not in text


def test_unknown_preset_lists_the_allowed_ones():
    with pytest.raises(ConfigError, match="unknown preset 'ppo'.*grpo_dis"):
        load_config("ppo")


def test_adaptive_lambda_needs_token_gae():
    with pytest.raises(ConfigError, match="adaptive_lambda_alpha"):
        load_config("sao_step_mean", None, ["algo.adaptive_lambda_alpha=0.05"])
    assert load_config("sao", None, ["algo.adaptive_lambda_alpha=0.05"]).algo.adaptive_lambda_alpha
