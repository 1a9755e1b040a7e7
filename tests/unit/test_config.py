"""Config tree: presets, YAML and dotted overrides, one-line errors that name the field."""

import pytest

from sao.config import (
    PRESETS,
    ConfigError,
    algorithm_overrides,
    load_config,
    load_run_config,
    save_config,
)


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
        ("sao", {"algo.adaptive_lambda_alpha": 1.5, "algo.advantage": "token_gae"}),
        ("sao_mc", {"algo.lambda_actor": 1.0, "algo.adaptive_lambda_alpha": None}),
        ("sao_lambda095", {"algo.lambda_actor": 0.95, "algo.adaptive_lambda_alpha": None}),
        ("sao_mb4", {"algo.dis_minibatches": 4, "algo.policy_loss": "dis"}),
        ("sao_k1", {"critic.k_updates": 1}),
        ("sao_fixed_critic", {"critic.k_updates": 0, "critic.enabled": True}),
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
        (["critic.enabled=false"], "token_gae needs a critic"),
        (["algo.eps_low"], "expected key.path=value"),
        (["train.max_env_error_rate=1.5"], "train.max_env_error_rate: Input should be less than"),
        (["train.max_env_error_rate=-0.1"], "train.max_env_error_rate: Input should be greater"),
        (["train.env_error_window=0"], "train.env_error_window: Input should be greater"),
    ],
)
def test_bad_fields_fail_with_one_line_naming_them(overrides, message):
    with pytest.raises(ConfigError) as info:
        load_config("sao", None, overrides)
    text = str(info.value)
    assert message in text and "\n" not in text


def test_environment_errors_stop_a_run_above_a_tenth_of_the_last_hundred_by_default():
    train = load_config("sao").train
    assert (train.max_env_error_rate, train.env_error_window) == (0.1, 100)
    edges = load_config("sao", None, ["train.max_env_error_rate=0", "train.env_error_window=1"])
    assert edges.train.max_env_error_rate == 0.0
    assert load_config("sao", None, ["train.max_env_error_rate=1"]).train.max_env_error_rate == 1


def test_unknown_preset_lists_the_allowed_ones():
    with pytest.raises(ConfigError, match="unknown preset 'ppo'.*grpo_dis"):
        load_config("ppo")


def test_adaptive_lambda_needs_token_gae():
    with pytest.raises(ConfigError, match="adaptive_lambda_alpha"):
        load_config("sao_step_mean", None, ["algo.adaptive_lambda_alpha=0.05"])
    assert load_config("sao", None, ["algo.adaptive_lambda_alpha=0.05"]).algo.adaptive_lambda_alpha


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("algo:\n  lambda_actor: 1.0\n", "algo.lambda_actor"),
        ("critic:\n  k_updates: 4\n", "critic.k_updates"),
        ("critic:\n  pretrain:\n    num_trajectories: 64\n", "critic.pretrain.num_trajectories"),
        ("rollout:\n  group_size: 4\n", "rollout.group_size"),
        ("actor:\n  lr: 0.01\n", "actor.lr"),
        ("model:\n  path: somewhere\n", "model.path"),
    ],
)
def test_an_environment_file_may_not_set_what_presets_own(monkeypatch, tmp_path, text, refused):
    import sao.config

    (tmp_path / "calc.yaml").write_text(text)
    monkeypatch.setattr(sao.config, "ENV_FILE_DIR", tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config("sao")
    assert f"environment file calc.yaml: sets {refused}," in str(info.value)


def test_an_environment_file_sets_environment_rollout_sft_and_train(monkeypatch, tmp_path):
    import sao.config

    (tmp_path / "calc.yaml").write_text(
        "env:\n  max_turns: 3\nrollout:\n  temperature: 0.5\nsft:\n  steps: 7\ntrain:\n  steps: 9\n"
    )
    monkeypatch.setattr(sao.config, "ENV_FILE_DIR", tmp_path)
    cfg = load_config("grpo_dis")
    assert (cfg.env.max_turns, cfg.rollout.temperature, cfg.sft.steps) == (3, 0.5, 7)
    assert cfg.train.steps == 9
    assert algorithm_overrides(cfg) == []


def test_algorithm_overrides_name_each_setting_the_preset_did_not_set(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("critic:\n  k_updates: 3\n  pretrain:\n    max_steps: 5\n")
    cfg = load_config("sao_k1", path, ["algo.lambda_actor=1.0", "train.steps=3"])
    assert algorithm_overrides(cfg) == [
        "algo.lambda_actor=1.0 overrides preset sao_k1's 0.95, unused while"
        " algo.adaptive_lambda_alpha sets lambda per trajectory"
        " (add --set algo.adaptive_lambda_alpha=null)",
        "critic.k_updates=3 overrides preset sao_k1's 1",
    ]


def test_a_run_config_reloads_under_its_own_preset(tmp_path):
    saved = load_config("grpo", overrides=["env.name=style_stream", "train.steps=4"])
    save_config(saved, tmp_path / "config.yaml")
    assert load_run_config(tmp_path) == saved
    assert load_run_config(tmp_path, ["train.steps=8"]).train.steps == 8


def test_one_option_key_merges_into_the_environment_files_mapping():
    packaged = load_config("sao", overrides=["env.name=style_stream"]).env.task_options
    cfg = load_config("sao", overrides=["env.name=style_stream", "env.task_options.switch_every=7"])
    assert packaged["switch_every"] != 7 and "request_rate" in packaged
    assert cfg.env.task_options == {**packaged, "switch_every": 7}


def test_a_run_config_reloads_without_the_environment_files_keys_it_did_not_use(tmp_path):
    ran = load_config("sao", overrides=["env.name=style_stream"])
    ran = ran.model_copy(update={"env": ran.env.model_copy(update={"task_options": {}})})
    save_config(ran, tmp_path / "config.yaml")
    assert load_run_config(tmp_path).env.task_options == {}


def test_a_file_naming_a_preset_gets_that_presets_settings_and_a_conflict_is_refused(tmp_path):
    path = tmp_path / "grpo.yaml"
    path.write_text("preset: grpo\n")
    cfg = load_config(yaml_path=path)
    assert (cfg.preset, cfg.algo.policy_loss, cfg.rollout.group_size) == ("grpo", "ppo_clip", 8)
    assert not cfg.critic.enabled
    assert load_config("grpo", path).preset == "grpo"
    with pytest.raises(ConfigError, match="'sao_mb4' was asked for but .* names 'grpo'"):
        load_config("sao_mb4", path)
    assert load_config(overrides=["preset=sao_mc"]).algo.lambda_actor == 1.0


def test_a_fixed_lambda_on_sao_needs_the_adaptive_one_off():
    cfg = load_config("sao", overrides=["algo.adaptive_lambda_alpha=null", "algo.lambda_actor=0.9"])
    assert algorithm_overrides(cfg) == [
        "algo.lambda_actor=0.9 overrides preset sao's 0.95",
        "algo.adaptive_lambda_alpha=None overrides preset sao's 1.5",
    ]


@pytest.mark.parametrize(
    "preset", ["sao_mb4", "vapo_nodis", "sao_k1", "sao_fixed_critic", "sao_full_critic"]
)
def test_a_preset_as_sao_shares_its_policy_lambda(preset):
    sao = load_config("sao").algo
    algo = load_config(preset).algo
    assert (algo.adaptive_lambda_alpha, algo.lambda_actor) == (
        sao.adaptive_lambda_alpha,
        sao.lambda_actor,
    )
