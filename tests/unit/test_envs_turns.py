"""The turn bookkeeping shared by every built-in environment."""

from __future__ import annotations

import pytest

from sao.envs.base import StepResult, Task
from sao.envs.calc.env import CalcEnv
from sao.envs.code_repair.env import CodeRepairEnv
from sao.envs.reasoning_gym.env import ReasoningGymEnv
from sao.envs.style_stream.env import StyleStreamEnv
from sao.envs.turns import TurnLimitedEnvironment

TASK = Task("t-1", "Say yes: ", "yes")


class SayYes(TurnLimitedEnvironment):
    """Ends on `yes` (reward 1) or when the turns run out (reward 0)."""

    stop_tags = ("!",)

    def __init__(self, max_turns: int = 2) -> None:
        super().__init__(max_turns)
        self.started: list[str] = []

    def start(self, task: Task) -> str:
        if task.answer != "yes":
            raise ValueError("task.answer: this environment only says yes")
        self.started.append(task.task_id)
        return task.prompt

    def take_turn(self, action_text: str) -> StepResult:
        if action_text == "yes!":
            return StepResult("", 1.0, True, {"turn": self.turn})
        if self.last_turn:
            return StepResult("", 0.0, True, {"turn": self.turn})
        return StepResult("again", 0.0, False, {"turn": self.turn})


def test_turns_are_counted_and_the_last_one_ends_the_episode() -> None:
    env = SayYes(max_turns=3)
    assert env.reset(TASK) == "Say yes: " and env.started == ["t-1"]
    assert [env.step("no!").info["turn"] for _ in range(2)] == [1, 2]
    last = env.step("no!")
    assert (last.done, last.info["turn"]) == (True, 3)
    with pytest.raises(RuntimeError, match=r"SayYes.step: the episode has ended; call reset"):
        env.step("yes!")
    env.reset(TASK)
    assert env.turn == 0 and env.step("yes!").reward == 1.0


def test_steps_before_reset_and_bad_tasks_are_refused() -> None:
    env = SayYes()
    with pytest.raises(RuntimeError, match=r"SayYes.step: call reset\(task\) first"):
        env.step("yes!")
    with pytest.raises(RuntimeError, match="no episode yet"):
        _ = env.task
    with pytest.raises(TypeError, match="task: expected Task"):
        env.reset("Say yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only says yes"):
        env.reset(Task("t-2", "Say no: ", "no"))
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("yes!")  # a refused task starts no episode


@pytest.mark.parametrize("max_turns", [0, -1, 1.5, True, "2"])
def test_max_turns_must_be_a_positive_int(max_turns: object) -> None:
    with pytest.raises(ValueError, match="max_turns: must be an int >= 1"):
        SayYes(max_turns=max_turns)  # type: ignore[arg-type]


def test_every_built_in_environment_uses_the_shared_guards() -> None:
    for env_class in (CalcEnv, CodeRepairEnv, StyleStreamEnv, ReasoningGymEnv):
        assert issubclass(env_class, TurnLimitedEnvironment)
        assert "step" not in vars(env_class) and "reset" not in vars(env_class)
