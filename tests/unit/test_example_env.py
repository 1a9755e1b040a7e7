"""The custom-environment example of docs/environments.md (examples/my_env.py) works as shown."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sao.envs.base import END_ANSWER, END_MAX_TURNS, Environment
from sao.envs.registry import make_demonstrations, make_env, make_task_source

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "my_env.py"


def _load() -> ModuleType:
    """Import examples/my_env.py once (registering `reverse`), as a user's script would."""
    if "my_env" not in sys.modules:
        spec = importlib.util.spec_from_file_location("my_env", EXAMPLE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["my_env"] = module
        spec.loader.exec_module(module)
    return sys.modules["my_env"]


def test_registered_environment_rewards_the_reversed_word() -> None:
    my_env = _load()
    env = make_env("reverse")
    assert isinstance(env, Environment)
    task = make_task_source("reverse").test(1, seed=0)[0]
    word = task.prompt.removeprefix("Reverse: ").strip()
    assert task.answer == word[::-1]
    assert env.reset(task) == task.prompt
    result = env.step(f"<answer>{word[::-1]}</answer>")
    assert (result.reward, result.done, result.info["end_reason"]) == (1.0, True, END_ANSWER)
    env.reset(task)
    assert env.step(f"<answer>{word}x</answer>").reward == 0.0
    my_env.register_once()  # a second registration is a no-op, not an error


@pytest.mark.parametrize("action", ["enots", "<answer>enots", "<python>print(1)</python>"])
def test_malformed_actions_earn_zero(action: str) -> None:
    _load()
    env = make_env("reverse", max_turns=2)
    env.reset(make_task_source("reverse").train(1, seed=0)[0])
    first = env.step(action)
    assert (first.reward, first.done) == (0.0, False)
    assert first.observation == "<output>error: answer inside answer tags</output>"
    last = env.step(action)
    assert (last.reward, last.done, last.info["end_reason"]) == (0.0, True, END_MAX_TURNS)


def test_splits_are_disjoint_and_demonstrations_are_imperfect() -> None:
    _load()
    source = make_task_source("reverse")
    train = {t.prompt for t in source.train(500, seed=0)}
    assert not train & {t.prompt for t in source.test(50, seed=0)}
    demos = make_demonstrations("reverse", 400, seed=0)
    right = sum(
        demo[1][0] == f"<answer>{demo[0][0].removeprefix('Reverse: ').strip()[::-1]}</answer>"
        for demo in demos
    )
    assert 0.6 <= right / len(demos) <= 0.8
