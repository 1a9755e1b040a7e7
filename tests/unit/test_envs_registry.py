"""Building environments and task sources by name."""

from __future__ import annotations

import pytest

from sao.envs import registry
from sao.envs.base import Environment, StepResult, Task
from sao.envs.calc import CalcEnv, CalcTaskSource


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


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_ENVS", dict(registry._ENVS))
    monkeypatch.setattr(registry, "_SOURCES", dict(registry._SOURCES))


def test_calc_is_built_in() -> None:
    env = registry.make_env("calc", max_turns=6)
    assert isinstance(env, CalcEnv) and env.max_turns == 6
    source = registry.make_task_source("calc", difficulties=(2,))
    assert isinstance(source, CalcTaskSource)
    assert {t.meta["difficulty"] for t in source.train(20, seed=0)} == {2}
    assert "calc" in registry.known_env_names()
    assert "calc" in registry.known_task_source_names()


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown environment 'nope'; known: .*calc"):
        registry.make_env("nope")
    with pytest.raises(ValueError, match=r"unknown task source 'nope'; known: .*calc"):
        registry.make_task_source("nope")


def test_bad_keyword_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="max_turn"):
        registry.make_env("calc", max_turn=3)


def test_variants_reach_the_factory(clean_registry: None) -> None:
    registry.register_env("echo", EchoEnv, takes_variant=True)
    env = registry.make_env("echo:abcd", bonus=0.5)
    assert env.step("x").reward == 4.5
    with pytest.raises(ValueError, match="needs a variant"):
        registry.make_env("echo")
    with pytest.raises(ValueError, match="takes no variant"):
        registry.make_env("calc:hard")


def test_registration_is_checked(clean_registry: None) -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register_env("calc", CalcEnv)
    with pytest.raises(ValueError, match="without ':'"):
        registry.register_env("a:b", CalcEnv)
    with pytest.raises(TypeError, match="factory"):
        registry.register_task_source("x", "not callable")  # type: ignore[arg-type]


def test_factories_must_return_the_right_kind(clean_registry: None) -> None:
    registry.register_env("wrong", lambda: "an env")
    with pytest.raises(TypeError, match="not an Environment"):
        registry.make_env("wrong")
