"""Building environments, task sources and demonstrations by name, from one registration each."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sao.config import ConfigError
from sao.envs import registry
from sao.envs.base import Environment, StepResult, Task, TaskSource
from sao.envs.calc.env import CalcEnv
from sao.envs.calc.tasks import CalcTaskSource
from sao.envs.demonstration import TeacherTrajectory, Turn
from sao.envs.registration import EnvRegistration


class EchoEnv(Environment):
    """Ends at once, rewarding the variant's length (enough to tell variants apart)."""

    max_turns = 1
    stop_tags = ("</answer>",)

    def __init__(self, variant: str, bonus: float = 0.0) -> None:
        self.variant, self.bonus = variant, bonus

    def reset(self, task: Task) -> str:
        return task.prompt

    def step(self, action_text: str) -> StepResult:
        return StepResult("", len(self.variant) + self.bonus, True, {"end_reason": "answer"})


def _echo_demonstrations(variant: str, n: int, seed: int) -> list[TeacherTrajectory]:
    task = Task(f"echo-{seed}", "Say: ", variant)
    return [TeacherTrajectory(task, (Turn(f"<answer>{variant}</answer>", ""),), 1.0)] * n


def _known_variant(variant: str) -> None:
    if variant not in ("abcd", "xy"):
        raise ValueError(f"echo variant {variant!r} is unknown; known: abcd, xy")


ECHO = EnvRegistration(
    name="echo",
    make_env=EchoEnv,
    make_tasks=lambda variant: CalcTaskSource(),
    demonstrations=_echo_demonstrations,
    takes_variant=True,
    check_variant=_known_variant,
)


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))


def test_calc_is_built_in() -> None:
    env = registry.make_env("calc", max_turns=6)
    assert isinstance(env, CalcEnv) and env.max_turns == 6
    source = registry.make_task_source("calc", difficulties=(2,))
    assert isinstance(source, CalcTaskSource)
    assert {t.meta["difficulty"] for t in source.train(20, seed=0)} == {2}
    assert registry.known_env_names() == [
        "calc",
        "code_repair",
        "reasoning_gym",
        "style_stream",
        "tool_calc",
    ]


def test_every_built_in_registration_is_complete() -> None:
    for name in registry.known_env_names():
        registration = registry.registration_for(name)
        assert registration.name == name
        assert registration.demonstrations is not None
    assert registry.registration_for("reasoning_gym:lcm").takes_variant


@pytest.mark.parametrize(
    "name", ["calc", "code_repair", "style_stream", "tool_calc", "reasoning_gym:basic_arithmetic"]
)
def test_every_teacher_returns_teacher_trajectories_played_by_its_environment(name: str) -> None:
    registration = registry.registration_for(name)
    variant = name.partition(":")[2]
    demos = registration.demonstrations(*([variant] if variant else []), 3, 0)
    assert len(demos) == 3
    for demo in demos:
        assert isinstance(demo, TeacherTrajectory) and demo.turns
        assert 0.0 <= demo.reward <= 1.0
        assert demo.segments()[0] == (demo.task.prompt, False)
        assert demo.turns[-1].observation == ""  # the environment ended the episode


def test_listing_names_imports_no_environment() -> None:
    code = (
        "import sys; from sao.envs import known_env_names; print(known_env_names()); "
        "print(sorted(m.split('.')[-1] for m in sys.modules if m.split('.')[0] == 'reasoning_gym' "
        "or m.split('.')[:3] in [['sao', 'envs', e] for e in known_env_names()]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names, imported = out.stdout.splitlines()
    assert names == "['calc', 'code_repair', 'reasoning_gym', 'style_stream', 'tool_calc']"
    assert imported == "[]"


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown environment 'nope'; known: calc, code_repair"):
        registry.make_env("nope")
    with pytest.raises(ValueError, match=r"unknown environment 'nope'; known: .*calc"):
        registry.make_task_source("nope")


def test_bad_keyword_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="max_turn"):
        registry.make_env("calc", max_turn=3)


def test_variants_reach_every_factory(clean_registry: None) -> None:
    registry.register(ECHO)
    env = registry.make_env("echo:abcd", bonus=0.5)
    assert env.step("x").reward == 4.5
    assert isinstance(registry.make_task_source("echo:abcd"), TaskSource)
    assert (
        registry.make_demonstrations("echo:xy", 2, seed=0)
        == [[("Say: ", False), ("<answer>xy</answer>", True)]] * 2
    )
    with pytest.raises(ValueError, match="needs a variant"):
        registry.make_env("echo")
    with pytest.raises(ValueError, match="takes no variant"):
        registry.make_env("calc:hard")


def test_registration_is_checked(clean_registry: None) -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(EnvRegistration("calc", CalcEnv, CalcTaskSource))
    registry.register(ECHO)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(ECHO)
    with pytest.raises(ValueError, match="without ':'"):
        EnvRegistration("a:b", CalcEnv, CalcTaskSource)
    with pytest.raises(TypeError, match="make_tasks"):
        EnvRegistration("x", CalcEnv, "not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="EnvRegistration"):
        registry.register("calc")  # type: ignore[arg-type]


def test_factories_must_return_the_right_kind(clean_registry: None) -> None:
    registry.register(EnvRegistration("wrong", lambda: "an env", CalcTaskSource))
    with pytest.raises(TypeError, match="not an Environment"):
        registry.make_env("wrong")
    with pytest.raises(ValueError, match="no warm-start demonstrations"):
        registry.make_demonstrations("wrong", 1, seed=0)
    registry.register(
        EnvRegistration("shapeless", CalcEnv, CalcTaskSource, demonstrations=lambda n, s: [[]])
    )
    with pytest.raises(TypeError, match="TeacherTrajectory"):
        registry.make_demonstrations("shapeless", 1, seed=0)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nope", "env.name: unknown environment 'nope'; known: calc, code_repair, reasoning_gym"),
        ("calc:hard", "env.name: 'calc' takes no variant, got 'calc:hard'"),
        ("reasoning_gym", "env.name: 'reasoning_gym' needs a variant, as in 'reasoning_gym:<"),
        ("reasoning_gym:no_such_set", "env.name: reasoning_gym dataset 'no_such_set' is unknown"),
        ("", "env.name: expected a non-empty name"),
    ],
)
def test_check_env_name_says_what_is_wrong_in_one_line(name: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        registry.check_env_name(name)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_check_env_name_accepts_known_names(clean_registry: None) -> None:
    registry.register(ECHO)
    for name in (
        "calc",
        "code_repair",
        "style_stream",
        "reasoning_gym:basic_arithmetic",
        "echo:xy",
    ):
        registry.check_env_name(name)
    with pytest.raises(ConfigError, match="echo variant 'zz' is unknown"):
        registry.check_env_name("echo:zz")
